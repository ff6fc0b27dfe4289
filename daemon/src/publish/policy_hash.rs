//! Which policy runs: a content hash of the effective policy (the file and
//! its drop-ins merged, defaults filled in, as validated), so two hosts
//! running the same policy show the same hash whatever the files' layout,
//! comments or order. Exported as `pptune_policy_info` and logged on every
//! load, as Prometheus and Alertmanager export their configs' hashes.

use std::fmt::Write as _;

use policy::Policy;
use sha2::Digest as _;

/// Hex digits kept of the sha256: 64 bits tell policies apart.
const DIGITS: usize = 16;

/// The hashes of a policy in force and of its shadow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyHashes {
    pub policy: String,
    /// `None` without a shadow policy.
    pub shadow: Option<String>,
}

impl PolicyHashes {
    /// The hashes of `p` (without its shadow) and of its shadow.
    #[must_use]
    pub fn of(p: &Policy) -> Self {
        Self {
            policy: hash(p),
            shadow: p
                .shadow
                .as_ref()
                .and_then(|s| s.policy.as_deref())
                .map(hash),
        }
    }
}

impl std::fmt::Display for PolicyHashes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.policy)?;
        if let Some(s) = &self.shadow {
            write!(f, " (shadow {s})")?;
        }
        Ok(())
    }
}

/// sha256 of the policy's JSON with sorted keys and without its `shadow`
/// (hashed on its own), first [`DIGITS`] hex digits.
#[must_use]
pub fn hash(p: &Policy) -> String {
    let mut v = serde_json::to_value(p).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.remove("shadow");
    }
    let digest = sha2::Sha256::digest(v.to_string().as_bytes());
    let mut s = String::with_capacity(DIGITS);
    for b in digest.iter().take(DIGITS / 2) {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash follows the content: equal policies hash alike, any
    /// change moves it, and the shadow has its own hash that does not move
    /// the live one.
    #[test]
    fn the_hash_follows_the_content() {
        let p = policy::fixtures::policy();
        let h = PolicyHashes::of(&p);
        assert_eq!(h.policy.len(), DIGITS);
        assert_eq!(h, PolicyHashes::of(&p.clone()));
        assert_eq!(h.shadow, None);
        let mut q = p.clone();
        q.rings.max = 4096;
        assert_ne!(hash(&q), h.policy);
        let mut with = p.clone();
        with.shadow = Some(policy::policy::Shadow {
            path: "/etc/pptune/shadow.yaml".into(),
            policy: Some(Box::new(q.clone())),
        });
        let w = PolicyHashes::of(&with);
        assert_eq!(w.policy, h.policy);
        assert_eq!(w.shadow, Some(hash(&q)));
        assert_eq!(w.to_string(), format!("{} (shadow {})", h.policy, hash(&q)));
    }
}
