//! What a sampled device is, beyond the pass's dumps: its driver, firmware
//! and model (`ETHTOOL_GDRVINFO` and the PCI ids in sysfs: a socket, an
//! ioctl, a close and two file reads) and its link speed (an ethtool
//! `LINKMODES_GET`). None of it changes while the netdev exists, except
//! the speed, which changes only with the link's state; so each is asked
//! once per device (the speed once per operational state) rather than
//! once per device per pass.

use policy::reuse::Reused as _;
use std::collections::HashMap;

use netlink::drvinfo::Identity;
use netlink::rtnl::{Link, OperState};
use policy::snapshot::Device;
use policy::snapshot::Iommu;

/// Where the kernel lists each bus's devices, by the names rtnetlink gives
/// a link's parent (`IFLA_PARENT_DEV_BUS_NAME`, `IFLA_PARENT_DEV_NAME`):
/// the same in every network namespace.
const SYS_BUS: &str = "/sys/bus";

/// The IOMMU domain of `link`'s parent device under `root`
/// (`<bus>/devices/<dev>/iommu_group/type`): [`Iommu::NoGroup`] when the
/// device is there without a group, [`Iommu::Unknown`] when the link has
/// no parent, a name that is not one path component, or nothing readable
/// there. The type file is read like every file pptune opens
/// (`config::file`: no blocking on a FIFO, a regular file, bounded).
fn iommu_of(root: &std::path::Path, link: &Link) -> Iommu {
    let (Some(bus), Some(dev)) = (&link.parent_bus, &link.parent_dev) else {
        return Iommu::Unknown;
    };
    let one = |n: &str| !n.is_empty() && n != "." && n != ".." && !n.contains('/');
    if !one(bus) || !one(dev) {
        return Iommu::Unknown;
    }
    let device = root.join(bus).join("devices").join(dev);
    let group = device.join("iommu_group");
    match std::fs::symlink_metadata(&group) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if device.is_dir() {
                Iommu::NoGroup
            } else {
                Iommu::Unknown
            }
        }
        Err(_) => Iommu::Unknown,
        // sysfs gives an attribute a length of a page.
        Ok(_) => match config::file::read_regular_text(&group.join("type"), 4096) {
            Ok(t) => Iommu::from_group_type(Some(&t)),
            Err(_) => Iommu::Unknown,
        },
    }
}

/// By ifindex: an entry is used only while the link dump still shows the
/// same ifindex with the same name, kind and parent, is dropped when the
/// link is removed or missing from a dump, and a failed lookup is not
/// cached.
#[derive(Debug, Default)]
pub(super) struct IdentityCache {
    by_ifindex: HashMap<u32, Entry>,
}

#[derive(Debug)]
struct Entry {
    link: LinkIdentity,
    identity: Identity,
    /// Its parent device's IOMMU domain.
    iommu: Iommu,
    /// The speed read at an operational state (`None` inside: the device
    /// has no link settings, or no speed in that state).
    speed: Option<(OperState, Option<u32>)>,
}

/// What must match for a cached entry to be used.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LinkIdentity {
    name: String,
    kind: Option<String>,
    parent_bus: Option<String>,
    parent_dev: Option<String>,
}

impl LinkIdentity {
    fn matches(&self, l: &Link) -> bool {
        self.name == l.name
            && self.kind == l.kind
            && self.parent_bus == l.parent_bus
            && self.parent_dev == l.parent_dev
    }

    fn of(l: &Link) -> Self {
        Self {
            name: l.name.clone(),
            kind: l.kind.clone(),
            parent_bus: l.parent_bus.clone(),
            parent_dev: l.parent_dev.clone(),
        }
    }
}

impl IdentityCache {
    /// `dev`'s driver, firmware and model (their buffers reused), from the
    /// cache or `ask` (the ioctl and sysfs); all `None` when neither knows
    /// the driver.
    pub(super) fn identify(
        &mut self,
        link: &Link,
        dev: &mut Device,
        ask: impl FnOnce(&str) -> Option<Identity>,
    ) {
        if !self
            .by_ifindex
            .get(&link.ifindex)
            .is_some_and(|e| e.link.matches(link))
        {
            let Some(identity) = ask(&link.name) else {
                self.by_ifindex.remove(&link.ifindex);
                (dev.driver, dev.firmware, dev.model) = (None, None, None);
                dev.iommu = Iommu::Unknown;
                return;
            };
            let e = Entry {
                link: LinkIdentity::of(link),
                identity,
                iommu: iommu_of(std::path::Path::new(SYS_BUS), link),
                speed: None,
            };
            self.by_ifindex.insert(link.ifindex, e);
        }
        let Some(Entry {
            identity: i, iommu, ..
        }) = self.by_ifindex.get(&link.ifindex)
        else {
            return;
        };
        dev.iommu = *iommu;
        dev.driver.get_or_insert_default().clone_from(&i.driver);
        dev.firmware.clone_from(&i.firmware);
        dev.model.clone_from(&i.model);
    }

    /// The speed read for `link` in its present operational state, when
    /// there is one (`Some(None)`: read, none to give).
    pub(super) fn speed(&self, link: &Link) -> Option<Option<u32>> {
        let e = self.by_ifindex.get(&link.ifindex)?;
        let (state, speed) = e.speed.filter(|_| e.link.matches(link))?;
        (state == link.oper_state).then_some(speed)
    }

    /// Keeps the speed read for `link` in its present operational state
    /// (for a device identified already).
    pub(super) fn set_speed(&mut self, link: &Link, speed: Option<u32>) {
        if let Some(e) = self.by_ifindex.get_mut(&link.ifindex)
            && e.link.matches(link)
        {
            e.speed = Some((link.oper_state, speed));
        }
    }

    /// Forgets the links not in `links` (a full link dump).
    pub(super) fn prune(&mut self, links: &[Link]) {
        self.by_ifindex
            .retain(|i, _| links.iter().any(|l| l.ifindex == *i));
        self.by_ifindex.let_go();
    }

    /// Forgets a removed link.
    pub(super) fn remove(&mut self, ifindex: u32) {
        self.by_ifindex.remove(&ifindex);
        self.by_ifindex.let_go();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(ifindex: u32, name: &str, oper: OperState) -> Link {
        Link {
            ifindex,
            name: name.into(),
            oper_state: oper,
            ..Link::default()
        }
    }

    /// Asked once per device, again only when the link is another one
    /// (renamed, or the ifindex reused); a speed is kept per operational
    /// state; a failed lookup is not kept.
    #[test]
    fn asked_once_per_device_and_speed_per_state() {
        let mut c = IdentityCache::default();
        let asked = std::cell::Cell::new(0);
        let ask = |n: &str| {
            asked.set(asked.get() + 1);
            Some(Identity {
                driver: format!("drv-{n}"),
                firmware: Some("1.2".into()),
                model: Some("8086:159b".into()),
            })
        };
        let up = link(3, "eth0", OperState::Up);
        let mut d = Device::default();
        c.identify(&up, &mut d, ask);
        c.identify(&up, &mut d, ask);
        assert_eq!(
            (
                d.driver.as_deref(),
                d.firmware.as_deref(),
                d.model.as_deref()
            ),
            (Some("drv-eth0"), Some("1.2"), Some("8086:159b"))
        );
        assert_eq!(c.speed(&up), None, "not read yet");
        c.set_speed(&up, Some(25_000));
        assert_eq!(c.speed(&up), Some(Some(25_000)));
        assert_eq!(
            c.speed(&link(3, "eth0", OperState::Down)),
            None,
            "another state"
        );
        c.identify(&link(3, "eth1", OperState::Up), &mut d, ask);
        assert_eq!(d.driver.as_deref(), Some("drv-eth1"));
        assert_eq!(c.speed(&link(3, "eth1", OperState::Up)), None, "a new link");
        assert_eq!(asked.get(), 2);
        c.identify(&link(4, "x", OperState::Up), &mut d, |_| None);
        assert_eq!((&d.driver, &d.firmware, &d.model), (&None, &None, &None));
        c.prune(&[]);
        c.identify(&link(3, "eth1", OperState::Up), &mut d, ask);
        assert_eq!(asked.get(), 3, "pruned: asked again");
    }

    /// The parent's IOMMU domain as sysfs lays it out: a group symlink
    /// with a `type`; a device without one; no such device, no parent, a
    /// name that would leave the bus's directory, or a FIFO where the type
    /// should be (read without blocking) say nothing.
    #[test]
    fn the_parents_iommu_domain_from_sysfs() {
        let root = tempfile::tempdir().unwrap();
        let devs = root.path().join("pci/devices");
        for (dev, ty) in [
            ("0000:01:00.0", Some("DMA\n")),
            ("0000:02:00.0", Some("DMA-FQ\n")),
            ("0000:03:00.0", None),
        ] {
            std::fs::create_dir_all(devs.join(dev)).unwrap();
            if let Some(ty) = ty {
                let g = root.path().join(format!("groups/{dev}"));
                std::fs::create_dir_all(&g).unwrap();
                std::fs::write(g.join("type"), ty).unwrap();
                std::os::unix::fs::symlink(&g, devs.join(dev).join("iommu_group")).unwrap();
            }
        }
        let fifo = root.path().join("groups/fifo");
        std::fs::create_dir_all(&fifo).unwrap();
        nix::unistd::mkfifo(
            &fifo.join("type"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::fs::create_dir_all(devs.join("0000:04:00.0")).unwrap();
        std::os::unix::fs::symlink(&fifo, devs.join("0000:04:00.0/iommu_group")).unwrap();
        let of = |bus: Option<&str>, dev: Option<&str>| {
            let l = Link {
                parent_bus: bus.map(Into::into),
                parent_dev: dev.map(Into::into),
                ..link(1, "eth0", OperState::Up)
            };
            iommu_of(root.path(), &l)
        };
        assert_eq!(of(Some("pci"), Some("0000:01:00.0")), Iommu::Strict);
        assert_eq!(of(Some("pci"), Some("0000:02:00.0")), Iommu::Lazy);
        assert_eq!(of(Some("pci"), Some("0000:03:00.0")), Iommu::NoGroup);
        assert_eq!(of(Some("pci"), Some("0000:04:00.0")), Iommu::Unknown);
        assert_eq!(of(Some("pci"), Some("0000:09:00.0")), Iommu::Unknown);
        assert_eq!(of(None, None), Iommu::Unknown);
        assert_eq!(of(Some("pci"), Some("..")), Iommu::Unknown);
        assert_eq!(of(Some(".."), Some("pci")), Iommu::Unknown);
        assert_eq!(of(Some("pci"), Some("a/../../x")), Iommu::Unknown);
    }
}
