//! What the daemon exports and who reads it: the exposition, floods, the web config, a real Prometheus and fleet suggestions.
//! One test binary, a module per subject (a binary per file linked all of
//! `pptune` once each).

mod alert_inputs;
mod daemon_metrics;
mod daemon_metrics_web;
mod fleet_prometheus;
mod prometheus_first_change;
