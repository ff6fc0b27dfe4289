//! Liveness and readiness, as the HTTP server's `/healthz` and `/readyz`
//! report them.
//!
//! The control loop and the HTTP server share one [`Health`] (it lives in
//! [`crate::publish::metrics::Metrics`], the handle both already hold). The loop
//! reports three facts — its sampling interval, each successful sample, and
//! whether the policy in force is valid — and the server reads a
//! [`Readiness`] from them. Nothing else of the loop's state is visible here.
//!
//! Ready means: the last successful sample is younger than two intervals,
//! and the last policy load was valid. `/healthz` is the process answering
//! at all; `/livez` is the watchdog's rule: the control loop passed (woke,
//! did its work, came back) within [`LOOP_DEADLINE`], whatever the samples
//! said. The loop wakes at least twice per deadline for that, as it pings
//! systemd's watchdog (`WatchdogSec=30s` in the unit): a wedged loop is
//! restarted by the kubelet as systemd would restart it.

use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

/// Samples older than this many intervals make the daemon unready.
pub const MAX_SAMPLE_AGE_INTERVALS: u32 = 2;

/// How long the control loop may go without a pass before `/livez`
/// fails: the unit's `WatchdogSec=`.
pub const LOOP_DEADLINE: Duration = Duration::from_secs(30);

/// The `/livez` answer (its JSON body).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Liveness {
    pub alive: bool,
    /// Seconds since the loop's last pass (since start before the first).
    pub last_pass_age_seconds: f64,
    pub deadline_seconds: f64,
}

/// What the loop tells the HTTP server.
#[derive(Debug)]
pub struct Health {
    inner: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Set when the loop starts; `None` before.
    interval: Option<Duration>,
    last_sample: Option<Instant>,
    /// The control loop's last pass.
    last_pass: Option<Instant>,
    policy_error: Option<String>,
    created: Instant,
}

/// The `/readyz` answer (its JSON body).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Readiness {
    pub ready: bool,
    /// Why not, one sentence each; empty when ready.
    pub reasons: Vec<String>,
    /// Seconds since the last successful sample (`null` before the first).
    pub last_sample_age_seconds: Option<f64>,
    pub interval_seconds: Option<f64>,
    pub policy_valid: bool,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            inner: Mutex::new(State {
                interval: None,
                last_sample: None,
                last_pass: None,
                policy_error: None,
                created: Instant::now(),
            }),
        }
    }
}

impl Health {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        self.inner.lock().ok().map(|mut s| f(&mut s))
    }

    /// The loop's sampling interval (at start and after each reload).
    pub fn set_interval(&self, interval: Duration) {
        self.with(|s| s.interval = Some(interval));
    }

    /// A sampling pass succeeded now.
    pub fn sampled(&self) {
        self.with(|s| s.last_sample = Some(Instant::now()));
    }

    /// The control loop passed now (from the loop itself, where it pings
    /// systemd's watchdog).
    pub fn passed(&self) {
        self.with(|s| s.last_pass = Some(Instant::now()));
    }

    /// Whether the control loop passed within [`LOOP_DEADLINE`].
    #[must_use]
    pub fn liveness(&self) -> Liveness {
        self.liveness_at(Instant::now())
    }

    fn liveness_at(&self, now: Instant) -> Liveness {
        let age = self
            .with(|s| now.saturating_duration_since(s.last_pass.unwrap_or(s.created)))
            .unwrap_or(Duration::MAX);
        Liveness {
            alive: age <= LOOP_DEADLINE,
            last_pass_age_seconds: age.as_secs_f64(),
            deadline_seconds: LOOP_DEADLINE.as_secs_f64(),
        }
    }

    /// The outcome of the last policy load: `None` when valid, else why
    /// not (the last good policy stays in force either way).
    pub fn set_policy_error(&self, error: Option<&str>) {
        self.with(|s| s.policy_error = error.map(str::to_owned));
    }

    /// Whether the daemon is ready, and why not.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        self.readiness_at(Instant::now())
    }

    fn readiness_at(&self, now: Instant) -> Readiness {
        self.with(|s| {
            let mut reasons = Vec::new();
            let age = s.last_sample.map(|t| now.saturating_duration_since(t));
            match (s.interval, age) {
                (None, _) => reasons.push("the control loop has not started".to_owned()),
                (Some(_), None) => reasons.push(format!(
                    "no successful sample yet ({:.1} s since start)",
                    now.saturating_duration_since(s.created).as_secs_f64()
                )),
                (Some(i), Some(a)) if a > i * MAX_SAMPLE_AGE_INTERVALS => {
                    reasons.push(format!(
                        "the last successful sample is {:.1} s old, more than {MAX_SAMPLE_AGE_INTERVALS} intervals of {:.1} s",
                        a.as_secs_f64(),
                        i.as_secs_f64()
                    ));
                }
                (Some(_), Some(_)) => {}
            }
            if let Some(e) = &s.policy_error {
                reasons.push(format!(
                    "the last policy load was invalid (the previous policy stays in force): {e}"
                ));
            }
            Readiness {
                ready: reasons.is_empty(),
                reasons,
                last_sample_age_seconds: age.map(|a| a.as_secs_f64()),
                interval_seconds: s.interval.map(|i| i.as_secs_f64()),
                policy_valid: s.policy_error.is_none(),
            }
        })
        .unwrap_or_else(|| Readiness {
            ready: false,
            reasons: vec!["health state poisoned (a thread panicked)".to_owned()],
            last_sample_age_seconds: None,
            interval_seconds: None,
            policy_valid: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alive_while_the_loop_passes_within_the_deadline() {
        let h = Health::default();
        let t = Instant::now();
        assert!(h.liveness_at(t).alive, "starting");
        assert!(
            !h.liveness_at(t + LOOP_DEADLINE + Duration::from_secs(1))
                .alive,
            "never passed"
        );
        // Read before the pass: the pass is no earlier than `t`.
        let t = Instant::now();
        h.passed();
        assert!(h.liveness_at(t + LOOP_DEADLINE).alive);
        let l = h.liveness_at(t + LOOP_DEADLINE + Duration::from_secs(2));
        assert!(!l.alive && l.last_pass_age_seconds > 30.0, "{l:?}");
    }

    #[test]
    fn ready_only_with_a_young_sample_and_a_valid_policy() {
        let h = Health::default();
        let r = h.readiness();
        assert!(!r.ready);
        assert!(r.reasons[0].contains("not started"), "{r:?}");
        h.set_interval(Duration::from_secs(10));
        assert!(h.readiness().reasons[0].contains("no successful sample"));
        h.sampled();
        let t = Instant::now();
        assert!(h.readiness().ready);
        assert!(
            h.readiness_at(t + Duration::from_secs(19)).ready,
            "within two intervals"
        );
        let r = h.readiness_at(t + Duration::from_secs(21));
        assert!(!r.ready);
        assert!(
            r.reasons[0].contains("s old, more than 2 intervals of 10.0 s"),
            "{r:?}"
        );
        h.sampled();
        h.set_policy_error(Some("line 3: unknown key"));
        let r = h.readiness();
        assert!(!r.ready && !r.policy_valid);
        assert!(r.reasons[0].contains("unknown key"), "{r:?}");
        h.set_policy_error(None);
        assert!(h.readiness().ready);
    }
}
