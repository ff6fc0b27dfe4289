//! `pptune fleet suggest`'s drop-in: what it writes from the fleet's
//! evidence (label values any exporter, federation source or remote write
//! can set), escaped for YAML, and read back before it is written. Here,
//! beside the loader that reads it back, so the fuzz target reaches it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A device class: what `pptune_device_info` says of it (`None`: the
/// host did not know).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Class {
    pub driver: String,
    pub model: Option<String>,
    pub firmware: Option<String>,
    pub mtu: Option<u32>,
    pub speed: Option<u32>,
}

impl Class {
    /// `ice 8086:159b, firmware 4.40, MTU 1500, 25000 Mb/s`.
    fn describe(&self) -> String {
        let mut t = self.driver.clone();
        if let Some(m) = &self.model {
            let _ = write!(t, " {m}");
        }
        if let Some(f) = &self.firmware {
            let _ = write!(t, ", firmware {f}");
        }
        let _ = match self.mtu {
            Some(m) => write!(t, ", MTU {m}"),
            None => write!(t, ", any MTU"),
        };
        if let Some(s) = self.speed {
            let _ = write!(t, ", {s} Mb/s");
        }
        t
    }

    /// The prior's YAML flow mapping, the class's keys that are known.
    fn entry(&self, ring: u32) -> String {
        let mut t = format!("{{driver: {}", yaml_str(&self.driver));
        if let Some(m) = &self.model {
            let _ = write!(t, ", model: {}", yaml_str(m));
        }
        if let Some(f) = &self.firmware {
            let _ = write!(t, ", firmware: {}", yaml_str(f));
        }
        if let Some(m) = self.mtu {
            let _ = write!(t, ", mtu: {m}");
        }
        if let Some(s) = self.speed {
            let _ = write!(t, ", speed: {s}");
        }
        let _ = write!(t, ", ring_rx: {ring}}}");
        t
    }
}

/// One device's evidence: its host, its class, the ring it converged to.
#[derive(Debug, Clone, PartialEq)]
pub struct Converged {
    pub instance: String,
    pub class: Class,
    pub ring: u32,
}

/// A character YAML may not carry raw, or reads as a line break: the
/// controls (C0, DEL, C1: newline and carriage return among them), the
/// Unicode line and paragraph separators, the byte-order mark and the
/// non-characters U+FFFE/U+FFFF. The one judgement both the comments and
/// the scalars escape by.
fn not_raw_in_yaml(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        )
}

/// Text for one YAML comment line: what came from outside (a label value
/// any exporter, federation source or remote write can set; the
/// Prometheus address and selector) cannot end the comment and start a
/// key. Every control character (newline and carriage return among them),
/// the Unicode line and paragraph separators, the byte-order mark and the
/// characters that reorder text are written as `\u{..}` escapes. The one
/// place comment text is made; every comment of the drop-in goes through
/// it.
fn comment(s: &str) -> String {
    let hidden = |c: char| {
        not_raw_in_yaml(c)
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// The classes that get a prior (those with `min_hosts` hosts), each with
/// its devices, and the others.
fn by_class(rows: &[Converged]) -> BTreeMap<&Class, Vec<&Converged>> {
    let mut classes: BTreeMap<&Class, Vec<&Converged>> = BTreeMap::new();
    for r in rows {
        classes.entry(&r.class).or_default().push(r);
    }
    classes
}

/// A class's hosts (distinct) and its rings (sorted).
fn hosts_and_rings(devs: &[&Converged]) -> (u32, Vec<u32>) {
    let mut hosts: Vec<&str> = devs.iter().map(|d| d.instance.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let mut rings: Vec<u32> = devs.iter().map(|d| d.ring).collect();
    rings.sort_unstable();
    (u32::try_from(hosts.len()).unwrap_or(u32::MAX), rings)
}

/// The ring at quantile `q` of sorted, non-empty `rings`.
fn quantile(rings: &[u32], q: f64) -> u32 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((rings.len() - 1) as f64 * q).round() as usize;
    rings[i]
}

/// The priors the drop-in is meant to hold, as the policy has them.
fn meant(rows: &[Converged], min_hosts: u32) -> Vec<policy::policy::Prior> {
    by_class(rows)
        .into_iter()
        .filter_map(|(class, devs)| {
            let (n, rings) = hosts_and_rings(&devs);
            (n >= min_hosts).then(|| policy::policy::Prior {
                driver: class.driver.clone(),
                mtu: class.mtu,
                speed_mbps: class.speed,
                model: class.model.clone(),
                firmware: class.firmware.clone(),
                ring_rx: quantile(&rings, 0.5),
            })
        })
        .collect()
}

/// `text` parsed as a drop-in over the embedded default must be that
/// default with exactly the priors meant, nothing else.
///
/// # Errors
/// It does not parse, or says something the generator did not mean.
pub fn read_back(text: &str, rows: &[Converged], min_hosts: u32) -> Result<(), String> {
    let got = crate::parse_str("fleet suggest's drop-in", text).map_err(|e| {
        format!(
            "the generated drop-in does not parse (nothing written): {}",
            crate::render(&e)
        )
    })?;
    let mut want = crate::parse_str("empty", "{}").map_err(|e| crate::render(&e))?;
    want.priors = meant(rows, min_hosts);
    if got != want {
        return Err(
            "the generated drop-in says more than its priors (nothing written): a label value changed it"
                .to_owned(),
        );
    }
    Ok(())
}

/// Whether the policy takes the prior `row` would give at all (a blank
/// driver, a model that is not a PCI id, an MTU below 68, a ring out of
/// range are values pptune never exports): judged by the loader itself, on
/// that one prior, so there is no second copy of its rules here.
#[must_use]
pub fn usable(row: &Converged) -> bool {
    let rows = std::slice::from_ref(row);
    read_back(&drop_in(rows, 1, ""), rows, 1).is_ok()
}

/// The drop-in: one prior per class with `min_hosts` hosts, the evidence
/// in comments, the classes left out listed.
#[must_use]
pub fn drop_in(rows: &[Converged], min_hosts: u32, source: &str) -> String {
    let classes = by_class(rows);
    let mut out = format!(
        "# Fleet priors, written by `pptune fleet suggest` from {}.\n\
         # Per class (driver, model, firmware, MTU, link speed): the median RX\n\
         # ring of the devices whose ring.rx change pptune judged effective and\n\
         # none reverted. A device pptune has not changed yet starts there\n\
         # (docs/policy.md, `priors`).\n\
         priors:\n",
        comment(source)
    );
    let mut left_out = Vec::new();
    let mut any = false;
    for (class, devs) in &classes {
        let (n, rings) = hosts_and_rings(devs);
        let what = comment(&class.describe());
        if n < min_hosts {
            left_out.push(format!("{what}: {n} host(s)"));
            continue;
        }
        any = true;
        let at = |q: f64| quantile(&rings, q);
        let _ = writeln!(
            out,
            "  # {what}: {n} hosts, {} devices; ring min {}, p10 {}, median {}, p90 {}, max {}",
            devs.len(),
            rings[0],
            at(0.1),
            at(0.5),
            at(0.9),
            rings[rings.len() - 1],
        );
        let _ = writeln!(out, "  - {}", class.entry(at(0.5)));
    }
    if !any {
        out = out.replace("priors:\n", "priors: []\n");
    }
    if !left_out.is_empty() {
        let _ = writeln!(
            out,
            "# No prior (fewer than {min_hosts} hosts): {}",
            left_out.join("; ")
        );
    }
    out
}

/// A name as a YAML scalar: plain when it is a plain word, double-quoted
/// otherwise (a model's colon, a firmware's spaces), with `"` and `\`
/// escaped and every character YAML may not carry raw or reads as a line
/// break (controls, DEL, C1, U+2028/9, the byte-order mark, U+FFFE/F) as a
/// `\u`/`\U` escape, which YAML reads back as that character.
fn yaml_str(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
    {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                let _ = if u32::from(c) <= 0xffff {
                    write!(out, "\\u{:04x}", u32::from(c))
                } else {
                    write!(out, "\\U{:08x}", u32::from(c))
                };
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn row(instance: &str, driver: &str, mtu: Option<u32>, ring: u32) -> Converged {
        Converged {
            instance: instance.into(),
            class: Class {
                driver: driver.into(),
                model: None,
                firmware: None,
                mtu,
                speed: None,
            },
            ring,
        }
    }

    #[test]
    fn a_class_with_enough_hosts_gets_its_median_and_the_others_are_listed() {
        let rows = [
            row("a", "mlx5_core", Some(1500), 4096),
            row("b", "mlx5_core", Some(1500), 2048),
            row("c", "mlx5_core", Some(1500), 8192),
            row("c", "mlx5_core", Some(1500), 4096),
            row("d", "ice", Some(9000), 2048),
        ];
        let text = drop_in(&rows, 3, "test");
        assert!(
            text.contains("  - {driver: mlx5_core, mtu: 1500, ring_rx: 4096}\n"),
            "{text}"
        );
        assert!(text.contains("3 hosts, 4 devices"), "{text}");
        assert!(
            text.contains("# No prior (fewer than 3 hosts): ice, MTU 9000: 1 host(s)"),
            "{text}"
        );
        let p = crate::parse_str("fleet.yaml", &text).unwrap();
        assert_eq!(p.priors.len(), 1);
        assert_eq!(p.priors[0].ring_rx, 4096);
        // Nothing with enough evidence: a valid drop-in with no prior.
        let none = drop_in(&rows, 10, "test");
        assert!(
            crate::parse_str("fleet.yaml", &none)
                .unwrap()
                .priors
                .is_empty(),
            "{none}"
        );
    }

    /// A class with every key known: the prior names them all, quoted
    /// where YAML needs it, and the policy reads them back.
    #[test]
    fn a_whole_class_is_written_and_read_back() {
        let class = Class {
            driver: "ice".into(),
            model: Some("8086:159b".into()),
            firmware: Some("4.40 0x8001c967 1.3534.0".into()),
            mtu: Some(9000),
            speed: Some(25_000),
        };
        let rows: Vec<Converged> = ["a", "b"]
            .into_iter()
            .map(|h| Converged {
                instance: h.into(),
                class: class.clone(),
                ring: 2048,
            })
            .collect();
        let text = drop_in(&rows, 2, "test");
        assert!(
            text.contains(
                r#"  - {driver: ice, model: "8086:159b", firmware: "4.40 0x8001c967 1.3534.0", mtu: 9000, speed: 25000, ring_rx: 2048}"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "# ice 8086:159b, firmware 4.40 0x8001c967 1.3534.0, MTU 9000, 25000 Mb/s: 2 hosts"
            ),
            "{text}"
        );
        let p = crate::parse_str("fleet.yaml", &text).unwrap();
        let prior = &p.priors[0];
        assert_eq!(
            (
                prior.model.as_deref(),
                prior.firmware.as_deref(),
                prior.mtu,
                prior.speed_mbps
            ),
            (
                Some("8086:159b"),
                Some("4.40 0x8001c967 1.3534.0"),
                Some(9000),
                Some(25_000)
            )
        );
    }

    fn class_rows(class: &Class) -> Vec<Converged> {
        ["a", "b"]
            .into_iter()
            .map(|h| Converged {
                instance: h.into(),
                class: class.clone(),
                ring: 2048,
            })
            .collect()
    }

    /// A `firmware` label holding a newline wrote `mode: enforce` with a
    /// selector on `*` into the drop-in, and `check` passed it. Now it
    /// stays in its comment, escaped, and the drop-in holds its prior only.
    #[test]
    fn a_label_value_cannot_add_a_key_to_the_drop_in() {
        let class = Class {
            driver: "ice".into(),
            model: None,
            firmware: Some("1.0\nmode: enforce\nselectors:\n  - names: [\"*\"]\n#".into()),
            mtu: None,
            speed: None,
        };
        let rows = class_rows(&class);
        let text = drop_in(&rows, 2, "http://prom\r\nmode: enforce");
        read_back(&text, &rows, 2).unwrap();
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("mode") || l.starts_with("selectors")),
            "{text}"
        );
        let p = crate::parse_str("fleet.yaml", &text).unwrap();
        assert_eq!(p.mode, policy::Mode::default(), "{text}");
        assert_eq!(p.priors[0].firmware, class.firmware);
    }

    /// What the generator did not mean is refused before anything is
    /// written, whatever put it there.
    #[test]
    fn a_drop_in_that_says_more_than_its_priors_is_refused() {
        let rows = class_rows(&Class {
            driver: "ice".into(),
            model: None,
            firmware: None,
            mtu: Some(1500),
            speed: None,
        });
        let text = drop_in(&rows, 2, "test");
        read_back(&text, &rows, 2).unwrap();
        for extra in [
            "mode: enforce\n",
            "priors: []\n",
            "timing:\n  interval: 1s\n",
        ] {
            let e = read_back(&format!("{text}{extra}"), &rows, 2).unwrap_err();
            assert!(e.to_string().contains("nothing written"), "{extra}: {e}");
        }
        // One prior fewer (fewer hosts than asked for) is not what was meant.
        assert!(read_back(&text, &rows, 3).is_err());
    }

    /// The variant: every control character, the Unicode line breaks, the
    /// byte-order mark and a bidi override, in every label: the drop-in
    /// reads back as exactly its priors, the labels as they were.
    #[test]
    fn every_control_character_in_a_label_round_trips() {
        let odd = (0u32..0x20)
            .chain([
                0x7f, 0x85, 0x9b, 0x2028, 0x2029, 0xfeff, 0xfffe, 0xffff, 0x202e,
            ])
            .filter_map(char::from_u32);
        for c in odd {
            let class = Class {
                driver: format!("d{c}x"),
                model: Some("8086:159b".into()),
                firmware: Some(format!("f{c}")),
                mtu: None,
                speed: None,
            };
            let rows = class_rows(&class);
            let text = drop_in(&rows, 2, &format!("src{c}"));
            read_back(&text, &rows, 2).unwrap_or_else(|e| panic!("{:?}: {e}\n{text}", c));
            let p = crate::parse_str("fleet.yaml", &text).unwrap();
            assert_eq!(p.priors[0].driver, class.driver, "{c:?}");
            assert_eq!(p.priors[0].model, class.model, "{c:?}");
            assert_eq!(p.priors[0].firmware, class.firmware, "{c:?}");
        }
    }
}
