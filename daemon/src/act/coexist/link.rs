//! The systemd `.link` reader.
//!
//! systemd's rules, as systemd.link(5) states them: `.link` files are read
//! from `/etc`, `/run`, `/usr/local/lib` and `/usr/lib` `systemd/network/`;
//! a file in an earlier directory masks one of the same name in a later one
//! (an empty file or a link to `/dev/null` disables it); all files are
//! ordered by file name, and the **first** whose `[Match]` section matches
//! the device is the one applied. In `[Match]`, every key given must match;
//! a key's space-separated values match if any does (shell globs for
//! `OriginalName=`, `Driver=`, `Path=`, `Type=`), a leading `!` inverts the
//! key; an empty assignment resets the key's list. Keys this module cannot
//! evaluate (`Property=`, `Host=`, `KernelCommandLine=` …) are assumed to
//! match: an owner wrongly assumed is deferred to, never fought.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use policy::Knob;

use super::{LinkFacts, Owner, Parsed, Roots, glob, keys, value};

pub(super) const LINK_DIRS: [&str; 5] = [
    "/etc/systemd/network",
    "/run/systemd/network",
    "/usr/local/lib/systemd/network",
    "/usr/lib/systemd/network",
    "/lib/systemd/network",
];

/// The `.link` files in effect, by file name: the first directory that
/// has a name wins; masked (empty, or a link to /dev/null) ones are dropped.
pub(super) fn link_files(roots: &Roots) -> Vec<(String, PathBuf)> {
    let mut by_name: BTreeMap<String, Option<PathBuf>> = BTreeMap::new();
    for dir in LINK_DIRS {
        let Ok(rd) = std::fs::read_dir(roots.path(dir)) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".link") || by_name.contains_key(&name) {
                continue;
            }
            let p = e.path();
            let masked = std::fs::read_link(&p).is_ok_and(|t| t == Path::new("/dev/null"))
                || std::fs::metadata(&p).is_ok_and(|m| m.len() == 0);
            by_name.insert(name, (!masked).then_some(p));
        }
    }
    by_name
        .into_iter()
        .filter_map(|(n, p)| p.map(|p| (n, p)))
        .collect()
}

/// Whether one `[Match]` key's value list matches.
fn link_key_matches(key: &str, values: &str, f: &LinkFacts) -> bool {
    let (invert, values) = match values.strip_prefix('!') {
        Some(v) => (true, v),
        None => (false, values),
    };
    let any = |s: Option<&str>, exact: bool| {
        s.is_some_and(|s| {
            values.split_whitespace().any(|v| {
                if exact {
                    v.eq_ignore_ascii_case(s)
                } else {
                    glob(v, s)
                }
            })
        })
    };
    let hit = match key {
        "OriginalName" => any(Some(&f.name), false),
        "MACAddress" | "PermanentMACAddress" => any(f.mac.as_deref(), true),
        "Driver" => any(f.driver.as_deref(), false),
        "Path" => any(f.path.as_deref(), false),
        "Type" => any(Some(&f.kind), false),
        // Not evaluated here: assumed to match (see the module comment).
        _ => return true,
    };
    hit != invert
}

/// The `[Link]` keys that set a knob pptune manages.
fn link_knob(key: &str) -> Option<Knob> {
    keys().find(|k| k.1 == key).map(|k| k.0)
}

/// The knobs the `.link` file systemd applies to this device sets.
pub(super) fn link_owner(links: &[Parsed], f: &LinkFacts) -> Vec<(Knob, Owner)> {
    for (source, entries) in links {
        // Per key, the accumulated values (an empty assignment resets).
        let mut keys: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (s, k, v) in entries {
            if s == "Match" {
                let list = keys.entry(k.as_str()).or_default();
                if v.is_empty() {
                    list.clear();
                } else {
                    list.push(v.as_str());
                }
            }
        }
        let matches = keys
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .all(|(k, v)| v.iter().all(|v| link_key_matches(k, v, f)));
        if !matches {
            continue;
        }
        return entries
            .iter()
            .filter(|(s, _, _)| s == "Link")
            .filter_map(|(_, k, v)| {
                link_knob(k).map(|knob| {
                    (
                        knob,
                        Owner {
                            kind: "systemd-link",
                            source: source.clone(),
                            value: value(v),
                        },
                    )
                })
            })
            .collect();
    }
    Vec::new()
}
