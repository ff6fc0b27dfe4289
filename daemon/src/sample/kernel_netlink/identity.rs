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
                return;
            };
            let e = Entry {
                link: LinkIdentity::of(link),
                identity,
                speed: None,
            };
            self.by_ifindex.insert(link.ifindex, e);
        }
        let Some(Entry { identity: i, .. }) = self.by_ifindex.get(&link.ifindex) else {
            return;
        };
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
}
