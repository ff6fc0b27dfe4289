//! The device map: the latest sample of each device, kept current between
//! passes from the kernel's notifications and the resyncs they ask for,
//! with every reported block of knob values routed to the actuator's
//! override check and every vanished device to what forgets it.
//!
//! [`DeviceMap`] holds the map; [`Observing`] is the loop as the map needs
//! it (the override check, the actuator's memory of a device, the
//! metrics) and carries the routing itself in its provided methods; the
//! loop's implementation, at the end, lends the check what it needs.

use std::collections::BTreeMap;

use policy::Mode;
use policy::snapshot::{Availability, Device, Snapshot};

use super::Daemon;
use super::inputs::Engine;
use crate::act::lent::Seen;
use crate::publish::metrics::{KindLabels, Metrics};
use crate::sample::{Kernel, KernelEvent};

/// Latest sample of each device, by ifindex.
#[derive(Debug, Default)]
pub(super) struct DeviceMap {
    devices: BTreeMap<u32, Device>,
}

impl DeviceMap {
    /// Every device, by ifindex.
    pub(super) fn all(&self) -> &BTreeMap<u32, Device> {
        &self.devices
    }

    pub(super) fn get(&self, ifindex: u32) -> Option<&Device> {
        self.devices.get(&ifindex)
    }

    /// A device the actuator found gone while acting on it leaves the map
    /// (the next resync or notification says the rest).
    pub(super) fn gone(&mut self, ifindex: u32) {
        self.devices.remove(&ifindex);
    }

    /// Removes a device that vanished; the caller says so and forgets it.
    fn remove(&mut self, ifindex: u32) -> Option<Device> {
        self.devices.remove(&ifindex)
    }
}

/// The loop as the device map needs it. The provided methods are the
/// map's routing; the loop implements the hooks they call.
pub(super) trait Observing {
    fn map(&mut self) -> &mut DeviceMap;
    /// Whether the first pass is over (devices found before it are the
    /// start's, not news).
    fn ready(&self) -> bool;
    fn metrics(&self) -> &Metrics;
    /// A device vanished: its open evaluations cannot be judged.
    fn forget(&mut self, key: &str);
    /// Compares a reported block of knob values with what pptune set on
    /// the device as the map has it; an operator's takeover shows in the
    /// view at once.
    fn check_overrides(&mut self, ifindex: u32, seen: Seen<'_>);

    /// A notification. Returns whether the device map needs a resync.
    fn on_event(&mut self, ev: KernelEvent) -> bool {
        match ev {
            KernelEvent::RingsChanged { ifindex, rings } => {
                // Checked against the device before the block replaces it.
                self.check_overrides(ifindex, Seen::Rings(&rings));
                if let Some(d) = self.map().devices.get_mut(&ifindex) {
                    d.rings = Availability::Available(rings);
                }
                false
            }
            KernelEvent::ChannelsChanged { ifindex, channels } => {
                self.check_overrides(ifindex, Seen::Channels(&channels));
                if let Some(d) = self.map().devices.get_mut(&ifindex) {
                    d.channels = Availability::Available(channels);
                }
                // Queues (and their pools) changed.
                true
            }
            KernelEvent::PoolsChanged { .. } => true,
            // New devices, renames, up/down: re-read the map.
            KernelEvent::LinkChanged { .. } => true,
            KernelEvent::LinkRemoved { ifindex } => {
                if let Some(dev) = self.map().remove(ifindex) {
                    tracing::info!(device = %dev.name, "device vanished");
                    self.forget(&dev.id.key());
                }
                true
            }
            KernelEvent::Overflow { source } => {
                tracing::warn!(source, "notifications lost (ENOBUFS): full resync");
                self.metrics()
                    .resyncs
                    .get_or_create(&KindLabels {
                        kind: source.to_owned(),
                    })
                    .inc();
                true
            }
        }
    }

    /// Updates the device map from a sample; logs devices that appeared or
    /// vanished; compares managed knobs with what pptune set.
    fn absorb(&mut self, snap: &Snapshot) {
        let ready = self.ready();
        let new: BTreeMap<u32, Device> = snap
            .devices
            .iter()
            .map(|d| (d.ifindex, d.clone()))
            .collect();
        let map = self.map();
        for (i, d) in &new {
            if !map.devices.contains_key(i) && ready {
                tracing::info!(device = %d.name, ifindex = i, identity = %d.id.key(), "device appeared");
            }
        }
        let old = std::mem::replace(&mut map.devices, new);
        let gone: Vec<(u32, Device)> = old
            .into_iter()
            .filter(|(i, _)| !map.devices.contains_key(i))
            .collect();
        for (i, d) in gone {
            tracing::info!(device = %d.name, ifindex = i, "device vanished");
            self.forget(&d.id.key());
        }
        // A lost notification must not hide an operator's change.
        // The knob blocks only (small `Copy` values), not the devices with
        // all their queues and pools, while `check_overrides` borrows the loop.
        let blocks: Vec<_> = self
            .map()
            .devices
            .values()
            .map(|d| {
                (
                    d.ifindex,
                    d.rings.available().copied(),
                    d.channels.available().copied(),
                )
            })
            .collect();
        for (ifindex, rings, channels) in blocks {
            if let Some(r) = &rings {
                self.check_overrides(ifindex, Seen::Rings(r));
            }
            if let Some(c) = &channels {
                self.check_overrides(ifindex, Seen::Channels(c));
            }
        }
    }
}

/// The loop's hooks: the override check is lent the actuator and the
/// record like any call of the actuator's.
impl<K: Kernel, E: Engine> Observing for Daemon<K, E> {
    fn map(&mut self) -> &mut DeviceMap {
        &mut self.devices
    }

    fn ready(&self) -> bool {
        self.ready
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn forget(&mut self, key: &str) {
        let (actuator, mut io) = self.lend();
        actuator.forget_device(key, &mut io.record);
    }

    fn check_overrides(&mut self, ifindex: u32, seen: Seen<'_>) {
        // Enforced: pptune compares with the value it last saw, not only
        // with what it set.
        let Some(dev) = self.devices.get(ifindex) else {
            return;
        };
        let enforced = self.draw.host_selected
            && self
                .last_decisions
                .get(&dev.id.key())
                .is_some_and(|(d, _)| d.mode == Mode::Enforce);
        let (actuator, mut io) = self.lend();
        let Some(dev) = io.devices.get(&ifindex) else {
            return;
        };
        let taken = actuator.check_overrides(dev, enforced, seen, &mut io);
        self.count_events();
        if taken {
            self.update_view();
        }
    }
}
