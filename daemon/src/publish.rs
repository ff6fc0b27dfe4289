//! Stage 3, publishing: every output a pass feeds.
//!
//! - [`metrics`] + [`http`]: every exported metric and the HTTP server
//!   (`/metrics`, `/healthz`, `/readyz`); [`health`] is what the loop tells
//!   `/readyz`; [`process_metrics`] the `process_*` families.
//! - [`logging`]: the log lines, human and JSON.
//! - [`recording`]: what the loop writes into the recording each pass.
//! - [`control`] + [`view`]: the control socket and the daemon's view it
//!   serves.
//! - [`notes`]: what the kernel can and cannot show, in words.
//! - [`notify`]: systemd's `sd_notify`.
//! - [`policy_hash`]: which policy runs, as a content hash.
//!
//! Imports: `act`, `sample` and the base; never the loop or a command.
pub mod control;
pub mod health;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod notes;
pub mod notify;
pub mod policy_hash;
pub mod process_metrics;
pub mod recording;
pub mod view;
