//! The NetworkManager reader: keyfile profiles and their `[ethtool]`
//! section.

use std::path::PathBuf;

use policy::Knob;

use super::{LinkFacts, Owner, Parsed, Roots, glob, keys, value};

pub(super) const NM_DIRS: [&str; 3] = [
    "/etc/NetworkManager/system-connections",
    "/run/NetworkManager/system-connections",
    "/usr/lib/NetworkManager/system-connections",
];

fn nm_knob(key: &str) -> Option<Knob> {
    keys().find(|k| k.2 == key).map(|k| k.0)
}

pub(super) fn nm_files(roots: &Roots) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = NM_DIRS
        .iter()
        .filter_map(|d| std::fs::read_dir(roots.path(d)).ok())
        .flat_map(|rd| rd.filter_map(Result::ok).map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "nmconnection"))
        .collect();
    files.sort();
    files
}

/// Keyfile profiles bound to this device (`connection.interface-name`,
/// `ethernet.mac-address`, or `[match] interface-name` globs) that set a
/// ring or channel count in `[ethtool]`.
pub(super) fn nm_owners(profiles: &[Parsed], f: &LinkFacts) -> Vec<(Knob, Owner)> {
    let mut out = Vec::new();
    for (source, e) in profiles {
        let get = |s: &str, k: &str| {
            e.iter()
                .find(|(es, ek, _)| es == s && ek == k)
                .map(|(_, _, v)| v.as_str())
        };
        let by_name = get("connection", "interface-name") == Some(f.name.as_str());
        let by_mac = get("ethernet", "mac-address")
            .zip(f.mac.as_deref())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b));
        let by_match = get("match", "interface-name").is_some_and(|v| {
            v.split([',', ' '])
                .filter(|g| !g.is_empty())
                .any(|g| glob(g, &f.name))
        });
        if !(by_name || by_mac || by_match) {
            continue;
        }
        for (s, k, v) in e {
            if s == "ethtool"
                && let Some(knob) = nm_knob(k)
            {
                out.push((
                    knob,
                    Owner {
                        kind: "networkmanager",
                        source: source.clone(),
                        value: value(v),
                    },
                ));
            }
        }
    }
    out
}
