//! The decision engine: a pure function of (policy, engine state,
//! observation). No I/O, no clock, no tokio. Same input, same output.
//!
//! This module is the engine's public face; the rules are in `decide`, the
//! inputs in [`crate::observation`], the memory in [`crate::state`].

pub use crate::decide::{
    Engine, Reclaim, current_device_bytes, decide, device_bytes, findings_needed, inflight_at_ring,
    reclaimable,
};
pub use crate::gates::Backoff;
pub use crate::observation::{ActionRecord, LocalTime, NO_BACKOFF, Observation, Original, Outcome};
pub use crate::state::{DeviceState, ENGINE_STATE_VERSION, EngineState, PoolHeld, RingProbe};
