//! Stage 2, acting: what changes a knob and what remembers it.
//!
//! - [`actuator`]: safe actuation of the engine's plan, evaluation of the
//!   changes made, override detection, restore; `lent`, what the loop lends
//!   it for a call; `change`, one change being made; `ownership`, what
//!   pptune set on each knob and what operators took over; `backoffs`, the
//!   failing devices.
//! - [`set`]: setting a knob and reading it back; putting recorded
//!   originals back.
//! - [`state`]: `/run/pptune/state.json`, the record of originals and actions.
//! - [`rollout`]: staged enforcement (canary by host hash).
//! - [`verify`]: do the live values still hold what pptune set?
//! - [`events`]: what acting did, for the outputs.
//! - [`coexist`]: other owners of the same knobs (systemd `.link`,
//!   NetworkManager, TuneD).
//!
//! Imports: `sample` (the kernel seam) and the base. What the actuator did
//! reaches the outputs as [`events::Event`]s, not through them.
pub mod actuator;
mod backoffs;
mod change;
pub mod coexist;
pub mod events;
pub(crate) mod lent;
mod ownership;
pub mod rollout;
pub mod set;
pub mod state;
pub mod verify;
