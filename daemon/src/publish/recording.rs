//! The run loop's side of the recording: one call per pass writes what the
//! engine was told and what it answered, and journals changes.

use std::path::Path;
use std::time::Duration;

use policy::Plan;
use policy::engine::{ActionRecord, EngineState, LocalTime};
use policy::snapshot::Snapshot;

use crate::clock::unix_ms;
use crate::publish::metrics::Metrics;
use record::format::{ChangeRec, DecisionRec, Inputs, Pass, local_time_rec, nanos};
use record::journal::Journal;
use record::{Recorder, recording_dir};

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
            match Recorder::rolling(&recording_dir(state_dir), max_bytes, policy, crate::VERSION) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(error = %crate::human::cause(&e), "no recording this run: cannot set up its directory");
                    None
                }
            }
        };
        if let Err(e) = std::fs::create_dir_all(state_dir) {
            tracing::warn!(path = %state_dir.display(), error = %crate::human::cause(&e), "cannot create the state directory: no change journal");
        }
        Self {
            recorder,
            journal: Journal::new(state_dir, unix_ms()),
        }
    }

    /// Journals the originals a restore put back (device name, key, knob,
    /// value). A failure is logged and counted.
    pub fn journal_restores(
        &self,
        by: record::journal::RestoredBy,
        restored: &[(String, String, policy::plan::Knob, u32)],
        metrics: &Metrics,
    ) {
        if let Err(e) = self.journal.restored(by, unix_ms(), restored) {
            tracing::warn!(error = %crate::human::cause(&e), "writing the change journal failed");
            metrics.error("journal_write");
        }
    }

    /// Changes journaled by this run.
    #[must_use]
    pub fn changes_this_run(&self) -> u64 {
        self.journal.changes()
    }

    /// Whether the next pass opens a segment (then the engine's memory
    /// before deciding is wanted).
    #[must_use]
    pub fn needs_engine(&self) -> bool {
        self.recorder.as_ref().is_some_and(Recorder::needs_start)
    }

    /// Whether this pass should capture what the engine is asked.
    #[must_use]
    pub fn wants_inputs(&self) -> bool {
        self.recorder.is_some()
    }

    /// Records one pass (after actuation, before the loop's previous sample
    /// moves on) and journals the changes it made: `history` as it stands
    /// now, `previous` the sample before `snap` and when it was taken,
    /// `mono` the loop's clock. Failures are logged and counted, never
    /// fatal.
    pub fn record_pass(
        &mut self,
        asked: Option<Asked>,
        (snap, previous): (&Snapshot, Option<(&Snapshot, Duration)>),
        plan: &Plan,
        history: &[ActionRecord],
        mono: Duration,
        metrics: &Metrics,
    ) {
        let wall = unix_ms();
        if let Err(e) = self.journal.observe(history, &plan.decisions, mono, wall) {
            tracing::warn!(error = %crate::human::cause(&e), "writing the change journal failed");
            metrics.error("journal_write");
        }
        let (Some(r), Some(asked)) = (&mut self.recorder, asked) else {
            return;
        };
        let before = history.len().min(asked.inputs.history.len());
        let changes: Vec<ChangeRec> = history
            .get(before..)
            .unwrap_or_default()
            .iter()
            .map(ChangeRec::of)
            .collect();
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
            tracing::warn!(error = %crate::human::cause(&e), "writing the recording failed: this pass is not recorded");
            metrics.error("recording_write");
        }
        metrics
            .recording_bytes
            .set(i64::try_from(r.size_bytes()).unwrap_or(i64::MAX));
        #[allow(clippy::cast_precision_loss)]
        metrics
            .recording_oldest
            .set(r.oldest_unix_ms().map_or(0.0, |ms| ms as f64 / 1000.0));
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
