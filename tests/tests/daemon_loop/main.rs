//! The daemon's loop on the fake kernel: passes, state, shadow, priors, reloads, refusals, logs, long durations.
//! One test binary, a module per subject (a binary per file linked all of
//! `pptune` once each).

mod daemon_huge_durations;
mod daemon_logs;
mod daemon_loop;
mod daemon_pass;
mod daemon_priors;
mod daemon_refusal_budget;
mod daemon_reload_findings;
mod daemon_shadow;
mod daemon_state;
mod daemon_state_unwritable;
