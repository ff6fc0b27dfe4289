//! The run loop's side of the recording: one call per pass writes what the
//! engine was told and what it answered, and journals changes.

use std::path::Path;
use std::time::Duration;

use policy::Plan;
use policy::engine::{EngineState, LocalTime};
use policy::snapshot::Snapshot;

use super::format::{ChangeRec, DecisionRec, Inputs, Pass, local_time_rec, nanos};
use super::journal::Journal;
use super::{Recorder, recording_dir, unix_ms};
use crate::kernel::Kernel;
use crate::run::{Daemon, Engine};

/// The daemon's recording and journal.
#[derive(Debug)]
pub struct LiveRecording {
    /// `None` when the policy's cap is 0 or the directory is unusable.
    recorder: Option<Recorder>,
    journal: Journal,
}

impl LiveRecording {
    /// Under `state_dir`: `recording/` (capped at `max_bytes`, 0 = none)
    /// and the change journal. A recording that cannot be set up is logged
    /// and left out; the daemon runs on.
    #[must_use]
    pub fn open(state_dir: &Path, max_bytes: u64, policy: &policy::Policy) -> Self {
        let recorder = if max_bytes == 0 {
            None
        } else {
            match Recorder::rolling(&recording_dir(state_dir), max_bytes, policy) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(error = %e, "no recording this run: cannot set up its directory");
                    None
                }
            }
        };
        if let Err(e) = std::fs::create_dir_all(state_dir) {
            tracing::warn!(path = %state_dir.display(), error = %e, "cannot create the state directory: no change journal");
        }
        Self {
            recorder,
            journal: Journal::new(state_dir, unix_ms()),
        }
    }

    /// Whether the next pass opens a segment (then the engine's memory
    /// before deciding is wanted).
    #[must_use]
    pub fn needs_engine(&self) -> bool {
        self.recorder.as_ref().is_some_and(Recorder::needs_start)
    }

    /// After a reload.
    pub fn policy_reloaded(&mut self, p: &policy::Policy, changed: bool) {
        if let Some(r) = &mut self.recorder {
            r.policy_reloaded(p, changed);
        }
    }
}

/// What the loop captured when it asked the engine.
#[derive(Debug)]
pub struct Asked {
    pub engine_before: Option<EngineState>,
    pub inputs: Inputs,
    pub local_time: Option<LocalTime>,
    pub elapsed: Duration,
    pub now: Duration,
}

impl<K: Kernel, E: Engine> Daemon<K, E> {
    /// Records one pass (after actuation, before `prev` moves on) and
    /// journals the changes it made. Failures are logged and counted, never
    /// fatal.
    pub(crate) fn record_pass(&mut self, asked: Option<Asked>, snap: &Snapshot, plan: &Plan) {
        let mono = self.now();
        let Some(rec) = &mut self.recording else {
            return;
        };
        let wall = unix_ms();
        if let Err(e) = rec
            .journal
            .observe(&self.history, &plan.decisions, mono, wall)
        {
            tracing::warn!(error = %e, "writing the change journal failed");
            self.metrics.error("journal_write");
        }
        let (Some(r), Some(asked)) = (&mut rec.recorder, asked) else {
            return;
        };
        let before = self.history.len().min(asked.inputs.history.len());
        let changes: Vec<ChangeRec> = self
            .history
            .get(before..)
            .unwrap_or_default()
            .iter()
            .map(ChangeRec::of)
            .collect();
        let previous = self.prev.as_ref().map(|(s, at)| (s, *at));
        let Asked {
            engine_before,
            inputs,
            local_time,
            elapsed,
            now,
        } = asked;
        let res = r.write(
            || engine_before,
            previous,
            snap,
            |snapshot| Pass {
                unix_ms: wall,
                now_ns: nanos(now),
                elapsed_ns: nanos(elapsed),
                local_time: local_time_rec(local_time),
                snapshot,
                inputs,
                decisions: plan.decisions.iter().map(DecisionRec::of).collect(),
                changes,
            },
        );
        if let Err(e) = res {
            tracing::warn!(error = %e, "writing the recording failed: this pass is not recorded");
            self.metrics.error("recording_write");
        }
        self.metrics
            .recording_bytes
            .set(i64::try_from(r.size_bytes()).unwrap_or(i64::MAX));
        #[allow(clippy::cast_precision_loss)]
        self.metrics
            .recording_oldest
            .set(r.oldest_unix_ms().map_or(0.0, |ms| ms as f64 / 1000.0));
    }

    /// Whether this pass should capture what the engine is asked.
    pub(crate) fn recording_wanted(&self) -> bool {
        self.recording
            .as_ref()
            .is_some_and(|r| r.recorder.is_some())
    }

    /// The engine's memory before deciding, when a segment opens.
    pub(crate) fn engine_for_recording(&self) -> Option<EngineState> {
        self.recording
            .as_ref()
            .is_some_and(LiveRecording::needs_engine)
            .then(|| self.engine.saved_state())
            .flatten()
    }
}
