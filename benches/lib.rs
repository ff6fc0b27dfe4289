//! The bench harness the observe-cost bench binaries share
//! (`netlink/benches/raw_floor.rs`, `daemon/benches/observe_pass.rs`,
//! `daemon/benches/observe_replay.rs`; `benches/observe-cost.sh` runs them):
//! the [`meter`] of a pass's cost and the raw floor's attribute [`walk`].
#![forbid(unsafe_code)]

pub mod meter;
pub mod walk;
