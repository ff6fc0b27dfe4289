//! The policy's series: how its loads went (`pptune_policy_reloads_total`,
//! `pptune_policy_valid`), which policy is in force (its hashes, load time
//! and memory budget), and where its rollout puts this host.

use policy::Policy;

use super::decisions;
use super::families::Families;
use super::labels::*;
use super::series::sat;
use crate::act::rollout::{self, Arm, Standing};
use crate::publish::health::Health;
use crate::publish::policy_hash::PolicyHashes;

/// A policy load's outcome: the policy now in force (its hashes
/// returned, for the log), or why the new one was refused (the last
/// good one stays).
pub(super) fn loaded(
    f: &Families,
    health: &Health,
    loaded: Result<&Policy, &str>,
) -> Option<PolicyHashes> {
    let result = if loaded.is_ok() { "ok" } else { "invalid" };
    f.reloads
        .get_or_create(&ResultLabels {
            result: result.into(),
        })
        .inc();
    match loaded {
        Ok(p) => Some(in_force(f, health, p)),
        Err(e) => {
            decisions::error(f, "policy_reload");
            f.policy_valid.set(0);
            health.set_policy_error(Some(e));
            None
        }
    }
}

/// A valid policy in force (at start, or reloaded): its hashes and load
/// time, its memory budget, its interval for `/readyz`. Returns the
/// hashes, for the log.
pub(super) fn in_force(f: &Families, health: &Health, policy: &Policy) -> PolicyHashes {
    let h = PolicyHashes::of(policy);
    let labels = PolicyLabels {
        hash: h.policy.clone(),
        shadow_hash: h.shadow.clone().unwrap_or_default(),
    };
    f.policy_info.clear();
    f.policy_info.get_or_create(&labels).set(1);
    #[allow(clippy::cast_precision_loss)]
    f.policy_loaded.set(crate::clock::unix_ms() as f64 / 1000.0);
    for (scope, limit) in [
        ("device", policy.budget.per_device_bytes),
        ("host", policy.budget.per_host_bytes),
    ] {
        let l = ScopeLabels { scope };
        match limit {
            Some(b) => {
                f.memory_budget.get_or_create(&l).set(sat(b));
            }
            None => {
                f.memory_budget.remove(&l);
            }
        }
    }
    f.policy_valid.set(1);
    health.set_interval(policy.timing.interval);
    health.set_policy_error(None);
    h
}

/// The rollout gauges: whether the host enforces, is selected, whether
/// the policy enforces, its arm, and the policy's two fractions.
pub(super) fn set_rollout(f: &Families, s: Standing, p: &Policy) {
    f.rollout_enforcing.set(i64::from(s.enforcing()));
    f.rollout_host_selected.set(i64::from(s.draw.host_selected));
    f.policy_enforcing.set(i64::from(s.policy_enforces));
    f.rollout_fraction.set(rollout::fraction(p));
    f.rollout_holdout.set(rollout::holdout(p));
    for arm in Arm::ALL {
        f.rollout_arm
            .get_or_create(&ArmLabels { arm: arm.as_str() })
            .set(i64::from(arm == s.arm()));
    }
}

#[cfg(test)]
mod tests {
    use crate::act::rollout::{self, Standing};
    use crate::publish::metrics::Metrics;

    #[test]
    fn the_rollout_gauges_say_the_standing() {
        let m = Metrics::new();
        let s = Standing {
            draw: rollout::Draw {
                host_selected: true,
                holdout: false,
            },
            policy_enforces: false,
            has_rollout: true,
        };
        let mut p = config::default_policy().unwrap();
        p.rollout = Some(policy::policy::Rollout {
            fraction: 0.25,
            salt: "s".into(),
            holdout: 0.125,
        });
        m.set_rollout(s, &p);
        let text = m.encode().unwrap();
        assert!(text.contains("pptune_rollout_enforcing 0\n"), "{text}");
        assert!(text.contains("pptune_rollout_host_selected 1\n"), "{text}");
        assert!(text.contains("pptune_policy_enforcing 0\n"), "{text}");
        assert!(
            text.contains("pptune_rollout_fraction_ratio 0.25\n"),
            "{text}"
        );
        assert!(
            text.contains("pptune_rollout_holdout_ratio 0.125\n"),
            "{text}"
        );
        for (arm, v) in [("enforce", 0), ("holdout", 0), ("observe", 1)] {
            assert!(
                text.contains(&format!("pptune_rollout_arm{{arm=\"{arm}\"}} {v}\n")),
                "{arm}: {text}"
            );
        }
        let held = Standing {
            draw: rollout::Draw {
                host_selected: false,
                holdout: true,
            },
            policy_enforces: true,
            has_rollout: true,
        };
        m.set_rollout(held, &p);
        let text = m.encode().unwrap();
        assert!(
            text.contains("pptune_rollout_arm{arm=\"holdout\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("pptune_rollout_enforcing 0\n"), "{text}");
    }
}
