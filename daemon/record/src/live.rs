//! The counterfactual on a live pass (the daemon's shadow policy), without
//! a copy of the sample: its world is the observed one except on the
//! devices it changed a knob of, and there only in what its model writes
//! ([`Modelled`]: their rings, channels and pool counters). While its
//! engine runs, the [`Overlay`] writes those fields of the loop's sample
//! and previous sample, and the devices' deltas, in place, and puts the
//! observed ones back afterwards; every other device, field and delta is
//! read where the loop has it. What a pass costs then grows with the
//! pools of the devices it changed, and copies no device.

use policy::accounting::{PassDeltas, PoolLedger, QueueDelta, QueueKey, queue_deltas};
use policy::snapshot::{
    Availability, Channels, Device, DeviceId, Pool, PoolStats, Rings, Snapshot,
};

use crate::counterfactual::Track;

/// What the ring model writes into a device (`Counterfactual::model_device`):
/// its rings and channels, and per pool (in [`pools_mut`] order) the pages
/// and bytes in flight and the counters. Everything else in a modelled
/// device is the observed device's.
#[derive(Debug, Default)]
pub(crate) struct Modelled {
    rings: Availability<Rings>,
    channels: Availability<Channels>,
    pools: Vec<(Option<u64>, Option<u64>, Option<PoolStats>)>,
}

/// A device's pools in the model's order: its RX queues' pools, then the
/// unmapped ones.
pub(crate) fn pools_mut(d: &mut Device) -> impl Iterator<Item = &mut Pool> {
    d.rx_queues
        .iter_mut()
        .flat_map(|q| q.pools.iter_mut())
        .chain(d.unmapped_pools.iter_mut())
}

impl Modelled {
    /// Becomes `d`'s modelled fields (its buffer kept).
    fn read(&mut self, d: &Device) {
        self.rings.clone_from(&d.rings);
        self.channels.clone_from(&d.channels);
        self.pools.clear();
        self.pools
            .extend(d.pools().map(|p| (p.inflight, p.inflight_mem, p.stats)));
    }

    /// Trades its fields with `d`'s; nothing when `d` has other pools than
    /// it was read from (by construction it has the same).
    fn swap(&mut self, d: &mut Device) {
        if d.pools().count() != self.pools.len() {
            return;
        }
        std::mem::swap(&mut self.rings, &mut d.rings);
        std::mem::swap(&mut self.channels, &mut d.channels);
        for (p, f) in pools_mut(d).zip(self.pools.iter_mut()) {
            std::mem::swap(&mut p.inflight, &mut f.0);
            std::mem::swap(&mut p.inflight_mem, &mut f.1);
            std::mem::swap(&mut p.stats, &mut f.2);
        }
    }
}

/// One device the counterfactual changed a knob of.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The device, as the decision that changed it named it.
    id: DeviceId,
    /// Its identity key ([`DeviceId::key`]), the counterfactual's knobs'.
    pub(crate) key: String,
    /// During a pass, the observed fields the model replaced.
    observed: Modelled,
    /// Its pools' counters as of the last pass, the model's input.
    track: Track,
    /// Its pools' modelled counters as of the last pass, for the deltas.
    ledger: PoolLedger,
    /// This pass's modelled queue deltas against `ledger`.
    queues: Vec<(QueueKey, QueueDelta)>,
    /// Where the device is in this pass's sample.
    at: Option<usize>,
}

impl Slot {
    /// A slot for `dev` as observed at the pass the counterfactual first
    /// changed it: its counters there are the baseline of the next deltas.
    pub(crate) fn open(dev: &Device, key: String) -> Self {
        Self {
            id: dev.id.clone(),
            key,
            observed: Modelled::default(),
            track: Track::of_device(dev),
            ledger: PoolLedger::of_device(dev),
            queues: Vec::new(),
            at: None,
        }
    }

    /// Finds the device in this pass's sample.
    pub(crate) fn place(&mut self, snap: &Snapshot) {
        self.at = snap.devices.iter().position(|d| d.id == self.id);
        if self.at.is_none() {
            // Gone: what it counted before is no baseline for a return.
            self.track.forget();
            self.ledger = PoolLedger::default();
        }
    }
}

/// The loop's pass with the placed slots' devices modelled, for as long as
/// it lives: dropped (returned, or unwound), it puts the observed fields
/// and deltas back, so the loop gets its sample and deltas as they were.
/// The previous sample is read as observed: the engine reads only harm
/// counters there (`HarmDelta`), which no model touches, and the pool
/// deltas come from the slots.
pub(crate) struct Overlay<'a> {
    slots: &'a mut [Slot],
    snap: &'a mut Snapshot,
    deltas: &'a mut PassDeltas,
}

impl<'a> Overlay<'a> {
    /// Models each placed slot's device in place with `model` (its
    /// observed fields kept in the slot) and gives it its modelled deltas.
    pub(crate) fn new(
        slots: &'a mut [Slot],
        (snap, deltas): (&'a mut Snapshot, &'a mut PassDeltas),
        mut model: impl FnMut(&mut Device, &str, &mut Track),
    ) -> Self {
        for s in slots.iter_mut() {
            let Some(d) = s.at.and_then(|i| snap.devices.get_mut(i)) else {
                continue;
            };
            s.observed.read(d);
            model(d, &s.key, &mut s.track);
            s.queues.clear();
            queue_deltas(&s.ledger, d, |k, q| s.queues.push((k, *q)));
            for p in d.pools() {
                s.ledger.record(p);
            }
            s.ledger.retire_unseen();
        }
        let mut o = Self {
            slots,
            snap,
            deltas,
        };
        o.swap_deltas();
        o
    }

    /// The pass as the counterfactual sees it: its sample and deltas.
    pub(crate) fn view(&self) -> (&Snapshot, &PassDeltas) {
        (self.snap, self.deltas)
    }

    /// Trades each placed slot's queue deltas with the loop's of its
    /// device: in, and (called again) back out. The same queues by
    /// construction (the deltas of the same device); a count that differs
    /// leaves the loop's.
    fn swap_deltas(&mut self) {
        for s in self.slots.iter_mut() {
            if let Some(i) = s.at {
                let q = self.deltas.queues_mut(i);
                if q.len() == s.queues.len() {
                    q.swap_with_slice(&mut s.queues);
                }
            }
        }
    }
}

impl Drop for Overlay<'_> {
    fn drop(&mut self) {
        self.swap_deltas();
        for s in self.slots.iter_mut() {
            // The observed fields back.
            if let Some(d) = s.at.and_then(|i| self.snap.devices.get_mut(i)) {
                s.observed.swap(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use policy::accounting::PassDeltas;
    use policy::fixtures::{self, Nic, QueueCounters};
    use policy::plan::Plan;
    use policy::snapshot::{PoolStats, QueueStats, Snapshot};

    use crate::counterfactual::{Counterfactual, PassClock};

    /// Pass `n` of a host of four 2-queue NICs at ring 256: eth1 and eth3
    /// return bursts of 2,000 pages (8,000 from pass 120 on) into their
    /// 256-page pools and drop packets, eth0 and eth2 recycle everything.
    fn host(n: u64) -> Snapshot {
        let devices = (0..4)
            .map(|d| {
                let bursty = d % 2 == 1;
                Nic::pci(d, "ice", 2).device(|q| {
                    let full = |v: u64| v * n.min(120) + 4 * v * n.saturating_sub(120);
                    let per = |v: u64| v * n + u64::from(q) * 7;
                    let (ring, full) = if bursty { (256, full(1744)) } else { (2000, 0) };
                    QueueCounters {
                        qstats: QueueStats {
                            rx_packets: Some(per(4000)),
                            rx_hw_drops: Some(per(if bursty { 300 } else { 0 })),
                            ..QueueStats::default()
                        },
                        pool: PoolStats {
                            alloc_fast: per(2000),
                            alloc_slow: full / 64,
                            recycle_ring: per(ring),
                            recycle_ring_full: full,
                            recycle_cached: per(100),
                            ..PoolStats::default()
                        },
                        inflight: 256,
                    }
                })
            })
            .collect();
        fixtures::snapshot(n * 10_000, "7.3.0", devices)
    }

    /// The live pass decides, changes and models exactly what the copying
    /// one (replay's) does, pass for pass, and gives the loop its sample
    /// and deltas back as they were.
    #[test]
    fn a_live_pass_is_a_copying_pass_without_the_copy() {
        let policy = fixtures::policy();
        let (mut copying, mut live) = (Counterfactual::default(), Counterfactual::default());
        let (mut plan_c, mut plan_l) = (Plan::default(), Plan::default());
        let mut prev: Option<Snapshot> = None;
        let mut deltas = PassDeltas::default();
        let mut changes = 0;
        for n in 0..240 {
            let now = Duration::from_secs(10 * n);
            let clock = PassClock {
                now,
                elapsed: if n == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_secs(10)
                },
                local_time: None,
            };
            let mut snap = host(n);
            deltas.compute(prev.as_ref(), &snap);

            let mut copy = host(n);
            copying.model_pass(&policy, &mut copy, now);
            copying.decide(&policy, &copy, clock, &[], None, &mut plan_c);
            for dec in &plan_c.decisions {
                copying.apply(&policy, dec, &copy, clock);
            }

            let snap_before = host(n);
            let queues_before: Vec<_> = (0..4).map(|i| deltas.queues(i).to_vec()).collect();
            let mut seen = false;
            live.live_pass(
                &policy,
                (prev.as_ref(), &mut snap, &mut deltas),
                clock,
                &[],
                &mut plan_l,
                |s, d, _, _| {
                    assert_eq!(s, &copy, "pass {n}: the sample as modelled");
                    for i in 0..4 {
                        assert_eq!(d.queues(i), copying.deltas().queues(i), "pass {n}");
                    }
                    seen = true;
                },
            );
            assert!(seen);
            assert_eq!(plan_l, plan_c, "pass {n}");
            assert_eq!(snap, snap_before, "pass {n}: the loop's sample");
            for (i, q) in queues_before.iter().enumerate() {
                assert_eq!(
                    deltas.queues(i),
                    q.as_slice(),
                    "pass {n}: the loop's deltas"
                );
            }
            changes += plan_l
                .decisions
                .iter()
                .filter(|d| d.enforced_change().is_some())
                .count();
            copying.keep_previous(&mut copy, now);
            prev = Some(snap);
        }
        // Both bursty NICs grew, and again when their bursts did: passes
        // ran on modelled devices.
        assert!(changes >= 4, "{changes} changes");
        assert!(live.is_modelled("pci/0000:01:00.0/0c:42:a1:00:00:01"));
        assert!(!live.is_modelled("pci/0000:00:00.0/0c:42:a1:00:00:00"));
    }
}
