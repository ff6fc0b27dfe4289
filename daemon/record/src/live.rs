//! The counterfactual on a live pass (the daemon's shadow policy), without
//! a copy of the sample: its world is the observed one except on the
//! devices it changed a knob of, and there only in what its model writes
//! (their rings, channels, pages in flight and the three counters the
//! ring model moves). While its engine runs, the [`Overlay`] writes those
//! fields of the loop's sample in place and moves the devices' queue
//! deltas by what the model changed in each pool, and puts both back
//! afterwards; every other device, field and delta, and the previous
//! sample, are read where the loop has them. What a pass costs then grows
//! with the pools of the devices it changed, and copies no device.

use policy::accounting::{PassDeltas, QueueDelta, QueueKey};
use policy::snapshot::{Availability, Channels, Device, DeviceId, Pool, Rings, Snapshot};

use crate::model::{Track, Tracked};

/// A device's pools in the model's order ([`Device::pools`]'s): its RX
/// queues' pools, then the unmapped ones.
fn pools_mut(d: &mut Device) -> impl Iterator<Item = &mut Pool> {
    d.rx_queues
        .iter_mut()
        .flat_map(|q| q.pools.iter_mut())
        .chain(d.unmapped_pools.iter_mut())
}

/// One device the counterfactual changed a knob of.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The device, as the decision that changed it named it.
    id: DeviceId,
    /// Its identity key ([`DeviceId::key`]), the counterfactual's knobs'.
    pub(crate) key: String,
    /// Its pools as of the last pass, the model's input; during a pass,
    /// what the model changed in each and what it had observed.
    track: Track,
    /// During a pass, the observed rings and channels the model replaced.
    rings: Availability<Rings>,
    channels: Availability<Channels>,
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
            track: Track::of_device(dev),
            rings: Availability::default(),
            channels: Availability::default(),
            at: None,
        }
    }

    /// Finds the device in this pass's sample.
    pub(crate) fn place(&mut self, snap: &Snapshot) {
        self.at = snap.devices.iter().position(|d| d.id == self.id);
        if self.at.is_none() {
            // Gone: what it counted before is no baseline for a return.
            self.track.forget();
        }
    }
}

/// Moves the loop's delta of `queue` (in `queues`, ascending by key; `at`
/// where the last pool's was) by what the model changed in a pool (`t`:
/// its observed pages in flight and the change; `now`: the pool as
/// modelled): its moved counters when the delta counts them, its pages
/// and bytes in flight. `undo` moves it back (exactly: wrapping sums).
fn move_delta(
    queues: &mut [(QueueKey, QueueDelta)],
    at: &mut usize,
    (queue, t, now): (QueueKey, &Tracked, &Pool),
    undo: bool,
) {
    // The pools come queue by queue, in the deltas' order: the queue is
    // the last one or the next.
    if queues.get(*at).is_none_or(|(k, _)| *k != queue) {
        if queues.get(*at + 1).is_some_and(|(k, _)| *k == queue) {
            *at += 1;
        } else {
            match queues.iter().position(|(k, _)| *k == queue) {
                Some(i) => *at = i,
                None => return,
            }
        }
    }
    let Some((_, q)) = queues.get_mut(*at) else {
        return;
    };
    let (mut by, mut by_mem) = (
        now.inflight
            .unwrap_or(0)
            .wrapping_sub(t.inflight.unwrap_or(0)),
        now.inflight_mem
            .unwrap_or(0)
            .wrapping_sub(t.inflight_mem.unwrap_or(0)),
    );
    let mut moved = t.change.moved;
    if undo {
        (by, by_mem) = (by.wrapping_neg(), by_mem.wrapping_neg());
        moved = moved.negated();
    }
    q.inflight = q.inflight.wrapping_add(by);
    q.inflight_mem = q.inflight_mem.wrapping_add(by_mem);
    if t.change.counted && now.stats.is_some() {
        moved.add_to(&mut q.stats);
    }
}

/// Each pool of `d` with its queue, in the model's order.
fn each_pool(d: &Device, mut f: impl FnMut(QueueKey, &Pool)) {
    for q in &d.rx_queues {
        for p in &q.pools {
            f(QueueKey::Id(q.id), p);
        }
    }
    for p in &d.unmapped_pools {
        f(QueueKey::Unmapped, p);
    }
}

/// The loop's pass with the placed slots' devices modelled, for as long as
/// it lives: dropped (returned, or unwound), it puts the observed fields
/// and deltas back, so the loop gets its sample and deltas as they were.
/// The previous sample is read as observed: the engine reads only harm
/// counters there (`HarmDelta`), which no model touches. A modelled
/// device's queue deltas are the loop's moved by what the model changed
/// in each pool; a queue whose delta is a reset is no data to every
/// reader, whatever its counters say.
pub(crate) struct Overlay<'a> {
    slots: &'a mut [Slot],
    snap: &'a mut Snapshot,
    deltas: &'a mut PassDeltas,
}

impl<'a> Overlay<'a> {
    /// Models each placed slot's device in place with `model` (what it
    /// observed kept in the slot) and moves its deltas.
    pub(crate) fn new(
        slots: &'a mut [Slot],
        (snap, deltas): (&'a mut Snapshot, &'a mut PassDeltas),
        mut model: impl FnMut(&mut Device, &str, &mut Track, &mut dyn FnMut(QueueKey, &Tracked, &Pool)),
    ) -> Self {
        for s in slots.iter_mut() {
            let Some(i) = s.at else {
                continue;
            };
            let Some(d) = snap.devices.get_mut(i) else {
                s.at = None;
                continue;
            };
            s.rings.clone_from(&d.rings);
            s.channels.clone_from(&d.channels);
            let q = deltas.queues_mut(i);
            let mut at = 0;
            model(d, &s.key, &mut s.track, &mut |queue, t, now| {
                move_delta(q, &mut at, (queue, t, now), false);
            });
        }
        Self {
            slots,
            snap,
            deltas,
        }
    }

    /// The pass as the counterfactual sees it: its sample and deltas.
    pub(crate) fn view(&self) -> (&Snapshot, &PassDeltas) {
        (self.snap, self.deltas)
    }
}

impl Drop for Overlay<'_> {
    fn drop(&mut self) {
        for s in self.slots.iter_mut() {
            let Some(i) = s.at else {
                continue;
            };
            let Some(d) = self.snap.devices.get_mut(i) else {
                continue;
            };
            // The deltas moved back, while the pools are still modelled.
            let q = self.deltas.queues_mut(i);
            let (mut at, mut n) = (0, 0);
            let pools = s.track.pools();
            each_pool(d, |queue, p| {
                if let Some(t) = pools.get(n) {
                    move_delta(q, &mut at, (queue, t, p), true);
                }
                n += 1;
            });
            std::mem::swap(&mut s.rings, &mut d.rings);
            std::mem::swap(&mut s.channels, &mut d.channels);
            for (p, t) in pools_mut(d).zip(s.track.pools()) {
                (p.inflight, p.inflight_mem) = (t.inflight, t.inflight_mem);
                if let Some(st) = &mut p.stats {
                    t.observed.write(st);
                }
            }
        }
    }
}
