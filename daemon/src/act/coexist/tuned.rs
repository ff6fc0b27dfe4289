//! The TuneD reader: the active profile(s), what they include, and their
//! `[net]`-type sections.

use std::path::PathBuf;

use policy::Knob;

use super::{LinkFacts, MAX_FOREIGN_FILE_BYTES, Owner, Parsed, Roots, glob, ini, keys, value};

pub(super) const TUNED_DIRS: [&str; 3] =
    ["/etc/tuned", "/usr/lib/tuned/profiles", "/usr/lib/tuned"];

fn tuned_profile(roots: &Roots, name: &str) -> Option<(PathBuf, String)> {
    TUNED_DIRS.iter().find_map(|d| {
        let p = roots.path(d).join(name).join("tuned.conf");
        config::file::read_regular_text(&p, MAX_FOREIGN_FILE_BYTES)
            .ok()
            .map(|t| (p, t))
    })
}

/// `ring=rx 1024 tx 1024` / `channels=combined 4`: the values pptune's
/// knobs care about.
fn ethtool_args(kind: &str, args: &str) -> Vec<(Knob, Option<u32>)> {
    let words: Vec<&str> = args.split_whitespace().collect();
    words
        .chunks(2)
        .filter_map(|w| {
            let word = *w.first()?;
            let knob = keys().find(|k| k.3 == (kind, word))?.0;
            Some((knob, w.get(1).and_then(|v| value(v))))
        })
        .collect()
}

/// The files of the active profile(s) (`/etc/tuned/active_profile`,
/// several separated by spaces) and of every profile they include.
pub(super) fn tuned_files(roots: &Roots) -> Vec<PathBuf> {
    let Ok(active) = config::file::read_regular_text(
        &roots.path("/etc/tuned/active_profile"),
        MAX_FOREIGN_FILE_BYTES,
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut todo: Vec<String> = active.split_whitespace().map(str::to_owned).collect();
    let mut seen = Vec::new();
    while let Some(name) = todo.pop() {
        if seen.contains(&name) || seen.len() > 32 {
            continue;
        }
        seen.push(name.clone());
        let Some((path, text)) = tuned_profile(roots, &name) else {
            continue;
        };
        for (s, k, v) in ini(&text) {
            if s == "main" && k == "include" {
                todo.extend(
                    v.split([',', ' '])
                        .filter(|x| !x.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        out.push(path);
    }
    out
}

/// Every `[net]`-type section of the active profiles whose `devices=`
/// (default: all) matches and that sets `ring=` or `channels=`.
pub(super) fn tuned_owners(profiles: &[Parsed], f: &LinkFacts) -> Vec<(Knob, Owner)> {
    let mut out = Vec::new();
    for (source, e) in profiles {
        let sections: Vec<&str> = {
            let mut v: Vec<&str> = e.iter().map(|(s, _, _)| s.as_str()).collect();
            v.dedup();
            v
        };
        for sec in sections {
            let get = |k: &str| {
                e.iter()
                    .find(|(s, ek, _)| s == sec && ek == k)
                    .map(|(_, _, v)| v.as_str())
            };
            let is_net = sec == "net" || get("type") == Some("net");
            if !is_net {
                continue;
            }
            let devices = get("devices").unwrap_or("*");
            let hit = devices.split(',').map(str::trim).any(|g| glob(g, &f.name));
            if !hit {
                continue;
            }
            for kind in ["ring", "channels"] {
                if let Some(args) = get(kind) {
                    for (knob, v) in ethtool_args(kind, args) {
                        out.push((
                            knob,
                            Owner {
                                kind: "tuned",
                                source: format!("{source} [{sec}]"),
                                value: v,
                            },
                        ));
                    }
                }
            }
        }
    }
    out
}
