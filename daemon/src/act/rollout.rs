//! Staged enforcement and its control group: whether this host enforces
//! under the policy's `rollout: {fraction, salt, holdout}`, and which arm
//! of the fleet it is in.
//!
//! The decision is a stable hash of (salt, host identity) mapped to [0, 1):
//! below `fraction` enforces (the canary); at or above `1 - holdout` is the
//! holdout, which observes only whatever the selectors say. The two ends
//! never meet (the policy refuses `fraction + holdout > 1`). Raising the
//! fraction only adds hosts (a host that enforced at 10 % still enforces at
//! 20 %), raising the holdout only adds hosts to it, and a new salt draws a
//! new sample of the fleet.

use std::path::Path;

use policy::policy::Rollout;
use policy::{Mode, Policy};

/// Where the host identity came from, and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostId {
    pub source: &'static str,
    pub value: String,
}

/// The host identity: `/etc/machine-id`, unless we run in a container (whose
/// machine-id is the image's, shared by every node) and `NODE_NAME` is set
/// (the Kubernetes downward-API convention); then the node name. Falls back
/// to the hostname.
#[must_use]
pub fn host_id(root: &Path) -> HostId {
    let node = std::env::var("NODE_NAME").ok().filter(|s| !s.is_empty());
    let in_container = std::env::var_os("container").is_some()
        || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        || root.join("run/.containerenv").exists()
        || root.join(".dockerenv").exists();
    if in_container && let Some(n) = &node {
        return HostId {
            source: "NODE_NAME",
            value: n.clone(),
        };
    }
    // By the file rule: a container's /etc is the image's.
    let mid = config::file::read_regular_text(&root.join("etc/machine-id"), 4096)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s != "uninitialized");
    if let Some(m) = mid {
        return HostId {
            source: "/etc/machine-id",
            value: m,
        };
    }
    if let Some(n) = node {
        return HostId {
            source: "NODE_NAME",
            value: n,
        };
    }
    let host = config::file::read_regular_text(Path::new("/proc/sys/kernel/hostname"), 4096)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    HostId {
        source: "hostname",
        value: host,
    }
}

/// The host's position in [0, 1) for this salt (FNV-1a 64: stable across
/// Rust versions and architectures).
#[must_use]
pub fn position(salt: &str, host: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in salt.bytes().chain(std::iter::once(0)).chain(host.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // FNV-1a alone leaves the high bits poorly mixed for short, similar
    // inputs (host-1, host-2 …): finish with the splitmix64 mixer.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    // Top 53 bits: exactly representable in an f64.
    #[allow(clippy::cast_precision_loss)]
    let x = (h >> 11) as f64 / (1u64 << 53) as f64;
    x
}

/// The fraction of hosts that enforce: the policy's, else all of them.
#[must_use]
pub fn fraction(policy: &Policy) -> f64 {
    policy.rollout.as_ref().map_or(1.0, |r| r.fraction)
}

/// The fraction of hosts held out: the policy's, else none.
#[must_use]
pub fn holdout(policy: &Policy) -> f64 {
    policy.rollout.as_ref().map_or(0.0, |r| r.holdout)
}

/// Where this host's hash falls for a rollout: the one reading of
/// `fraction` and `holdout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    /// In the rollout fraction: it would enforce what an enforcing selector
    /// selects (every host, without a rollout).
    pub host_selected: bool,
    /// In the holdout: it observes only and keeps the rings it has.
    pub holdout: bool,
}

/// This host's draw. It enforces only where a selector enforces too:
/// [`Standing`] says whether it does, and everything that tells an operator
/// (log, metrics, `status`, `plan`) asks it.
#[must_use]
pub fn draw(rollout: Option<&Rollout>, host: &str) -> Draw {
    match rollout {
        None => Draw {
            host_selected: true,
            holdout: false,
        },
        Some(r) => {
            let p = position(&r.salt, host);
            Draw {
                host_selected: p < r.fraction,
                // p < 1 always: a holdout of 0 holds no host out.
                holdout: p >= 1.0 - r.holdout && p >= r.fraction,
            }
        }
    }
}

/// The fleet arm a host is in, as `pptune_rollout_arm{arm}` and `status`
/// name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// In the rollout fraction, and some selector enforces.
    Enforce,
    /// In the policy's holdout: the control group the enforce arm is
    /// compared against.
    Holdout,
    /// Neither: outside the fraction, or the policy enforces nowhere.
    Observe,
}

impl Arm {
    pub const ALL: [Self; 3] = [Self::Enforce, Self::Holdout, Self::Observe];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Holdout => "holdout",
            Self::Observe => "observe",
        }
    }
}

/// Whether this host enforces, in its independent parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Where the host falls in the rollout (fraction, holdout).
    pub draw: Draw,
    /// Some selector of the policy is in enforce mode.
    pub policy_enforces: bool,
    /// The policy has a `rollout` (without one every host is drawn).
    pub has_rollout: bool,
}

/// Whether any selector of `policy` enforces (its own mode, or the global
/// one it inherits).
#[must_use]
pub fn policy_enforces(policy: &Policy) -> bool {
    policy
        .selectors
        .iter()
        .any(|s| s.mode.unwrap_or(policy.mode) == Mode::Enforce)
}

impl Standing {
    /// This host's standing under `policy`.
    #[must_use]
    pub fn for_host(policy: &Policy, host: &str) -> Self {
        Self::of(policy, draw(policy.rollout.as_ref(), host))
    }

    /// The standing of a host whose draw under `policy` is `draw`.
    #[must_use]
    pub fn of(policy: &Policy, draw: Draw) -> Self {
        Self {
            draw,
            policy_enforces: policy_enforces(policy),
            has_rollout: policy.rollout.is_some(),
        }
    }

    /// The host's arm.
    #[must_use]
    pub fn arm(self) -> Arm {
        if self.enforcing() {
            Arm::Enforce
        } else if self.draw.holdout {
            Arm::Holdout
        } else {
            Arm::Observe
        }
    }

    /// The host enforces somewhere.
    #[must_use]
    pub fn enforcing(self) -> bool {
        self.draw.host_selected && self.policy_enforces
    }

    /// Logs one line saying which it is (the gauges are
    /// `Metrics::set_rollout`'s).
    pub fn report(self, policy: &Policy, host: &HostId) {
        tracing::info!(
            enforcing = self.enforcing(),
            arm = self.arm().as_str(),
            host_selected = self.draw.host_selected,
            holdout = self.draw.holdout,
            policy_enforces = self.policy_enforces,
            host_id_source = host.source,
            fraction = fraction(policy),
            holdout_fraction = holdout(policy),
            "rollout: {}",
            self.describe()
        );
    }

    /// One sentence for the log.
    #[must_use]
    pub fn describe(self) -> &'static str {
        if self.draw.holdout {
            return "this host is in the holdout (the policy's control group): it observes only and keeps the rings it has, whatever the selectors say";
        }
        match (self.draw.host_selected, self.policy_enforces) {
            (true, true) => "this host enforces",
            (true, false) if self.has_rollout => {
                "this host would enforce (it is in the rollout fraction), but no selector enforces: observing only"
            }
            (true, false) => "no selector enforces: observing only",
            (false, true) => "this host observes only (outside the rollout fraction)",
            (false, false) => {
                "this host observes only (outside the rollout fraction, and no selector enforces)"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_is_respected_and_monotonic() {
        let hosts: Vec<String> = (0..2000).map(|i| format!("host-{i}")).collect();
        let at = |f: f64| {
            let r = Rollout {
                fraction: f,
                salt: "s1".into(),
                holdout: 0.0,
            };
            hosts
                .iter()
                .filter(|h| draw(Some(&r), h).host_selected)
                .cloned()
                .collect::<Vec<_>>()
        };
        let ten = at(0.1);
        let twenty = at(0.2);
        assert!((150..250).contains(&ten.len()), "{}", ten.len());
        assert!(ten.iter().all(|h| twenty.contains(h)));
        assert!(at(0.0).is_empty());
        assert_eq!(at(1.0).len(), hosts.len());
        assert!(draw(None, "x").host_selected);
    }

    /// The holdout is the top of the hash range: disjoint from the
    /// fraction, near its share, growing only by adding hosts, and it never
    /// enforces whatever the selectors say.
    #[test]
    fn the_holdout_is_disjoint_from_the_canary_and_never_enforces() {
        let hosts: Vec<String> = (0..4000).map(|i| format!("host-{i}")).collect();
        let draws = |fraction: f64, holdout: f64| {
            let r = Rollout {
                fraction,
                salt: "s1".into(),
                holdout,
            };
            hosts.iter().map(|h| draw(Some(&r), h)).collect::<Vec<_>>()
        };
        let a = draws(0.5, 0.1);
        assert!(a.iter().all(|d| !(d.host_selected && d.holdout)));
        let held = a.iter().filter(|d| d.holdout).count();
        assert!(
            (320..480).contains(&held),
            "{held} of 4000 held out at 10 %"
        );
        let b = draws(0.5, 0.2);
        assert!(a.iter().zip(&b).all(|(x, y)| !x.holdout || y.holdout));
        // The canary is the same whatever the holdout.
        let c = draws(0.5, 0.0);
        assert!(
            a.iter()
                .zip(&c)
                .all(|(x, y)| x.host_selected == y.host_selected)
        );
        assert!(c.iter().all(|d| !d.holdout));
        // Every host held out: a policy enforcing everywhere enforces nowhere.
        let mut enforce = config::default_policy().unwrap();
        enforce.mode = Mode::Enforce;
        enforce.selectors[0].mode = None;
        for d in draws(0.0, 1.0) {
            assert!(d.holdout);
            let s = Standing::of(&enforce, d);
            assert!(!s.enforcing());
            assert_eq!(s.arm(), Arm::Holdout);
            assert!(s.describe().contains("holdout"), "{}", s.describe());
        }
    }

    #[test]
    fn an_observe_only_policy_is_not_reported_as_enforcing() {
        let observe = config::default_policy().unwrap();
        assert!(!policy_enforces(&observe));
        let selected = Draw {
            host_selected: true,
            holdout: false,
        };
        let outside = Draw {
            host_selected: false,
            holdout: false,
        };
        let s = Standing::of(&observe, selected);
        assert!(!s.enforcing());
        assert!(
            s.describe().contains("no selector enforces"),
            "{}",
            s.describe()
        );
        // Without a rollout there is no fraction to be in.
        assert!(observe.rollout.is_none());
        assert_eq!(s.describe(), "no selector enforces: observing only");
        let mut with = observe.clone();
        with.rollout = Some(Rollout {
            fraction: 1.0,
            salt: "s".into(),
            holdout: 0.0,
        });
        assert!(
            Standing::of(&with, selected)
                .describe()
                .contains("it is in the rollout fraction"),
            "{}",
            Standing::of(&with, selected).describe()
        );
        assert!(s.draw.host_selected && !s.policy_enforces);

        let mut enforce = observe.clone();
        enforce.selectors[0].mode = Some(Mode::Enforce);
        assert!(Standing::of(&enforce, selected).enforcing());
        assert!(!Standing::of(&enforce, outside).enforcing());
        // Global enforce, inherited by a selector without its own mode.
        let mut global = observe;
        global.mode = Mode::Enforce;
        global.selectors[0].mode = None;
        assert!(policy_enforces(&global));
    }

    #[test]
    fn container_prefers_node_name_only_in_a_container() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/machine-id"), "abc\n").unwrap();
        let id = host_id(dir.path());
        assert_eq!(id.value, "abc");
        assert_eq!(id.source, "/etc/machine-id");
    }
}
