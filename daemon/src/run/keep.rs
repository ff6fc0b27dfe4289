//! The state record as the loop lends it to the actuator: the record, the
//! store it is written to, and the engine whose memory goes with it.

use super::inputs::Engine;
use crate::actuator;
use crate::clock::{Clock, unix_ms};
use crate::metrics::Metrics;
use crate::state::{StateFile, StateStore};

/// The state record as the actuator writes it: with the engine's memory.
pub(super) struct Keep<'a, E> {
    pub(super) state: &'a mut StateFile,
    pub(super) store: Option<&'a StateStore>,
    /// Only read; borrowed mutably so the record is `Send` for any engine.
    pub(super) engine: &'a mut E,
    pub(super) clock: Clock,
    pub(super) metrics: &'a Metrics,
}

impl<E: Engine> actuator::Record for Keep<'_, E> {
    fn file(&mut self) -> &mut StateFile {
        self.state
    }

    fn save(&mut self) -> bool {
        self.state.prune();
        self.state.engine = self
            .engine
            .saved_state()
            .map(|s| crate::state::StoredEngine::new(s, self.clock.now(), unix_ms()));
        if let Some(store) = self.store
            && let Err(e) = store.save(self.state)
        {
            tracing::error!(error = %e, "writing the state record failed");
            self.metrics.error("state_write");
            return false;
        }
        true
    }
}
