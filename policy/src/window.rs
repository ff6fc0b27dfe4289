//! Counter deltas per pool id, accumulated per (device, RX queue) over one
//! finding window.
//!
//! Rules (design.md "Signals"): a pool that vanished between samples
//! contributes nothing after its last sample; a new pool contributes its
//! counters since creation; a counter that goes backwards is "no data" for
//! the whole window (never a rate). Pools without an RX queue go to a
//! device-level bucket.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::accounting::{
    HarmDelta, PoolLedger, QueueDelta, QueueKey, device_delta, harm_events, queue_deltas,
};
use crate::signals::{self, n64, ratio};
use crate::snapshot::{Device, PoolStats};

/// Counters summed over one queue's pools during the open window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueAcc {
    /// Sum of per-pool deltas.
    pub stats: PoolStats,
    /// Any pool of the queue has a memory provider.
    pub provider: bool,
    /// Largest pool size estimate seen: pages in flight at a sample.
    pub inflight_peak: u64,
    /// Pages the queue's pools had out, summed over the window's samples
    /// ([`Load::of_window`]).
    #[serde(default)]
    pub inflight_sum: u64,
}

/// The open window of one device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowAcc {
    pub elapsed: Duration,
    /// A counter went backwards: the window is no data.
    pub reset: bool,
    /// Per RX queue and the [`QueueKey::Unmapped`] bucket, ascending by
    /// key, each key once. A vector rather than a map so that a closed
    /// window hands its storage to the next one ([`WindowAcc::clear`]): a
    /// steady tick allocates nothing. Written as a map keyed `rx-<id>` /
    /// `unmapped` in the state file, as when it was a `BTreeMap`.
    #[serde(serialize_with = "queues_as_map", deserialize_with = "queues_from_map")]
    pub queues: Vec<(QueueKey, QueueAcc)>,
    /// qstats `rx-alloc-fail` (queue-level when present, else device-level).
    pub alloc_fail: u64,
    /// Harm: hardware drops (qstats) or link drop counters.
    pub drops: u64,
    /// Received packets, to normalise harm.
    pub packets: u64,
    /// Samples folded into this window.
    pub samples: u32,
}

impl WindowAcc {
    /// Empties the window for the next one, keeping its storage.
    pub(crate) fn clear(&mut self) {
        let mut queues = std::mem::take(&mut self.queues);
        queues.clear();
        *self = Self {
            queues,
            ..Self::default()
        };
    }

    /// Fold one sample interval of `dev` into the window (`deltas`: its
    /// queues' pool deltas of the pass, [`crate::accounting::PassDeltas`]).
    pub(crate) fn add_tick(
        &mut self,
        deltas: &[(QueueKey, QueueDelta)],
        prev_dev: Option<&Device>,
        dev: &Device,
        elapsed: Duration,
    ) {
        self.elapsed = self.elapsed.saturating_add(elapsed);
        self.samples = self.samples.saturating_add(1);
        let fold = |acc: &mut QueueAcc, q: &QueueDelta| {
            acc.provider |= q.provider;
            acc.stats = acc.stats.add(&q.stats);
            acc.inflight_peak = acc.inflight_peak.max(q.inflight);
            acc.inflight_sum = acc.inflight_sum.saturating_add(q.inflight);
        };
        // The pass gives each key once, in ascending order, and the
        // open window's queues are kept in the same order: one merge walk.
        // A queue the window has not seen yet is inserted where it sorts
        // (at the end, in a window's first tick).
        let queues = &mut self.queues;
        let mut at = 0;
        let mut reset = false;
        for &(key, ref q) in deltas {
            if q.pools == 0 {
                continue;
            }
            reset |= q.reset;
            while queues.get(at).is_some_and(|(k, _)| *k < key) {
                at += 1;
            }
            if queues.get(at).is_none_or(|(k, _)| *k != key) {
                queues.insert(at, (key, QueueAcc::default()));
            }
            fold(&mut queues[at].1, q);
            at += 1;
        }
        self.reset |= reset;
        if let Some(prev) = prev_dev {
            let h = HarmDelta::between(prev, dev);
            self.reset |= h.reset;
            self.alloc_fail = self.alloc_fail.saturating_add(h.alloc_fail);
            self.drops = self.drops.saturating_add(h.drops);
            self.packets = self.packets.saturating_add(h.packets);
        }
    }
}

fn queues_as_map<S: Serializer>(q: &[(QueueKey, QueueAcc)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(q.iter().map(|(k, v)| (k, v)))
}

fn queues_from_map<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(QueueKey, QueueAcc)>, D::Error> {
    // A map gives each key once; the BTreeMap sorts them.
    Ok(BTreeMap::<QueueKey, QueueAcc>::deserialize(d)?
        .into_iter()
        .collect())
}

/// Whether a queue's counters over a span moved enough pages (returned,
/// or allocated fast) for its shares to mean something: at least
/// `min_pages`.
pub(crate) fn judged(s: &PoolStats, min_pages: u64) -> bool {
    pages_moved(s) >= min_pages
}

/// The pages a span's counters moved, as [`judged`] counts them: returned,
/// or allocated fast, whichever is more.
pub(crate) fn pages_moved(s: &PoolStats) -> u64 {
    returned(s).max(s.alloc_fast)
}

/// Pages returned to the pool: cached + ring + ring_full.
fn returned(s: &PoolStats) -> u64 {
    s.recycle_cached
        .saturating_add(s.recycle_ring)
        .saturating_add(s.recycle_ring_full)
}

/// The signals of one queue over a closed window.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueFacts {
    pub key: QueueKey,
    pub stats: PoolStats,
    pub provider: bool,
    /// Pages returned: cached + ring + ring_full.
    pub returned: u64,
    pub recycle_miss: Option<f64>,
    pub slow_refill: Option<f64>,
    pub recycling_pct: Option<f64>,
    /// released_refcnt as a share of returned + released pages.
    pub released_share: Option<f64>,
    /// NUMA waives per refill.
    pub waive_share: Option<f64>,
    pub inflight_peak: u64,
}

impl QueueFacts {
    /// Whether the queue moved enough pages for its shares to mean
    /// something ([`judged`]).
    pub(crate) fn judged(&self, min_pages: u64) -> bool {
        judged(&self.stats, min_pages)
    }

    pub(crate) fn from_acc(key: QueueKey, acc: &QueueAcc) -> Self {
        let s = acc.stats;
        let returned = returned(&s);
        // `signals::slow_refill_share` is the one definition; it picks
        // alloc_empty for provider pools itself.
        let slow_refill = signals::slow_refill_share(&s, acc.provider);
        Self {
            key,
            stats: s,
            provider: acc.provider,
            returned,
            recycle_miss: signals::recycle_miss_share(&s),
            slow_refill,
            recycling_pct: signals::recycling_pct(&s),
            released_share: ratio(
                s.recycle_released_refcnt,
                returned.saturating_add(s.recycle_released_refcnt),
            ),
            waive_share: ratio(s.alloc_waive, s.alloc_refill.saturating_add(s.alloc_waive)),
            inflight_peak: acc.inflight_peak,
        }
    }
}

/// Pages each RX queue's pools had out (posted, in the stack, parked in
/// the pools' rings and caches), on average over a span's samples, by
/// queue key in ascending order: how much the returns hold, the load a
/// ring step is judged under, queue by queue (`evaluate::outgrown`). Per
/// queue, because a device's sum dilutes one queue whose load grew by the
/// others' held pages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Load(pub Vec<(QueueKey, f64)>);

impl Load {
    /// The load of a closed finding window.
    #[must_use]
    pub fn of_window(w: &WindowAcc) -> Self {
        Self(
            w.queues
                .iter()
                .map(|(k, q)| (*k, mean_pages(q.inflight_sum, w.samples)))
                .collect(),
        )
    }

    /// The queue's pages, if it was seen.
    #[must_use]
    pub fn of(&self, key: QueueKey) -> Option<f64> {
        self.0
            .binary_search_by(|(k, _)| k.cmp(&key))
            .ok()
            .map(|i| self.0[i].1)
    }
}

/// Pages each queue's pools had out, summed over the samples folded in
/// ([`Self::add`]): a [`Load`] in the making, for spans that are not a
/// finding window (an evaluation, a pair of samples).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadAcc {
    samples: u32,
    queues: Vec<(QueueKey, u64)>,
}

impl LoadAcc {
    /// Folds in one sample of the device: each queue's pages in flight as
    /// the pass's queue deltas count them ([`queue_deltas`]: entries of one
    /// id summed, the unmapped bucket last), so a finding window and an
    /// evaluation read the same load.
    pub fn add(&mut self, dev: &Device) {
        self.samples = self.samples.saturating_add(1);
        queue_deltas(&PoolLedger::default(), dev, |key, q| {
            self.add_pages(key, q.inflight);
        });
    }

    fn add_pages(&mut self, key: QueueKey, n: u64) {
        match self.queues.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => self.queues[i].1 = self.queues[i].1.saturating_add(n),
            Err(i) => self.queues.insert(i, (key, n)),
        }
    }

    /// The mean per queue over the samples folded in.
    #[must_use]
    pub fn mean(&self) -> Load {
        Load(
            self.queues
                .iter()
                .map(|(k, n)| (*k, mean_pages(*n, self.samples)))
                .collect(),
        )
    }
}

/// Pages out per sample: `sum` over `samples` samples (0 for none).
fn mean_pages(sum: u64, samples: u32) -> f64 {
    if samples == 0 {
        return 0.0;
    }
    n64(sum) / f64::from(samples)
}

/// What one window of one device looked like.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    pub secs: f64,
    /// Pool counter deltas ([`crate::accounting::device_delta`]).
    pub pools: PoolStats,
    pub provider: bool,
    /// Harm events ([`harm_events`]: packets lost plus buffers that could
    /// not be allocated).
    pub harm: u64,
    /// Received packets, for normalising harm.
    pub packets: u64,
    /// A counter went backwards inside the window: no data.
    pub reset: bool,
    /// Pages each queue's pools had out at its samples, on average.
    #[serde(default)]
    pub load: Load,
}

impl Rates {
    /// The rates between two samples of the same device; `None` when the
    /// interval is empty.
    #[must_use]
    pub fn between(a: &Device, b: &Device, elapsed: Duration) -> Option<Self> {
        if elapsed.is_zero() {
            return None;
        }
        Self::over(a, b, &device_delta(&PoolLedger::of_device(a), b), elapsed)
    }

    /// [`Self::between`] with the device's pool deltas given (a pass's,
    /// [`crate::accounting::PassDeltas::device`]).
    #[must_use]
    pub fn over(a: &Device, b: &Device, pools: &QueueDelta, elapsed: Duration) -> Option<Self> {
        let secs = elapsed.as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        let h = HarmDelta::between(a, b);
        Some(Self {
            secs,
            pools: pools.stats,
            provider: pools.provider,
            harm: h.events(),
            packets: h.packets,
            reset: pools.reset || h.reset,
            load: {
                let mut l = LoadAcc::default();
                l.add(a);
                l.add(b);
                l.mean()
            },
        })
    }

    /// The rates of a closed finding window (every queue of the device):
    /// the baseline a change decided on that window is judged against.
    #[must_use]
    pub fn of_window(w: &WindowAcc) -> Self {
        let mut pools = PoolStats::default();
        let mut provider = false;
        for (_, q) in &w.queues {
            pools = pools.add(&q.stats);
            provider |= q.provider;
        }
        Self {
            secs: w.elapsed.as_secs_f64(),
            pools,
            provider,
            harm: harm_events(w.drops, w.alloc_fail),
            packets: w.packets,
            reset: w.reset,
            load: Load::of_window(w),
        }
    }

    #[must_use]
    pub fn recycle_miss(&self) -> Option<f64> {
        signals::recycle_miss_share(&self.pools)
    }

    #[must_use]
    pub fn slow_refill(&self) -> Option<f64> {
        signals::slow_refill_share(&self.pools, self.provider)
    }

    /// Received packets per second (qstats rx-packets, or the link's):
    /// the delivered rate a trial queue cut is judged on.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn delivered_rate(&self) -> f64 {
        self.packets as f64 / self.secs
    }

    /// Harm per received packet when packets were counted, else per second.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn harm_level(&self) -> f64 {
        ratio(self.harm, self.packets).unwrap_or(self.harm as f64 / self.secs)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn acc(fast: u64) -> QueueAcc {
        QueueAcc {
            stats: PoolStats {
                alloc_fast: fast,
                ..PoolStats::default()
            },
            ..QueueAcc::default()
        }
    }

    #[test]
    fn queues_are_written_as_the_map_they_were() {
        let w = WindowAcc {
            queues: vec![(QueueKey::Id(2), acc(5)), (QueueKey::Unmapped, acc(7))],
            samples: 3,
            ..WindowAcc::default()
        };
        let v = serde_json::to_value(&w).unwrap();
        let q = v["queues"].as_object().unwrap();
        assert_eq!(q.keys().collect::<Vec<_>>(), ["rx-2", "unmapped"]);
        assert_eq!(q["rx-2"]["stats"]["alloc_fast"], 5);
        // Read back in key order whatever order the file has.
        let mut text = serde_json::to_string(&w).unwrap();
        let nine = serde_json::to_string(&acc(1)).unwrap();
        text = text.replace(
            r#""queues":{"rx-2""#,
            &format!(r#""queues":{{"rx-9":{nine},"rx-2""#),
        );
        let back: WindowAcc = serde_json::from_str(&text).unwrap();
        let keys: Vec<_> = back.queues.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, [QueueKey::Id(2), QueueKey::Id(9), QueueKey::Unmapped]);
        assert!(serde_json::from_str::<WindowAcc>(&text.replace("rx-9", "rx-x")).is_err());
    }

    #[test]
    fn a_cleared_window_is_empty_and_keeps_its_storage() {
        let mut w = WindowAcc {
            queues: vec![(QueueKey::Id(0), acc(1)), (QueueKey::Id(1), acc(2))],
            reset: true,
            drops: 4,
            samples: 2,
            elapsed: Duration::from_secs(3),
            ..WindowAcc::default()
        };
        let cap = w.queues.capacity();
        w.clear();
        assert_eq!(w, WindowAcc::default());
        assert_eq!(w.queues.capacity(), cap);
    }
}
