//! What acting did, for the outputs: the actuator notes [`Event`]s, the
//! loop takes them after each call and hands them to the metrics, so acting
//! writes no output itself (`publish` reads `act`, never the other way).

use policy::Knob;
use policy::plan::ReasonCode;

/// The `(direction, result)` pairs of a change's `pptune_actions_total`
/// series that exist, at 0, for every knob pptune manages on a device from
/// the pass it first decides for the device: the change (`grow`, `shrink`)
/// applied, refused or failed and its evaluation's outcome, a harmful
/// change's revert (applied, failed, or undone when the old value did
/// worse), a restore. The `skipped_<gate>` results (an actuator
/// gate held a change the engine decided: `pptune_decisions_total` counts
/// the gate's hold) are created when they first happen.
pub const ACTION_SERIES: &[(&str, &[&str])] = &[
    ("grow", CHANGE_RESULTS),
    ("shrink", CHANGE_RESULTS),
    ("revert", &["applied", "failed", "undone"]),
    ("restore", &["applied"]),
];

/// The results of a grow or a shrink: the kernel's answer, then the
/// evaluation's outcome (`policy::observation::Outcome::label`).
const CHANGE_RESULTS: &[&str] = &[
    "applied",
    "refused",
    "failed",
    "effective",
    "ineffective",
    "reverted",
    "inconclusive",
];

/// The result of a change an actuator gate held (`skipped_<gate>`), by
/// the gate's reason.
pub(crate) fn skipped(reason: ReasonCode) -> String {
    let what = match reason {
        ReasonCode::OperatorOverride => "override",
        ReasonCode::BackedOff => "backoff",
        ReasonCode::KernelRefused => "refused",
        ReasonCode::Cooldown => "cooldown",
        ReasonCode::ChangeBudgetExhausted => "budget",
        r => r.as_str(),
    };
    format!("skipped_{what}")
}

/// What acting did that the outputs count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A change attempt ended. `direction`: grow, shrink, revert, restore;
    /// `result`: applied, failed, refused, `skipped_<why>`, or an
    /// evaluation's outcome.
    Action {
        device: String,
        knob: Knob,
        direction: &'static str,
        result: String,
    },
    /// A change was applied at this wall time (unix seconds).
    Applied { device: String, unix_s: i64 },
    /// Someone else changed a knob pptune manages; it lets go of it.
    Override { device: String, knob: Knob },
    /// A device is backed off after a failure.
    BackedOff { device: String },
    /// An operation failed: `sample_device`, `verify`, `set`.
    Error(&'static str),
}

/// The events of one actuator call, taken by the loop when it returns.
#[derive(Debug, Default)]
pub struct Events(std::sync::Mutex<Vec<Event>>);

impl Events {
    /// Notes one event.
    pub fn note(&self, e: Event) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(e);
    }

    /// Everything noted since the last take, oldest first.
    pub fn take(&self) -> Vec<Event> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Notes a change attempt's end.
    pub(crate) fn action(&self, device: &str, knob: Knob, direction: &'static str, result: &str) {
        self.note(Event::Action {
            device: device.to_owned(),
            knob,
            direction,
            result: result.to_owned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use policy::observation::Outcome;

    /// Every evaluation outcome the actuator counts is in the table.
    #[test]
    fn the_zero_series_cover_every_evaluation_outcome() {
        for o in [
            Outcome::Effective,
            Outcome::Ineffective,
            Outcome::Reverted,
            Outcome::Inconclusive,
        ] {
            assert!(super::CHANGE_RESULTS.contains(&o.label()), "{o:?}");
        }
    }
}
