//! What acting did, for the outputs: the actuator notes [`Event`]s, the
//! loop takes them after each call and hands them to the metrics, so acting
//! writes no output itself (`publish` reads `act`, never the other way).

use policy::Knob;

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
