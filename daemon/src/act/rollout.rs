//! Staged enforcement: whether this host enforces under the policy's
//! `rollout: {fraction, salt}`.
//!
//! The decision is a stable hash of (salt, host identity) mapped to [0, 1):
//! below `fraction` enforces. Raising the fraction only adds hosts (a host
//! that enforced at 10 % still enforces at 20 %), and a new salt draws a new
//! sample of the fleet.

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
    let mid = std::fs::read_to_string(root.join("etc/machine-id"))
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
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
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

/// Whether this host falls in the rollout fraction. It enforces only where a
/// selector enforces too: [`Standing`] says whether it does, and everything
/// that tells an operator (log, metrics, `status`, `plan`) asks it.
#[must_use]
pub fn host_selected(rollout: Option<&Rollout>, host: &str) -> bool {
    rollout.is_none_or(|r| position(&r.salt, host) < r.fraction)
}

/// Whether this host enforces, in its two independent parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// The host falls in the rollout fraction: it would enforce what an
    /// enforcing selector selects.
    pub host_selected: bool,
    /// Some selector of the policy is in enforce mode.
    pub policy_enforces: bool,
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
        Self::of(policy, host_selected(policy.rollout.as_ref(), host))
    }

    /// `host_selected` as [`host_selected`] computed it for this host.
    #[must_use]
    pub fn of(policy: &Policy, host_selected: bool) -> Self {
        Self {
            host_selected,
            policy_enforces: policy_enforces(policy),
        }
    }

    /// The host enforces somewhere.
    #[must_use]
    pub fn enforcing(self) -> bool {
        self.host_selected && self.policy_enforces
    }

    /// Logs one line saying which it is (the gauges are
    /// `Metrics::set_rollout`'s).
    pub fn report(self, policy: &Policy, host: &HostId) {
        tracing::info!(
            enforcing = self.enforcing(),
            host_selected = self.host_selected,
            policy_enforces = self.policy_enforces,
            host_id_source = host.source,
            fraction = fraction(policy),
            "rollout: {}",
            self.describe()
        );
    }

    /// One sentence for the log.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match (self.host_selected, self.policy_enforces) {
            (true, true) => "this host enforces",
            (true, false) => {
                "this host would enforce (it is in the rollout fraction), but no selector enforces: observing only"
            }
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
            };
            hosts
                .iter()
                .filter(|h| host_selected(Some(&r), h))
                .cloned()
                .collect::<Vec<_>>()
        };
        let ten = at(0.1);
        let twenty = at(0.2);
        assert!((150..250).contains(&ten.len()), "{}", ten.len());
        assert!(ten.iter().all(|h| twenty.contains(h)));
        assert!(at(0.0).is_empty());
        assert_eq!(at(1.0).len(), hosts.len());
        assert!(host_selected(None, "x"));
    }

    #[test]
    fn an_observe_only_policy_is_not_reported_as_enforcing() {
        let observe = config::default_policy().unwrap();
        assert!(!policy_enforces(&observe));
        let s = Standing::of(&observe, true);
        assert!(!s.enforcing());
        assert!(
            s.describe().contains("no selector enforces"),
            "{}",
            s.describe()
        );
        assert!(s.host_selected && !s.policy_enforces);

        let mut enforce = observe.clone();
        enforce.selectors[0].mode = Some(Mode::Enforce);
        assert!(Standing::of(&enforce, true).enforcing());
        assert!(!Standing::of(&enforce, false).enforcing());
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
