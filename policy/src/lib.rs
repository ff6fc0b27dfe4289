//! pptune's decision core: it decides, never acts.
//!
//! - [`snapshot`]: the plain-data picture the daemon builds from the kernel
//!   (the contract between crates);
//! - [`signals`]: the derived ratios, defined once;
//! - [`policy`]: the validated policy (built by the `config` crate);
//! - [`engine`]: the pure decision function;
//! - [`plan`]: its output.
//!
//! No I/O, no clock, no tokio, no logging: time arrives as a `Duration`.
#![forbid(unsafe_code)]

pub mod accounting;
pub mod counters;
mod decide;
pub mod drivers;
pub mod engine;
pub mod evaluate;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod gates;
pub mod knobs;
pub mod observation;
pub mod observer;
pub mod plan;
pub mod policy;
pub mod price;
pub mod reuse;
pub mod select;
pub mod signals;
pub mod snapshot;
pub mod state;
pub mod window;

#[cfg(test)]
pub(crate) mod tests;

pub use engine::{
    ActionRecord, EngineState, LocalTime, Observation, Original, Outcome, decide, findings_needed,
};
pub use plan::{
    Action, ChannelField, Decision, Evidence, Knob, Plan, ReasonCode, RecommendationId, RingField,
};
pub use policy::{Coexist, Mode, OnStop, Policy};
pub use snapshot::Snapshot;
