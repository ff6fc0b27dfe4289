//! pptune, the daemon: CLI, run loop, actuator, state, metrics, systemd.
//!
//! # Layout: one folder per stage of the data flow
//! ```text
//!   cmd ──▶ service ──▶ publish ──▶ act ──▶ sample ──▶ (clock, human)
//! ```
//! - [`sample`]: the `Kernel` seam; the netlink kernel, the pure join of
//!   its dumps and their conversion to `policy::Snapshot`.
//! - [`act`]: the actuator, the state record, rollout, verify, coexistence.
//! - [`publish`]: metrics, HTTP, health, logs, the recording each pass,
//!   the control socket and its view, systemd notify.
//! - [`service`]: the loop, generic over `Kernel`: it composes the stages.
//! - [`cmd`]: the command line and one file per command.
//! - [`clock`], [`human`]: the base every stage may use.
//!
//! A stage imports only the stages to its right (`daemon/tests/
//! module_graph.rs` proves it); docs/architecture.md draws the flow.
//! [`record`] (the `pptune-record` crate, daemon/record) holds the recording
//! format, writer and bounded reader, the change journal, and [`replay`].
//!
//! The daemon contains no decision logic: that is the `policy` crate's.
#![forbid(unsafe_code)]
pub mod act;
pub mod clock;
pub mod cmd;
pub mod heap;
pub mod human;
pub mod publish;
pub mod sample;
pub mod service;

/// `0.1.0 (git 1a2b3c4d5e6f)`: the package version and the revision it was
/// built from (`build.rs`; `unknown` outside a git checkout unless
/// `PPTUNE_GIT_REVISION` was set at build time).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("PPTUNE_GIT_REVISION"),
    ")"
);

// The recording and replay, a crate of their own (daemon/record), under the
// names the daemon's modules and its users have always used.
pub use record;
pub use record::replay;
