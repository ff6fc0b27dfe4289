//! The decision engine: a pure function of (policy, engine state,
//! observation). No I/O, no clock, no tokio. Same input, same output.
//!
//! This module is the engine's public face; the rules are in `decide`, the
//! inputs in [`crate::observation`], the memory in [`crate::state`].

pub use crate::decide::{Engine, decide, device_bytes, findings_needed};
pub use crate::gates::Backoff;
pub use crate::observation::{ActionRecord, LocalTime, NO_BACKOFF, Observation, Original, Outcome};
pub use crate::state::{DeviceState, ENGINE_STATE_VERSION, EngineState, RingProbe};

/// What the device's rings cost now by the estimate the memory budget
/// gates on ([`device_bytes`] at the ring that sizes its pool); `None`
/// when that ring is not known.
#[must_use]
pub fn current_device_bytes(dev: &crate::snapshot::Device) -> Option<u64> {
    let info = crate::drivers::driver_info(dev);
    let ring = dev
        .rings
        .available()
        .and_then(|r| crate::drivers::ring_value(r, info.field).0)?;
    Some(device_bytes(dev, &info, ring))
}
