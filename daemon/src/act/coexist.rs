//! Other owners of the same knobs: systemd `.link` files
//! (`RxBufferSize=`, `RxChannels=`, `CombinedChannels=` …), NetworkManager
//! connection profiles (`[ethtool] ring-rx=`, `channels-rx=` …) and TuneD's
//! active profile (`[net]` `ring=` / `channels=`). Each re-applies its value
//! when the link is reconfigured, and would fight pptune.
//!
//! The files are read below a root taken from `$PPTUNE_COEXIST_ROOT`
//! (default `/`), so tests use a temporary tree.
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

use policy::snapshot::Device;
use policy::{ChannelField, Knob, RingField};
use serde::Serialize;

/// Where the other owners' files live.
#[derive(Debug, Clone)]
pub struct Roots {
    pub root: PathBuf,
    /// `false`: look nowhere (loop tests on a fake kernel).
    pub enabled: bool,
}

impl Roots {
    /// `$PPTUNE_COEXIST_ROOT`, or `/`.
    #[must_use]
    pub fn from_env() -> Self {
        Self::at(
            std::env::var_os("PPTUNE_COEXIST_ROOT")
                .map_or_else(|| PathBuf::from("/"), PathBuf::from),
        )
    }

    /// Files below `root` (a test's temporary tree).
    #[must_use]
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            enabled: true,
        }
    }

    /// No other owners anywhere.
    #[must_use]
    pub fn none() -> Self {
        Self {
            root: PathBuf::new(),
            enabled: false,
        }
    }

    fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }
}

/// Another configuration that sets a knob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    /// `systemd-link`, `networkmanager` or `tuned`.
    pub kind: &'static str,
    /// The file (below the root) that sets it.
    pub source: String,
    /// The value it sets; `None` for `max` (systemd: the driver's maximum).
    pub value: Option<u32>,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.kind, self.source)
    }
}

/// What the matching rules look at.
#[derive(Debug, Clone, Default)]
pub struct LinkFacts {
    pub name: String,
    pub mac: Option<String>,
    pub driver: Option<String>,
    /// udev's `ID_PATH`, e.g. `pci-0000:3b:00.0`.
    pub path: Option<String>,
    /// systemd's `Type=`: `ether` for the NICs pptune looks at.
    pub kind: String,
}

impl LinkFacts {
    #[must_use]
    pub fn of(d: &Device) -> Self {
        let path = match (d.id.bus.as_deref(), d.id.parent.as_deref()) {
            (Some(bus), Some(parent)) => Some(format!("{bus}-{parent}")),
            _ => None,
        };
        Self {
            name: d.name.clone(),
            mac: d.id.perm_addr.clone(),
            driver: d.driver.clone(),
            path,
            kind: if d.name == "lo" { "loopback" } else { "ether" }.to_owned(),
        }
    }
}

/// The loop's view of other owners: re-read every tick (the files are few
/// and small, and an owner added or removed counts at once), each (device,
/// knob, owner) logged once when first seen.
#[derive(Debug)]
pub struct Tracker {
    roots: Roots,
    seen: std::collections::BTreeSet<(String, Knob, String)>,
    deferred: Vec<(policy::snapshot::DeviceId, Knob)>,
}

impl Tracker {
    #[must_use]
    pub fn new(roots: Roots) -> Self {
        Self {
            roots,
            seen: std::collections::BTreeSet::new(),
            deferred: Vec::new(),
        }
    }

    /// The knobs deferred to their owner at the last [`Tracker::deferred`].
    #[must_use]
    pub fn current(&self) -> &[(policy::snapshot::DeviceId, Knob)] {
        &self.deferred
    }

    /// Re-reads the owners: the (device, knob) pairs another configuration
    /// owns, to be treated like operator overrides under `coexist: defer`
    /// (none under `warn`). Kept for [`Tracker::current`].
    pub fn deferred(
        &mut self,
        mode: policy::Coexist,
        devices: &[Device],
    ) -> Vec<(policy::snapshot::DeviceId, Knob)> {
        let sources = Sources::read(&self.roots);
        let mut out = Vec::new();
        for d in devices {
            for (knob, owner) in sources.owners(d) {
                if self.seen.insert((d.id.key(), knob, owner.to_string())) {
                    let value = owner
                        .value
                        .map_or_else(|| "max".to_owned(), |v| v.to_string());
                    match mode {
                        policy::Coexist::Defer => tracing::info!(
                            device = %d.name, knob = %knob, owner = %owner, value = %value,
                            "{knob} of {} is set by {owner}: pptune leaves it to that owner (coexist: defer)", d.name
                        ),
                        policy::Coexist::Warn => tracing::warn!(
                            device = %d.name, knob = %knob, owner = %owner, value = %value,
                            "{knob} of {} is also set by {owner}, which re-applies it when the link is reconfigured; pptune manages it anyway (coexist: warn)", d.name
                        ),
                    }
                }
                if mode == policy::Coexist::Defer {
                    out.push((d.id.clone(), knob));
                }
            }
        }
        self.deferred.clone_from(&out);
        out
    }
}

/// An INI file read: its path as shown (below the root) and its entries.
type Parsed = (String, Vec<(String, String, String)>);

/// The other owners' files, read once: the `.link` files in effect in
/// systemd's order, the NetworkManager keyfiles, the sections of TuneD's
/// active profile and what it includes.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    links: Vec<Parsed>,
    nm: Vec<Parsed>,
    tuned: Vec<Parsed>,
}

impl Sources {
    #[must_use]
    pub fn read(roots: &Roots) -> Self {
        if !roots.enabled {
            return Self::default();
        }
        let read = |p: &Path| {
            config::file::read_regular_text(p, MAX_FOREIGN_FILE_BYTES)
                .ok()
                .map(|t| (display(roots, p), ini(&t)))
        };
        Self {
            links: link_files(roots)
                .iter()
                .filter_map(|(_, p)| read(p))
                .collect(),
            nm: nm_files(roots).iter().filter_map(|p| read(p)).collect(),
            tuned: tuned_files(roots).iter().filter_map(|p| read(p)).collect(),
        }
    }

    /// Every knob of `d` another configuration sets, with its owner (the
    /// first found, in the order systemd `.link`, NetworkManager, TuneD).
    #[must_use]
    pub fn owners(&self, d: &Device) -> BTreeMap<Knob, Owner> {
        let facts = LinkFacts::of(d);
        let mut out = BTreeMap::new();
        for (knob, owner) in link_owner(&self.links, &facts)
            .into_iter()
            .chain(nm_owners(&self.nm, &facts))
            .chain(tuned_owners(&self.tuned, &facts))
        {
            out.entry(knob).or_insert(owner);
        }
        out
    }
}

/// A shell glob as systemd and TuneD use them: `*`, `?`, `[...]` (the
/// policy's selector globs, the same rules).
fn glob(pattern: &str, s: &str) -> bool {
    policy::select::glob_match(pattern, s)
}

/// A simple INI file: (section, key, value) in order; `#` and `;` comments.
fn ini(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(s) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            s.trim().clone_into(&mut section);
        } else if let Some((k, v)) = l.split_once('=') {
            out.push((section.clone(), k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    out
}

// ---- systemd .link ---------------------------------------------------------

/// The largest file of another tool's read (a `.link` file, a TuneD
/// profile): such files are a few hundred bytes; a FIFO or a huge file
/// there is skipped as unreadable (config::file::read_regular).
const MAX_FOREIGN_FILE_BYTES: u64 = 1 << 20;

/// Every directory the other owners' files are read from (below the
/// root): where a container must see the host's.
pub fn host_dirs() -> impl Iterator<Item = &'static str> {
    LINK_DIRS.into_iter().chain(NM_DIRS).chain(TUNED_DIRS)
}

const LINK_DIRS: [&str; 5] = [
    "/etc/systemd/network",
    "/run/systemd/network",
    "/usr/local/lib/systemd/network",
    "/usr/lib/systemd/network",
    "/lib/systemd/network",
];

/// The `.link` files in effect, by file name: the first directory that
/// has a name wins; masked (empty, or a link to /dev/null) ones are dropped.
fn link_files(roots: &Roots) -> Vec<(String, PathBuf)> {
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

/// A knob's names in the other owners' files: a systemd `.link` file's
/// `[Link]` key, a NetworkManager profile's `[ethtool]` key and a TuneD
/// `[net]` section's (`ring=` / `channels=`) word. An exhaustive match: a
/// knob does not compile without them.
const fn names(knob: Knob) -> (&'static str, &'static str, (&'static str, &'static str)) {
    match knob {
        Knob::Ring(RingField::Rx) => ("RxBufferSize", "ring-rx", ("ring", "rx")),
        Knob::Ring(RingField::RxMini) => ("RxMiniBufferSize", "ring-rx-mini", ("ring", "rx-mini")),
        Knob::Ring(RingField::RxJumbo) => {
            ("RxJumboBufferSize", "ring-rx-jumbo", ("ring", "rx-jumbo"))
        }
        Knob::Channels(ChannelField::Rx) => ("RxChannels", "channels-rx", ("channels", "rx")),
        Knob::Channels(ChannelField::Combined) => (
            "CombinedChannels",
            "channels-combined",
            ("channels", "combined"),
        ),
    }
}

/// Each knob pptune manages with its names ([`names`]), in the knob
/// table's order: read by the detection here and written by
/// `pptune export`.
pub fn keys() -> impl Iterator<
    Item = (
        Knob,
        &'static str,
        &'static str,
        (&'static str, &'static str),
    ),
> {
    policy::knobs::all().map(|d| {
        let (link, nm, tuned) = names(d.knob);
        (d.knob, link, nm, tuned)
    })
}

/// The `[Link]` keys that set a knob pptune manages.
fn link_knob(key: &str) -> Option<Knob> {
    keys().find(|k| k.1 == key).map(|k| k.0)
}

fn value(v: &str) -> Option<u32> {
    v.trim().parse().ok()
}

/// The knobs the `.link` file systemd applies to this device sets.
fn link_owner(links: &[Parsed], f: &LinkFacts) -> Vec<(Knob, Owner)> {
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

fn display(roots: &Roots, p: &Path) -> String {
    p.strip_prefix(&roots.root)
        .map_or_else(|_| p.display().to_string(), |r| format!("/{}", r.display()))
}

// ---- NetworkManager --------------------------------------------------------

const NM_DIRS: [&str; 3] = [
    "/etc/NetworkManager/system-connections",
    "/run/NetworkManager/system-connections",
    "/usr/lib/NetworkManager/system-connections",
];

fn nm_knob(key: &str) -> Option<Knob> {
    keys().find(|k| k.2 == key).map(|k| k.0)
}

fn nm_files(roots: &Roots) -> Vec<PathBuf> {
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
fn nm_owners(profiles: &[Parsed], f: &LinkFacts) -> Vec<(Knob, Owner)> {
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

// ---- TuneD -----------------------------------------------------------------

const TUNED_DIRS: [&str; 3] = ["/etc/tuned", "/usr/lib/tuned/profiles", "/usr/lib/tuned"];

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
fn tuned_files(roots: &Roots) -> Vec<PathBuf> {
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
fn tuned_owners(profiles: &[Parsed], f: &LinkFacts) -> Vec<(Knob, Owner)> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use policy::snapshot::DeviceId;

    fn dev(name: &str, mac: &str, driver: &str, pci: &str) -> Device {
        Device {
            ifindex: 2,
            name: name.into(),
            id: DeviceId {
                bus: Some("pci".into()),
                parent: Some(pci.into()),
                perm_addr: Some(mac.into()),
                name_fallback: None,
            },
            driver: Some(driver.into()),
            ..Device::default()
        }
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn the_first_matching_link_file_wins_and_masking_follows_systemd() {
        let t = tempfile::tempdir().unwrap();
        let roots = Roots::at(t.path());
        let d = dev("eth0", "0c:42:a1:00:00:01", "mlx5_core", "0000:3b:00.0");
        // 99-default matches everything but sets nothing we manage.
        write(
            t.path(),
            "usr/lib/systemd/network/99-default.link",
            "[Match]\nOriginalName=*\n[Link]\nNamePolicy=keep kernel\n",
        );
        assert!(Sources::read(&roots).owners(&d).is_empty());
        // A vendor file matched by driver and path.
        write(
            t.path(),
            "usr/lib/systemd/network/50-mlx.link",
            "[Match]\nDriver=mlx5_*\nPath=pci-0000:3b:*\n[Link]\nRxBufferSize=4096\nCombinedChannels=8\n",
        );
        let o = Sources::read(&roots).owners(&d);
        assert_eq!(o[&Knob::Ring(RingField::Rx)].value, Some(4096));
        assert_eq!(
            o[&Knob::Ring(RingField::Rx)].source,
            "/usr/lib/systemd/network/50-mlx.link"
        );
        assert_eq!(o[&Knob::Channels(ChannelField::Combined)].value, Some(8));
        // An earlier file by name that matches sets nothing: it wins, so
        // the vendor file is not applied.
        write(
            t.path(),
            "etc/systemd/network/10-eth0.link",
            "[Match]\nMACAddress=0C:42:A1:00:00:01\n[Link]\nMTUBytes=9000\n",
        );
        assert!(Sources::read(&roots).owners(&d).is_empty());
        // Masked in /etc: the /usr/lib file applies again.
        write(t.path(), "etc/systemd/network/10-eth0.link", "");
        assert_eq!(Sources::read(&roots).owners(&d).len(), 2);
        // An inverted key, and a non-matching one.
        write(
            t.path(),
            "etc/systemd/network/20-not.link",
            "[Match]\nOriginalName=!eth*\n[Link]\nRxBufferSize=512\n",
        );
        assert_eq!(
            Sources::read(&roots).owners(&d)[&Knob::Ring(RingField::Rx)].value,
            Some(4096)
        );
        // An empty assignment resets the list: matches all again.
        write(
            t.path(),
            "etc/systemd/network/20-not.link",
            "[Match]\nDriver=ice\nDriver=\n[Link]\nRxBufferSize=max\n",
        );
        let o = Sources::read(&roots).owners(&d);
        assert_eq!(o[&Knob::Ring(RingField::Rx)].value, None);
        assert_eq!(
            o[&Knob::Ring(RingField::Rx)].source,
            "/etc/systemd/network/20-not.link"
        );
    }

    #[test]
    fn networkmanager_profiles_bound_by_name_mac_or_match() {
        let t = tempfile::tempdir().unwrap();
        let roots = Roots::at(t.path());
        let d = dev("eth1", "0c:42:a1:00:00:02", "ice", "0000:5e:00.0");
        write(
            t.path(),
            "etc/NetworkManager/system-connections/other.nmconnection",
            "[connection]\nid=other\ninterface-name=eth9\n[ethtool]\nring-rx=1024\n",
        );
        assert!(Sources::read(&roots).owners(&d).is_empty());
        write(
            t.path(),
            "etc/NetworkManager/system-connections/storage.nmconnection",
            "[connection]\nid=storage\ntype=ethernet\n[ethernet]\nmac-address=0C:42:A1:00:00:02\n[ethtool]\nring-rx=2048\nchannels-combined=16\n",
        );
        let o = Sources::read(&roots).owners(&d);
        assert_eq!(o[&Knob::Ring(RingField::Rx)].kind, "networkmanager");
        assert_eq!(o[&Knob::Ring(RingField::Rx)].value, Some(2048));
        assert_eq!(o[&Knob::Channels(ChannelField::Combined)].value, Some(16));
    }

    #[test]
    fn tuned_active_profile_and_its_includes() {
        let t = tempfile::tempdir().unwrap();
        let roots = Roots::at(t.path());
        let d = dev("ens1", "0c:42:a1:00:00:03", "bnxt_en", "0000:af:00.0");
        write(t.path(), "etc/tuned/active_profile", "site\n");
        write(
            t.path(),
            "etc/tuned/site/tuned.conf",
            "[main]\ninclude=network-throughput\n[cpu]\ngovernor=performance\n",
        );
        write(
            t.path(),
            "usr/lib/tuned/network-throughput/tuned.conf",
            "[main]\nsummary=x\n[nic]\ntype=net\ndevices=ens*\nring=rx 4096 tx 4096\nchannels=combined 8\n",
        );
        let o = Sources::read(&roots).owners(&d);
        assert_eq!(o[&Knob::Ring(RingField::Rx)].kind, "tuned");
        assert_eq!(o[&Knob::Ring(RingField::Rx)].value, Some(4096));
        assert_eq!(o[&Knob::Channels(ChannelField::Combined)].value, Some(8));
        assert!(
            o[&Knob::Ring(RingField::Rx)]
                .source
                .ends_with("network-throughput/tuned.conf [nic]")
        );
        // Another device is not in devices=.
        assert!(
            Sources::read(&roots)
                .owners(&dev("eth0", "x", "y", "z"))
                .is_empty()
        );
    }
}

/// `pptune export` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// A `.link` file per device for `/etc/systemd/network/`.
    SystemdLink,
    /// A NetworkManager keyfile `[ethtool]` fragment and the `nmcli` command.
    Networkmanager,
    /// A TuneD profile fragment (one `[net]`-type section per device).
    Tuned,
}

/// Whether an interface name can be written as itself where a format reads
/// a pattern or a list: a `.link` `OriginalName=` glob list, a TuneD
/// `devices=` list or section name, a file name. Linux allows any byte in
/// a name but `/`, `:`, NUL and white space; `*`, `?`, `[`, `!`, `,`, `$`
/// or a quote would be read as syntax there.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+'))
}

/// `s` as one word for a POSIX shell: single-quoted unless it is plain.
fn shell_word(s: &str) -> String {
    if plain_name(s) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Why a device's values cannot be exported in a format.
#[derive(Debug, thiserror::Error)]
#[error(
    "{name}: {why}; rename the interface (a .link file's Name=, udev) or choose another --format"
)]
pub struct ExportError {
    name: String,
    why: &'static str,
}

/// The values of `d` as the owner's configuration, ready to install. The
/// device is matched by a stable identifier where the format has one
/// (permanent MAC, then udev path); by its name only where the name means
/// itself in that format ([`plain_name`]), else it is refused.
///
/// # Errors
/// The format could only match the device by a name it would read as a
/// pattern or a list.
pub fn export(
    format: ExportFormat,
    d: &Device,
    values: &BTreeMap<Knob, u32>,
) -> Result<String, ExportError> {
    let f = LinkFacts::of(d);
    let refuse = |why| ExportError {
        name: f.name.clone(),
        why,
    };
    // In comments and file names only.
    let shown = if plain_name(&f.name) {
        f.name.clone()
    } else {
        format!("ifindex{}", d.ifindex)
    };
    let rows = || keys().filter_map(|k| values.get(&k.0).map(|v| (k, *v)));
    let mut s = String::new();
    match format {
        ExportFormat::SystemdLink => {
            let (key, val) = match (&f.mac, &f.path) {
                (Some(m), _) => ("PermanentMACAddress", m.clone()),
                (None, Some(p)) => ("Path", p.clone()),
                (None, None) if plain_name(&f.name) => ("OriginalName", f.name.clone()),
                (None, None) => {
                    return Err(refuse(
                        "no permanent MAC address or udev path to match it by, and OriginalName= \
                         would read its name as a glob list",
                    ));
                }
            };
            s.push_str(&format!(
                "# /etc/systemd/network/10-pptune-{shown}.link: the values pptune converged to.\n\
                 # A matching .link file replaces 99-default.link for this device, so its\n\
                 # naming and MAC policies are repeated here. Applied when the device\n\
                 # appears (udevadm trigger, or a reboot).\n\
                 [Match]\n{key}={val}\n\n[Link]\nNamePolicy=keep kernel database onboard slot path\n\
                 AlternativeNamesPolicy=database onboard slot path\nMACAddressPolicy=persistent\n"
            ));
            for (k, v) in rows() {
                s.push_str(&format!("{}={v}\n", k.1));
            }
        }
        ExportFormat::Networkmanager => {
            let args: Vec<String> = rows()
                .map(|(k, v)| format!("ethtool.{} {v}", k.2))
                .collect();
            s.push_str(&format!(
                "# {shown}: the values pptune converged to, for the connection profile of {shown}:\n\
                 #   nmcli connection modify \"$(nmcli -g GENERAL.CONNECTION device show {word})\" {}\n\
                 # or add this section to its keyfile in /etc/NetworkManager/system-connections/:\n\
                 [ethtool]\n",
                args.join(" "),
                word = shell_word(&f.name)
            ));
            for (k, v) in rows() {
                s.push_str(&format!("{}={v}\n", k.2));
            }
        }
        ExportFormat::Tuned => {
            if !plain_name(&f.name) {
                return Err(refuse(
                    "TuneD matches devices by name only, and its devices= would read this name \
                     as a pattern or a list",
                ));
            }
            s.push_str(&format!(
                "# {name}: the values pptune converged to; add to your TuneD profile's tuned.conf.\n\
                 [net_{name}]\ntype=net\ndevices={name}\n",
                name = f.name
            ));
            for kind in ["ring", "channels"] {
                let words: Vec<String> = rows()
                    .filter(|(k, _)| k.3.0 == kind)
                    .map(|(k, v)| format!("{} {v}", k.3.1))
                    .collect();
                if !words.is_empty() {
                    s.push_str(&format!("{kind}={}\n", words.join(" ")));
                }
            }
        }
    }
    Ok(s)
}
