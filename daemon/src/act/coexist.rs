//! Other owners of the same knobs: systemd `.link` files
//! (`RxBufferSize=`, `RxChannels=`, `CombinedChannels=` …), NetworkManager
//! connection profiles (`[ethtool] ring-rx=`, `channels-rx=` …) and TuneD's
//! active profile (`[net]` `ring=` / `channels=`). Each re-applies its value
//! when the link is reconfigured, and would fight pptune.
//!
//! The files are read below a root taken from `$PPTUNE_COEXIST_ROOT`
//! (default `/`), so tests use a temporary tree.
//!
//! The readers are one module per owner: `link`, `network_manager` and
//! `tuned`; [`Tracker`] is the loop's view of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use policy::snapshot::Device;
use policy::{ChannelField, Knob, RingField};
use serde::Serialize;

mod link;
mod network_manager;
mod tracker;
mod tuned;

pub use tracker::Tracker;

use link::{LINK_DIRS, link_files, link_owner};
use network_manager::{NM_DIRS, nm_files, nm_owners};
use tuned::{TUNED_DIRS, tuned_files, tuned_owners};

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

/// The largest file of another tool's read (a `.link` file, a TuneD
/// profile): such files are a few hundred bytes; a FIFO or a huge file
/// there is skipped as unreadable (config::file::read_regular).
const MAX_FOREIGN_FILE_BYTES: u64 = 1 << 20;

/// Every directory the other owners' files are read from (below the
/// root): where a container must see the host's.
pub fn host_dirs() -> impl Iterator<Item = &'static str> {
    LINK_DIRS.into_iter().chain(NM_DIRS).chain(TUNED_DIRS)
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

fn value(v: &str) -> Option<u32> {
    v.trim().parse().ok()
}

fn display(roots: &Roots, p: &Path) -> String {
    p.strip_prefix(&roots.root)
        .map_or_else(|_| p.display().to_string(), |r| format!("/{}", r.display()))
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
