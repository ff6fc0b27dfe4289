//! Acting's part of the loop: the actuator, the state record it writes
//! (with the store and the engine whose memory goes with it), and the
//! events it notes for the outputs; lent to the actuator one call at a time.

use super::inputs::Engine;
use crate::act::actuator::Actuator;
use crate::act::events::Events;
use crate::act::lent;
use crate::act::state::{StateError, StateFile, StateStore};
use crate::clock::{Clock, unix_ms};
use crate::publish::metrics::Metrics;

/// The actuator and what it writes: the loop lends these, with the kernel,
/// policy, engine and its device map, for one call (`Daemon::lend`).
pub(super) struct Acting {
    pub(super) actuator: Actuator,
    pub(super) state: StateFile,
    pub(super) store: Option<StateStore>,
    pub(super) events: Events,
}

/// The record a previous run left in `store` (a fresh one without a
/// store). An unparsable record is moved aside (logged there); a newer
/// schema or an unreadable file stops the daemon rather than be
/// overwritten.
pub(super) fn load_record(store: Option<&StateStore>) -> Result<StateFile, StateError> {
    let Some(s) = store else {
        return Ok(StateFile::new(String::new()));
    };
    let (st, why) = s.load_or_set_aside()?;
    if let Some(why) = why {
        tracing::info!(path = %s.path().display(), "ignoring old state record: {why}");
    }
    Ok(st)
}

/// The state record as the actuator writes it: with the engine's memory.
pub(super) struct Keep<'a, E> {
    pub(super) state: &'a mut StateFile,
    pub(super) store: Option<&'a StateStore>,
    /// Only read; borrowed mutably so the record is `Send` for any engine.
    pub(super) engine: &'a mut E,
    pub(super) clock: Clock,
    pub(super) metrics: &'a Metrics,
}

impl<E: Engine> lent::Record for Keep<'_, E> {
    fn file(&mut self) -> &mut StateFile {
        self.state
    }

    fn save(&mut self) -> bool {
        self.state.prune();
        self.state.engine = self
            .engine
            .saved_state()
            .map(|s| crate::act::state::StoredEngine::new(s, self.clock.now(), unix_ms()));
        if let Some(store) = self.store
            && let Err(e) = store.save(self.state)
        {
            tracing::error!(error = %crate::human::cause(&e), "writing the state record failed");
            self.metrics.error("state_write");
            return false;
        }
        true
    }
}
