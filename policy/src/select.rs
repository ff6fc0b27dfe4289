//! Which devices a policy selects, and in which mode.
//!
//! Selectors are evaluated in order and the first that matches wins, like a
//! firewall rule list: an operator reads them top to bottom.

use crate::policy::{Mode, Policy, Selector};
use crate::snapshot::Device;

impl Policy {
    /// The mode this policy gives `dev`, or `None` when no selector selects it.
    ///
    /// A selector matches when the name matches one of its `names` globs (or
    /// `names` is empty), the driver is one of its `drivers` (or `drivers` is
    /// empty), no `exclude` glob matches the name, and, with `require_pools`,
    /// the device exposes at least one page pool.
    #[must_use]
    pub fn mode_for(&self, dev: &Device) -> Option<Mode> {
        self.selectors
            .iter()
            .find(|s| s.matches(dev))
            .map(|s| s.mode.unwrap_or(self.mode))
    }
}

impl Selector {
    /// Whether this selector matches `dev` (see [`Policy::mode_for`]).
    #[must_use]
    pub fn matches(&self, dev: &Device) -> bool {
        let name_ok = self.names.is_empty() || self.names.iter().any(|g| glob_match(g, &dev.name));
        let driver_ok = self.drivers.is_empty()
            || dev
                .driver
                .as_deref()
                .is_some_and(|d| self.drivers.iter().any(|x| glob_match(x, d)));
        let excluded = self.exclude.iter().any(|g| glob_match(g, &dev.name));
        let pools_ok = !self.require_pools || dev.pools().next().is_some();
        name_ok && driver_ok && !excluded && pools_ok
    }
}

/// Shell-style glob: `*` any run of characters, `?` one character,
/// `[abc]`, `[a-z]` and `[!a-z]` classes; everything else literal. No
/// dependency: interface names are at most 15 bytes, so the simple
/// backtracking matcher is plenty fast.
#[must_use]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    match_from(&p, &t)
}

fn match_from(p: &[char], t: &[char]) -> bool {
    let Some((&first, rest)) = p.split_first() else {
        return t.is_empty();
    };
    match first {
        '*' => (0..=t.len()).any(|i| t.get(i..).is_some_and(|tail| match_from(rest, tail))),
        '?' => t.split_first().is_some_and(|(_, tt)| match_from(rest, tt)),
        '[' => match (parse_class(rest), t.split_first()) {
            (Some((class, after)), Some((&c, tt))) => class.contains(c) && match_from(after, tt),
            // An unterminated `[` is a literal, as in fnmatch.
            (None, Some((&c, tt))) => c == '[' && match_from(rest, tt),
            (_, None) => false,
        },
        lit => t
            .split_first()
            .is_some_and(|(&c, tt)| c == lit && match_from(rest, tt)),
    }
}

struct Class {
    negated: bool,
    ranges: Vec<(char, char)>,
}

impl Class {
    fn contains(&self, c: char) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != self.negated
    }
}

/// Parses the inside of `[...]` (after the `[`); returns the class and the
/// pattern after the closing `]`.
fn parse_class(p: &[char]) -> Option<(Class, &[char])> {
    let (negated, mut i) = match p.first() {
        Some('!' | '^') => (true, 1),
        _ => (false, 0),
    };
    let mut ranges = Vec::new();
    let start = i;
    loop {
        let c = *p.get(i)?;
        // A `]` right after `[` or `[!` is a literal member.
        if c == ']' && i > start {
            return Some((Class { negated, ranges }, p.get(i + 1..)?));
        }
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&e| e != ']') {
            let hi = *p.get(i + 2)?;
            ranges.push((c, hi));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Pool, RxQueue};

    #[test]
    fn glob_table() {
        let cases = [
            ("eth*", "eth0", true),
            ("eth*", "eth", true),
            ("eth*", "veth0", false),
            ("ens1f?", "ens1f0", true),
            ("ens1f?", "ens1f10", false),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("en[ps]*", "enp3s0", true),
            ("en[ps]*", "eno1", false),
            ("eth[0-3]", "eth2", true),
            ("eth[0-3]", "eth4", false),
            ("eth[!0-3]", "eth4", true),
            ("eth[!0-3]", "eth1", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("lit[", "lit[", true),
            ("[]]", "]", true),
            ("mlx5_*", "mlx5_core", true),
        ];
        for (p, t, want) in cases {
            assert_eq!(glob_match(p, t), want, "glob {p:?} on {t:?}");
        }
    }

    fn dev(name: &str, driver: &str, pools: bool) -> Device {
        Device {
            name: name.into(),
            driver: Some(driver.into()),
            rx_queues: vec![RxQueue {
                pools: if pools { vec![Pool::default()] } else { vec![] },
                ..RxQueue::default()
            }],
            ..Device::default()
        }
    }

    #[test]
    fn first_matching_selector_wins() {
        let mut p = crate::policy::tests_support::policy();
        p.mode = Mode::Observe;
        p.selectors = vec![
            Selector {
                names: vec!["eth*".into()],
                exclude: vec!["eth9".into()],
                drivers: vec!["ice".into()],
                mode: Some(Mode::Enforce),
                require_pools: true,
            },
            Selector {
                require_pools: true,
                ..Selector::default()
            },
        ];
        assert_eq!(p.mode_for(&dev("eth0", "ice", true)), Some(Mode::Enforce));
        // Excluded from the first, caught by the catch-all with the global mode.
        assert_eq!(p.mode_for(&dev("eth9", "ice", true)), Some(Mode::Observe));
        assert_eq!(
            p.mode_for(&dev("eth0", "mlx5_core", true)),
            Some(Mode::Observe)
        );
        // No pools: neither selector.
        assert_eq!(p.mode_for(&dev("eth0", "ice", false)), None);
        p.selectors.clear();
        assert_eq!(p.mode_for(&dev("eth0", "ice", true)), None);
    }
}
