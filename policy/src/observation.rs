//! What the engine is given besides the policy and its memory: the
//! samples, the time, and what happened to earlier changes (the daemon's
//! history, the recorded originals, the operator's overrides).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::observer::Pass;
use crate::plan::Knob;
use crate::snapshot::DeviceId;

/// Longest backoff for a failing device.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// First backoff after a failure (doubles per consecutive failure).
pub const BACKOFF_BASE: Duration = Duration::from_secs(60);

/// A failing device: no change until `until` (monotonic, like
/// [`Observation::now`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    pub failures: u32,
    pub until: Duration,
    pub last_error: String,
}

impl Backoff {
    /// The backoff after one more failure at `now`: `base` doubled per
    /// consecutive failure, at most [`MAX_BACKOFF`].
    #[must_use]
    pub fn after_failure(
        prev: Option<&Self>,
        now: Duration,
        base: Duration,
        error: String,
    ) -> Self {
        let failures = prev.map_or(0, |b| b.failures).saturating_add(1);
        let factor = 1u32 << (failures - 1).min(16);
        let delay = base.saturating_mul(factor).min(MAX_BACKOFF);
        Self {
            failures,
            until: now.saturating_add(delay),
            last_error: error,
        }
    }

    /// Whether the device is still backed off at `now`.
    #[must_use]
    pub fn active(&self, now: Duration) -> bool {
        self.until > now
    }
}

/// Wall-clock facts the daemon reads for the engine (change windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalTime {
    /// 0 = Monday … 6 = Sunday.
    pub weekday: u8,
    /// Minutes since local midnight.
    pub minute_of_day: u16,
}

/// How a past change turned out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Outcome {
    /// Applied and read back; evaluation window still open.
    Pending,
    /// Moved the signal it was made for, no extra harm.
    Effective,
    /// Did not move the signal it was made for.
    Ineffective,
    /// Made harm worse and was put back.
    Reverted,
    /// Could not be judged: a counter went backwards during the evaluation,
    /// the daemon restarted before it closed, or the returns outgrew a ring
    /// growth (`evaluate::outgrown`): neither effective nor ineffective; it
    /// does not block the next step.
    Inconclusive,
    /// The kernel refused (an answer, not a transient error).
    Refused { errno: i32, message: String },
    /// Failed for another reason (device vanished, I/O error).
    Failed { message: String },
}

impl Outcome {
    /// A one-word label (the `result` of `pptune_actions_total`).
    #[must_use]
    pub fn label(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Effective => "effective",
            Self::Ineffective => "ineffective",
            Self::Reverted => "reverted",
            Self::Inconclusive => "inconclusive",
            Self::Refused { .. } => "refused",
            Self::Failed { .. } => "failed",
        }
    }
}

/// The outcome as an operator reads it (`status`, `history`).
impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pending => f.write_str("pending (under evaluation)"),
            Self::Effective => f.write_str("effective"),
            Self::Ineffective => f.write_str("ineffective"),
            Self::Reverted => f.write_str("reverted (made harm worse)"),
            Self::Inconclusive => f.write_str("inconclusive (could not be judged)"),
            Self::Refused { errno, message } => {
                write!(f, "refused by the kernel: {message} (errno {errno})")
            }
            Self::Failed { message } => write!(f, "failed: {message}"),
        }
    }
}

/// One change pptune made (or tried), as the engine needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRecord {
    pub device: DeviceId,
    pub knob: Knob,
    pub from: u32,
    pub to: u32,
    /// Monotonic time of the change (same origin as `Observation::now`).
    pub at: Duration,
    pub outcome: Outcome,
}

/// A knob's value before pptune first touched it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Original {
    pub device: DeviceId,
    pub knob: Knob,
    pub value: u32,
}

/// An empty backoff map, for callers with no failures to report (`plan`,
/// tests, benchmarks).
pub static NO_BACKOFF: BTreeMap<String, Backoff> = BTreeMap::new();

/// What the engine is told for one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// The samples, their pool deltas and the time ([`crate::observer`]).
    pub pass: Pass<'a>,
    /// Local wall-clock time, for change windows (`None` = unknown: treat
    /// as outside any configured window).
    pub local_time: Option<LocalTime>,
    /// Recent changes, oldest first (at least the last hour).
    pub history: &'a [ActionRecord],
    /// Knobs an operator took over: never touched until the policy reloads.
    pub overrides: &'a [(DeviceId, Knob)],
    /// Recorded originals (for shrinking back).
    pub originals: &'a [Original],
    /// Devices backed off after failures, by identity key
    /// ([`DeviceId::key`]).
    pub backoff: &'a BTreeMap<String, Backoff>,
}
