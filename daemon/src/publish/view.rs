//! The daemon's own view for `pptune status`: built inside the loop, served
//! over the control socket, rendered here so `status` only has to call
//! [`render`] next to the kernel's view.

use std::fmt::Write as _;

use policy::Mode;

use crate::publish::control::{
    ActionView, BackoffView, DaemonView, DecisionView, DeviceView, VIEW_SCHEMA_VERSION,
};
use std::collections::BTreeMap;
use std::time::Duration;

use policy::evaluate::Evaluation;
use policy::gates::Backoff;
use policy::plan::{Decision, Knob};
use policy::snapshot::{Device, DeviceId};

use crate::act::rollout::{HostId, Standing};
use crate::act::state::StateFile;
use crate::publish::logging::action_text;

/// What the view is built from: the service loop lends its parts (the view
/// knows nothing of the loop, so the loop's modules do not import it back).
#[derive(Debug)]
pub(crate) struct ViewInput<'a> {
    /// The loop's monotonic time.
    pub now: Duration,
    pub devices: &'a BTreeMap<u32, Device>,
    /// Last decision per device key, and how often it repeated.
    pub last_decisions: &'a BTreeMap<String, (Decision, u64)>,
    /// Whether the host is in the rollout fraction and the policy enforces:
    /// the one answer the log and the metrics give too.
    pub standing: Standing,
    pub rollout: Option<&'a policy::policy::Rollout>,
    pub host_id: &'a HostId,
    pub policy_error: Option<&'a str>,
    pub last_sample: Option<Duration>,
    /// Passes the engine judged since the start.
    pub passes: u64,
    pub state: &'a StateFile,
    pub backoff: &'a BTreeMap<String, Backoff>,
    pub overrides: &'a BTreeMap<(String, Knob), DeviceId>,
    pub evaluations: &'a [Evaluation],
    /// The policy's memory budget.
    pub memory_budget: policy::policy::MemoryBudget,
}

pub(crate) fn build(d: &ViewInput<'_>) -> DaemonView {
    let now = d.now;
    let wall_ms = crate::clock::unix_ms();
    // A time on the loop's clock as wall time (unix ms).
    let wall = |t: Duration| {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if t <= now {
            wall_ms.saturating_sub(ms(now - t))
        } else {
            wall_ms.saturating_add(ms(t - now))
        }
    };
    let mut devices = Vec::new();
    for dev in d.devices.values() {
        let key = dev.id.key();
        let last = d.last_decisions.get(&key);
        let mode = match last {
            None => "unmanaged",
            Some((dec, _)) if dec.mode == Mode::Enforce && d.standing.draw.host_selected => {
                "enforce"
            }
            Some(_) => "observe",
        };
        let rec = d.state.devices.get(&key);
        let backoff = d
            .backoff
            .get(&key)
            .filter(|b| b.active(now))
            .map(|b| BackoffView {
                failures: b.failures,
                retry_in_s: b.until.saturating_sub(now).as_secs(),
                last_error: b.last_error.clone(),
                retry_at_unix_ms: Some(wall(b.until)),
            });
        let evaluation = d.evaluations.iter().find(|e| e.key == key);
        devices.push(DeviceView {
            name: dev.name.clone(),
            ifindex: dev.ifindex,
            identity: key.clone(),
            mode: mode.to_owned(),
            originals: rec
                .map(|r| {
                    r.originals
                        .iter()
                        .map(|o| (o.knob.to_string(), o.value))
                        .collect()
                })
                .unwrap_or_default(),
            last_decision: last.map(|(dec, n)| DecisionView {
                action: action_text(&dec.action),
                reason: dec.reason.as_str().to_owned(),
                message: dec.message.clone(),
                recommendation: dec.id.to_string(),
                repeats: *n,
            }),
            last_actions: rec
                .map(|r| {
                    r.actions
                        .iter()
                        .rev()
                        .take(5)
                        .map(|a| ActionView {
                            knob: a.knob.to_string(),
                            from: a.from,
                            to: a.to,
                            outcome: a.outcome.to_string(),
                            reason: a.reason.clone(),
                            age_s: wall_ms.saturating_sub(a.at_unix_ms) / 1000,
                            at_unix_ms: Some(a.at_unix_ms),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            overrides: d
                .overrides
                .keys()
                .filter(|(k, _)| *k == key)
                .map(|(_, knob)| knob.to_string())
                .collect(),
            backoff,
            evaluating: evaluation
                .map(|e| (e.knob.to_string(), e.ends.saturating_sub(now).as_secs())),
            evaluating_until_unix_ms: evaluation.map(|e| wall(e.ends)),
            ring_cost_bytes: last.and_then(|_| policy::engine::current_device_bytes(dev)),
        });
    }
    DaemonView {
        schema_version: VIEW_SCHEMA_VERSION,
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        uptime_s: now.as_secs(),
        host_enforcing: d.standing.enforcing(),
        rollout: d.standing.describe().to_owned(),
        arm: d.standing.arm().as_str().to_owned(),
        rollout_fraction: d.rollout.map(|r| r.fraction),
        rollout_holdout: d.rollout.map(|r| r.holdout).filter(|h| *h > 0.0),
        host_id_source: d.host_id.source.to_owned(),
        policy_error: d.policy_error.map(str::to_owned),
        last_sample_age_s: d.last_sample.map(|t| now.saturating_sub(t).as_secs()),
        started_unix_ms: Some(wall(Duration::ZERO)),
        last_sample_unix_ms: d.last_sample.map(wall),
        passes: d.passes,
        memory_budget_per_device_bytes: d.memory_budget.per_device_bytes,
        memory_budget_per_host_bytes: d.memory_budget.per_host_bytes,
        devices,
    }
}

/// A device's ring cost estimate and the budget it is judged against, in
/// words (`status` and `plan` say it alike): `bytes` on the device, `host`
/// over the selected devices.
#[must_use]
pub fn ring_cost_words(
    bytes: u64,
    host: u64,
    per_device: Option<u64>,
    per_host: Option<u64>,
) -> String {
    let b = crate::human::bytes;
    let limit = match (per_device, per_host) {
        (None, None) => "no memory budget".to_owned(),
        (d, h) => {
            let mut parts = Vec::new();
            if let Some(d) = d {
                parts.push(format!("{} per device", b(d)));
            }
            if let Some(h) = h {
                parts.push(format!(
                    "{} per host, selected devices now {}",
                    b(h),
                    b(host)
                ));
            }
            format!("budget {}", parts.join("; "))
        }
    };
    format!("ring cost estimate: {} ({limit})", b(bytes))
}

/// Renders the daemon's view as text, for the devices named (all when
/// empty). `None` (no daemon answered) renders one line saying so.
#[must_use]
pub fn render(view: Option<&DaemonView>, interfaces: &[String]) -> String {
    let mut s = String::new();
    let Some(v) = view else {
        s.push_str("daemon: not running (or its control socket is not reachable as this user)\n");
        return s;
    };
    let _ = writeln!(
        s,
        "daemon: pid {} v{}, up {}s, last sample {} ago; {}{}",
        v.pid,
        v.version,
        v.uptime_s,
        v.last_sample_age_s
            .map_or_else(|| "never".to_owned(), |a| format!("{a}s")),
        if !v.rollout.is_empty() {
            v.rollout.as_str()
        } else if v.host_enforcing {
            "this host enforces"
        } else {
            "this host observes only"
        },
        v.rollout_fraction.map_or_else(String::new, |f| format!(
            " (rollout {:.0} %{}, host id from {})",
            f * 100.0,
            v.rollout_holdout
                .map_or_else(String::new, |h| format!(", holdout {:.0} %", h * 100.0)),
            v.host_id_source
        )),
    );
    if !v.arm.is_empty() {
        let _ = writeln!(s, "  arm: {}", v.arm);
    }
    if let Some(e) = &v.policy_error {
        let _ = writeln!(
            s,
            "  policy: last reload INVALID, previous policy in force: {e}"
        );
    }
    for d in &v.devices {
        if !interfaces.is_empty() && !interfaces.contains(&d.name) {
            continue;
        }
        let _ = writeln!(s, "  {} [{}] {}", d.name, d.mode, d.identity);
        if !d.originals.is_empty() {
            let o: Vec<String> = d
                .originals
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let _ = writeln!(s, "    originals: {}", o.join(", "));
        }
        if let Some(dec) = &d.last_decision {
            let _ = writeln!(
                s,
                "    decision: {} ({}, id {}, {}x): {}",
                dec.action, dec.reason, dec.recommendation, dec.repeats, dec.message
            );
        }
        for a in &d.last_actions {
            let _ = writeln!(
                s,
                "    action {}s ago: {} {} -> {} ({}): {}",
                a.age_s, a.knob, a.from, a.to, a.reason, a.outcome
            );
        }
        if let Some(b) = d.ring_cost_bytes {
            let host = v.devices.iter().filter_map(|d| d.ring_cost_bytes).sum();
            let _ = writeln!(
                s,
                "    {}",
                ring_cost_words(
                    b,
                    host,
                    v.memory_budget_per_device_bytes,
                    v.memory_budget_per_host_bytes
                )
            );
        }
        if let Some((k, left)) = &d.evaluating {
            let _ = writeln!(s, "    evaluating {k}: {left}s left");
        }
        for o in &d.overrides {
            let _ = writeln!(
                s,
                "    operator override: {o} (not managed until the policy is reloaded)"
            );
        }
        if let Some(b) = &d.backoff {
            let _ = writeln!(
                s,
                "    backed off: {} failure(s), retry in {}s: {}",
                b.failures, b.retry_in_s, b.last_error
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    /// The ring cost with each budget it can be judged against.
    #[test]
    fn ring_cost_words_name_the_memory_budget() {
        let w = |d, h| super::ring_cost_words(8 << 20, 24 << 20, d, h);
        assert_eq!(
            w(None, None),
            "ring cost estimate: 8.0 MiB (no memory budget)"
        );
        assert_eq!(
            w(Some(64 << 20), Some(1 << 30)),
            "ring cost estimate: 8.0 MiB (budget 64.0 MiB per device; 1.0 GiB per host, selected devices now 24.0 MiB)"
        );
    }
}
