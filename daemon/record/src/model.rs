//! The counterfactual's ring model and what it tracks of the pools of the
//! devices it changed: shared by the copying pass ([`crate::counterfactual`])
//! and the live one ([`crate::live`]).
//!
//! The ring model (docs/recording.md, "Counterfactuals"): per pool and
//! interval, the observed counters give the excess pages per ring fill
//! relative to the pool, `x = recycle_ring_full / recycle_ring` (the same
//! fitted quantity as the engine's ring probe, in the counter's own units,
//! so the bulk-path undercount carries over); a burst is `1 + x` pools. A
//! pool scaled by `k = ring' / ring` frees `e' = max(0, 1 + x - k)` per
//! fill, so of the interval's returns `T = recycle_ring + recycle_ring_full`,
//! `ring_full' = T e' / (k + e')` and `recycle_ring' = T - ring_full'`.
//! Pages freed need refilling: `alloc_slow` moves by the change in frees /
//! 64 (one refill is up to 64 pages). Pool memory (`inflight`,
//! `inflight_mem`): the posted part moves with the ring, the pages out
//! beyond it (the load's, a high-water mark while the pool lives) stay
//! (`policy::engine::inflight_at_ring`). Queue-count changes are not modelled: the
//! device's counters stay as observed and its decisions are marked modelled.

use policy::snapshot::{Device, Pool, PoolStats};

/// How a modelled device's pools are continued: the ring scale `k` the
/// counters' model takes, and the driver and (recorded, replayed) rings
/// the pages in flight move by, when the rings differ.
pub(crate) struct PoolModel<'a> {
    pub(crate) k: f64,
    pub(crate) pages: Option<(&'a policy::drivers::DriverInfo, (u32, u32))>,
}

/// One pool of a device the counterfactual changed, in place: with a
/// `model` (the device is modelled) its pages in flight moved to the
/// replayed ring (`policy::engine::inflight_at_ring`: the posted part
/// scales, the pages out beyond it are the load's), its bytes in flight
/// with them, and its moved counters continued from `last` (the pool at
/// the last pass) by the ring model; without, as observed. What the pool
/// is now, and what the model changed in it.
pub(crate) fn model_pool(
    p: &mut Pool,
    model: Option<&PoolModel<'_>>,
    last: Option<&Tracked>,
) -> Tracked {
    let mut t = Tracked {
        inflight: p.inflight,
        inflight_mem: p.inflight_mem,
        change: Change::default(),
        ..last.copied().unwrap_or_else(|| Tracked::new(p.id))
    };
    if let Some((info, rings)) = model.and_then(|m| m.pages)
        && let Some(n) = p.inflight
    {
        let moved = policy::engine::inflight_at_ring(info, rings, n);
        p.inflight = Some(moved);
        // Bytes per page as observed.
        p.inflight_mem = p.inflight_mem.map(|b| match n {
            0 => b,
            _ => {
                u64::try_from(u128::from(b) * u128::from(moved) / u128::from(n)).unwrap_or(u64::MAX)
            }
        });
    }
    let k = model.map(|m| m.k);
    let Some(stats) = &mut p.stats else {
        // No counters this pass: the last ones stay the baseline (as the
        // pass's ledger keeps them).
        return t;
    };
    let now = Moved::of(stats);
    // The interval's observed movement; a pool new to the track, or one
    // whose moved counters went backwards, starts from zero.
    let (obs, modl) = match last.filter(|l| l.counted && now.at_least(&l.observed)) {
        Some(l) => (l.observed, l.modelled),
        None => (Moved::default(), Moved::default()),
    };
    let delta = now.minus(&obs);
    let modelled = modl.plus(&k.map_or(delta, |k| delta.ring_model(k)));
    modelled.write(stats);
    t.counted = true;
    // As the pass's ledger counts it: a pool it never saw with its whole
    // counters, one it saw without counters not at all, a reset not.
    let counted = last.is_none_or(|l| l.counted && now.at_least(&l.observed));
    t.change = Change {
        moved: modelled.minus(&modl).diff(&delta),
        counted,
    };
    (t.observed, t.modelled) = (now, modelled);
    t
}

/// The three counters of a pool the ring model moves (docs/recording.md,
/// "Counterfactuals"); a modelled pool's other counters are its observed
/// ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    ring: u64,
    ring_full: u64,
    slow: u64,
}

impl Moved {
    fn of(s: &PoolStats) -> Self {
        Self {
            ring: s.recycle_ring,
            ring_full: s.recycle_ring_full,
            slow: s.alloc_slow,
        }
    }

    pub(crate) fn write(&self, s: &mut PoolStats) {
        (s.recycle_ring, s.recycle_ring_full, s.alloc_slow) =
            (self.ring, self.ring_full, self.slow);
    }

    fn at_least(&self, o: &Self) -> bool {
        self.ring >= o.ring && self.ring_full >= o.ring_full && self.slow >= o.slow
    }

    fn minus(&self, o: &Self) -> Self {
        Self {
            ring: self.ring.saturating_sub(o.ring),
            ring_full: self.ring_full.saturating_sub(o.ring_full),
            slow: self.slow.saturating_sub(o.slow),
        }
    }

    fn plus(&self, o: &Self) -> Self {
        Self {
            ring: self.ring.saturating_add(o.ring),
            ring_full: self.ring_full.saturating_add(o.ring_full),
            slow: self.slow.saturating_add(o.slow),
        }
    }

    /// `self - o` per counter, wrapping: what adding it to `o` gives back
    /// `self`.
    fn diff(&self, o: &Self) -> Self {
        Self {
            ring: self.ring.wrapping_sub(o.ring),
            ring_full: self.ring_full.wrapping_sub(o.ring_full),
            slow: self.slow.wrapping_sub(o.slow),
        }
    }

    /// What adding gives back (wrapping): `x + d + d.negated() == x`.
    pub(crate) fn negated(&self) -> Self {
        Self {
            ring: self.ring.wrapping_neg(),
            ring_full: self.ring_full.wrapping_neg(),
            slow: self.slow.wrapping_neg(),
        }
    }

    /// Adds a [`Self::diff`] into `s`'s moved counters (wrapping).
    pub(crate) fn add_to(&self, s: &mut PoolStats) {
        s.recycle_ring = s.recycle_ring.wrapping_add(self.ring);
        s.recycle_ring_full = s.recycle_ring_full.wrapping_add(self.ring_full);
        s.alloc_slow = s.alloc_slow.wrapping_add(self.slow);
    }

    /// The ring model on one interval's movement (module docs).
    fn ring_model(&self, k: f64) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let (full, ring) = (self.ring_full as f64, self.ring as f64);
        let total = full + ring;
        if total <= 0.0 || (k - 1.0).abs() < f64::EPSILON {
            return *self;
        }
        let x = if ring > 0.0 { full / ring } else { 0.0 };
        let e = (1.0 + x - k).max(0.0);
        let full2 = total * e / (k + e);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let full2 = (full2 + 0.5) as u64;
        let freed_less = i128::from(self.ring_full) - i128::from(full2);
        let slow = i128::from(self.slow) - freed_less / 64;
        Self {
            ring: (self.ring + self.ring_full).saturating_sub(full2),
            ring_full: full2,
            slow: u64::try_from(slow.max(0)).unwrap_or(0),
        }
    }
}

/// What the model changed in one pool this pass, for a live pass to
/// move the loop's queue deltas by.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Change {
    /// Modelled minus observed movement of the moved counters (wrapping).
    pub(crate) moved: Moved,
    /// The pass's ledger counted the pool's delta (it had counters now and
    /// at its last pass, none went backwards): only then is its movement
    /// in the queue's delta.
    pub(crate) counted: bool,
}

/// One pool as the counterfactual last saw it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tracked {
    id: u64,
    /// Its pages and bytes in flight, as observed.
    pub(crate) inflight: Option<u64>,
    pub(crate) inflight_mem: Option<u64>,
    /// `observed` and `modelled` hold counters (of this pass or, without
    /// counters now, of the last one that had them).
    counted: bool,
    /// Its moved counters, as observed and as modelled.
    pub(crate) observed: Moved,
    modelled: Moved,
    /// What the model changed in it this pass.
    pub(crate) change: Change,
}

impl Tracked {
    /// A pool not seen before.
    fn new(id: u64) -> Self {
        Self {
            id,
            inflight: None,
            inflight_mem: None,
            counted: false,
            observed: Moved::default(),
            modelled: Moved::default(),
            change: Change::default(),
        }
    }
}

/// The pools of one device the counterfactual changed a knob of, as of the
/// last pass, in the model's order ([`pools_mut`]): a sample lists a
/// device's pools in the same order pass after pass, so each is found at
/// its position, without a map.
#[derive(Debug, Default, Clone)]
pub(crate) struct Track {
    pub(crate) pools: Vec<Tracked>,
    /// The next pass's `pools`, built in the buffer the pass before last
    /// used.
    pub(crate) next: Vec<Tracked>,
    /// The copying pass that last had the device.
    pub(crate) seen: u64,
}

impl Track {
    /// `d` as observed: the baseline the model continues from.
    pub(crate) fn of_device(d: &Device) -> Self {
        let mut t = Self::default();
        t.observe(d);
        t
    }

    /// The observed counters become `d`'s (pools it no longer has are
    /// forgotten, the modelled counters of the others kept).
    pub(crate) fn observe(&mut self, d: &Device) {
        let mut next = std::mem::take(&mut self.next);
        next.clear();
        for (i, p) in d.pools().enumerate() {
            let mut t = self
                .find(i, p.id)
                .copied()
                .unwrap_or_else(|| Tracked::new(p.id));
            if let Some(s) = &p.stats {
                let now = Moved::of(s);
                if !t.counted {
                    t.modelled = now;
                }
                (t.observed, t.counted) = (now, true);
            }
            next.push(t);
        }
        self.next = std::mem::replace(&mut self.pools, next);
    }

    /// The pools as of this pass, in the model's order.
    pub(crate) fn pools(&self) -> &[Tracked] {
        &self.pools
    }

    /// Pool `id`, looked for at position `at` first.
    pub(crate) fn find(&self, at: usize, id: u64) -> Option<&Tracked> {
        match self.pools.get(at) {
            Some(t) if t.id == id => Some(t),
            _ => self.pools.iter().find(|t| t.id == id),
        }
    }

    /// Nothing of the device is known any more (it went away: what it
    /// counted before is no baseline for a return).
    pub(crate) fn forget(&mut self) {
        self.pools.clear();
    }
}

/// The ring model on one interval's counters of one pool (module docs):
/// the moved counters modelled, the others as given.
#[must_use]
pub fn model_delta(d: &PoolStats, k: f64) -> PoolStats {
    let mut out = *d;
    Moved::of(d).ring_model(k).write(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_model_keeps_returns_and_frees_less_with_a_bigger_pool() {
        let d = PoolStats {
            recycle_ring: 1000,
            recycle_ring_full: 500,
            alloc_slow: 100,
            alloc_fast: 9000,
            recycle_cached: 7000,
            ..PoolStats::default()
        };
        assert_eq!(model_delta(&d, 1.0), d);
        // x = 0.5: a burst is 1.5 pools; a pool twice as big frees nothing.
        let big = model_delta(&d, 2.0);
        assert_eq!(big.recycle_ring_full, 0);
        assert_eq!(big.recycle_ring, 1500);
        assert!(big.alloc_slow < d.alloc_slow);
        // The counters the ring does not move stay as observed.
        assert_eq!((big.alloc_fast, big.recycle_cached), (9000, 7000));
        // Half the pool: e' = 1.0, ring_full' = 1500 * 1 / 1.5 = 1000.
        let small = model_delta(&d, 0.5);
        assert_eq!(small.recycle_ring_full, 1000);
        assert_eq!(small.recycle_ring + small.recycle_ring_full, 1500);
    }

    /// A pool's pages in flight at a counterfactual ring: the posted
    /// buffers move with the ring, the 600 pages out beyond them (the
    /// load's high-water mark) stay; the bytes follow the pages. Scaling
    /// the whole mark by the ring modelled ice's 8160 → 768 step holding
    /// 824 pages, fewer than its posted ring and the load's 600 together.
    #[test]
    fn a_modelled_ring_keeps_the_pages_out_beyond_its_posted_buffers() {
        let d = policy::fixtures::nic("ice", 8160, 8160, 1);
        let info = policy::drivers::driver_info(&d);
        let model = PoolModel {
            k: 768.0 / 8160.0,
            pages: Some((&info, (8160, 768))),
        };
        let mut p = Pool {
            id: 1,
            inflight: Some(8160 + 600),
            inflight_mem: Some((8160 + 600) * 4096),
            ..Pool::default()
        };
        let t = model_pool(&mut p, Some(&model), None);
        assert_eq!(
            (p.inflight, p.inflight_mem),
            (Some(768 + 600), Some((768 + 600) * 4096))
        );
        // The track keeps what was observed.
        assert_eq!(t.inflight, Some(8160 + 600));
        // Not modelled (no ring change): as observed.
        let same = PoolModel {
            k: 1.0,
            pages: None,
        };
        let mut q = Pool {
            inflight: Some(8760),
            inflight_mem: Some(8760 * 4096),
            ..Pool::default()
        };
        let _ = model_pool(&mut q, Some(&same), None);
        assert_eq!(q.inflight, Some(8760));
    }
}
