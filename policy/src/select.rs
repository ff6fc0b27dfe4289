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

    /// Why no selector selects `dev`, or `None` when one does. When a
    /// selector matches the name and driver but requires pools the device
    /// does not show, that is the reason (it is the one an operator can do
    /// something about); otherwise the names, drivers or excludes.
    #[must_use]
    pub fn unselected_because(&self, dev: &Device) -> Option<Unselected> {
        let misses: Vec<Unselected> = self
            .selectors
            .iter()
            .map(|s| s.miss(dev))
            .collect::<Option<_>>()?;
        Some(if misses.contains(&Unselected::NoPools) {
            Unselected::NoPools
        } else if self.selectors.is_empty() {
            Unselected::NoSelectors
        } else {
            Unselected::NameOrDriver
        })
    }
}

/// Why a policy's selectors leave a device out ([`Policy::unselected_because`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unselected {
    /// The policy has no selectors.
    NoSelectors,
    /// No selector's `names`/`drivers` take it, or an `exclude` does.
    NameOrDriver,
    /// A selector takes it but requires page pools, and it shows none.
    NoPools,
}

impl Selector {
    /// Whether this selector matches `dev` (see [`Policy::mode_for`]).
    #[must_use]
    pub fn matches(&self, dev: &Device) -> bool {
        self.miss(dev).is_none()
    }

    /// What keeps this selector from matching `dev`, if anything.
    fn miss(&self, dev: &Device) -> Option<Unselected> {
        let name_ok = self.names.is_empty() || self.names.iter().any(|g| glob_match(g, &dev.name));
        let driver_ok = self.drivers.is_empty()
            || dev
                .driver
                .as_deref()
                .is_some_and(|d| self.drivers.iter().any(|x| glob_match(x, d)));
        let excluded = self.exclude.iter().any(|g| glob_match(g, &dev.name));
        if !name_ok || !driver_ok || excluded {
            return Some(Unselected::NameOrDriver);
        }
        let pools_ok = !self.require_pools || dev.pools().next().is_some();
        (!pools_ok).then_some(Unselected::NoPools)
    }
}

/// Shell-style glob: `*` any run of characters, `?` one character,
/// `[abc]`, `[a-z]` and `[!a-z]` classes; everything else literal (an
/// unterminated `[` too, as in fnmatch).
///
/// Linear in the text for each pattern position, whatever the pattern: every
/// token but `*` consumes exactly one character, so on a mismatch only the
/// last `*` need take one more character (the classic wildcard scan), and a
/// pattern of many `*` costs at most pattern × text steps, never the
/// exponential walk a recursive matcher takes: a 40-star name glob on a
/// 15-character name must not wedge the loop.
#[must_use]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p = tokens(pattern);
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Where to resume after the last `*`: the pattern after it, and the
    // text position it has swallowed up to.
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = t.get(ti) {
        match p.get(pi) {
            Some(Token::Star) => {
                pi += 1;
                star = Some((pi, ti));
            }
            Some(tok) if tok.matches(c) => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|tok| matches!(tok, Token::Star))
}

enum Token {
    Star,
    Any,
    Class(Class),
    Lit(char),
}

impl Token {
    /// Whether this one-character token takes `c` (`*` is handled apart).
    fn matches(&self, c: char) -> bool {
        match self {
            Self::Star | Self::Any => true,
            Self::Class(class) => class.contains(c),
            Self::Lit(l) => *l == c,
        }
    }
}

fn tokens(pattern: &str) -> Vec<Token> {
    let p: Vec<char> = pattern.chars().collect();
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while let Some(&c) = p.get(i) {
        i += 1;
        out.push(match c {
            // Runs of `*` are one `*`.
            '*' if matches!(out.last(), Some(Token::Star)) => continue,
            '*' => Token::Star,
            '?' => Token::Any,
            '[' => match p.get(i..).and_then(parse_class) {
                Some((class, after)) => {
                    i = p.len() - after.len();
                    Token::Class(class)
                }
                None => Token::Lit('['),
            },
            lit => Token::Lit(lit),
        });
    }
    out
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

    /// Many `*` against a name that almost matches: the recursive matcher
    /// this replaced took 8.9 s at 18 stars and did not finish at 40; the
    /// scan is pattern × text steps. Checked by its result on inputs the
    /// old matcher could not answer, and against a plain reference on the
    /// small ones.
    #[test]
    fn many_stars_do_not_backtrack_exponentially() {
        let name = "enp3s0f1np1v123";
        for stars in [10, 22, 40, 400] {
            let miss = format!("{}x", "*a".repeat(stars));
            assert!(!glob_match(&miss, name), "{stars} stars");
            let hit = format!("{}3", "*".repeat(stars));
            assert!(glob_match(&hit, name), "{stars} stars");
            let spread = format!("e{}3", "*?".repeat(stars));
            // 13 characters between the `e` and the final `3`.
            assert_eq!(glob_match(&spread, name), stars <= 13, "{stars} stars");
        }
        // Against the definition on every short pattern over {a, b, *, ?}.
        fn reference(p: &[char], t: &[char]) -> bool {
            match p.split_first() {
                None => t.is_empty(),
                Some(('*', rest)) => (0..=t.len()).any(|i| reference(rest, &t[i..])),
                Some(('?', rest)) => !t.is_empty() && reference(rest, &t[1..]),
                Some((c, rest)) => t.first() == Some(c) && reference(rest, &t[1..]),
            }
        }
        let alphabet = ['a', 'b', '*', '?'];
        let words = |n: usize, al: &[char]| -> Vec<String> {
            let mut all = vec![String::new()];
            for _ in 0..n {
                all = all
                    .iter()
                    .flat_map(|w| al.iter().map(move |c| format!("{w}{c}")))
                    .collect();
            }
            all
        };
        for plen in 0..=4 {
            for p in words(plen, &alphabet) {
                for tlen in 0..=4 {
                    for t in words(tlen, &['a', 'b']) {
                        let (pc, tc): (Vec<char>, Vec<char>) =
                            (p.chars().collect(), t.chars().collect());
                        assert_eq!(glob_match(&p, &t), reference(&pc, &tc), "{p:?} on {t:?}");
                    }
                }
            }
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
        let mut p = crate::fixtures::policy();
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

    /// The reason a device is left out is the one an operator can act on:
    /// pools when a selector takes the name and driver but requires them.
    #[test]
    fn why_a_device_is_unselected() {
        let mut p = crate::fixtures::policy();
        p.selectors = vec![
            Selector {
                names: vec!["eth*".into()],
                require_pools: true,
                ..Selector::default()
            },
            Selector {
                drivers: vec!["ice".into()],
                require_pools: false,
                ..Selector::default()
            },
        ];
        assert_eq!(p.unselected_because(&dev("eth0", "veth", true)), None);
        assert_eq!(p.unselected_because(&dev("x0", "ice", false)), None);
        assert_eq!(
            p.unselected_because(&dev("eth0", "veth", false)),
            Some(Unselected::NoPools)
        );
        assert_eq!(
            p.unselected_because(&dev("lo", "loopback", true)),
            Some(Unselected::NameOrDriver)
        );
        // Consistent with mode_for on every device above.
        for d in [
            dev("eth0", "veth", true),
            dev("eth0", "veth", false),
            dev("lo", "x", false),
        ] {
            assert_eq!(p.unselected_because(&d).is_none(), p.mode_for(&d).is_some());
        }
        p.selectors.clear();
        assert_eq!(
            p.unselected_because(&dev("eth0", "ice", true)),
            Some(Unselected::NoSelectors)
        );
    }
}
