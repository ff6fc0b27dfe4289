//! pptune, the daemon: CLI, run loop, actuator, state, metrics, systemd.
//!
//! # Layout
//! - [`clock`]: the daemon's monotonic clock, wall and local time.
//! - [`kernel`]: the seam to the kernel (`Kernel` trait); the netlink
//!   implementation lives in `kernel_netlink`.
//! - [`run`]: the service loop, generic over `Kernel`.
//! - [`actuator`]: safe actuation, evaluation, override detection, restore.
//! - [`state`]: `/run/pptune/state.json`, the record of originals and actions.
//! - [`metrics`] + [`http`]: every exported metric and the HTTP server
//!   (`/metrics`, `/healthz`, `/readyz`); [`health`] is what the loop tells
//!   `/readyz`; [`process_metrics`] the `process_*` families.
//! - [`control`] + [`daemon_view`]: the control socket and its rendering.
//! - [`notify`], [`logging`], [`rollout`]: systemd, logs, staged enforcement.
//! - [`verify`]: do the live values still hold what pptune set?
//! - [`record`] (the `pptune-record` crate, daemon/record): the recording
//!   format, writer and bounded reader, the change journal, and [`replay`];
//!   [`live_recording`] is what the loop writes into it each pass.
//! - [`coexist`]: other owners of the same knobs (systemd `.link`,
//!   NetworkManager, TuneD).
//!
//! The daemon contains no decision logic: that is the `policy` crate's.
#![forbid(unsafe_code)]
pub mod actuator;
pub mod cli;
pub mod clock;
pub mod coexist;
pub mod commands;
pub mod control;
pub mod daemon_view;
pub mod health;
pub mod http;
pub mod human;
pub mod kernel;
pub mod kernel_netlink;
pub mod live_recording;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod process_metrics;
pub mod replay_cmd;
pub mod rollout;
pub mod run;
pub mod state;
pub mod status;
pub mod verify;

// The recording and replay, a crate of their own (daemon/record), under the
// names the daemon's modules and its users have always used.
pub use record;
pub use record::replay;
