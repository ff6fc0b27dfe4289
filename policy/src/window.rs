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

use serde::{Deserialize, Serialize};

use crate::accounting::{HarmDelta, PoolLedger, QueueDelta, QueueKey, queue_deltas};
use crate::signals::{self, ratio};
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
}

/// The open window of one device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowAcc {
    pub elapsed: Duration,
    /// A counter went backwards: the window is no data.
    pub reset: bool,
    /// Per RX queue and the [`QueueKey::Unmapped`] bucket (written `rx-<id>` and
    /// `unmapped` in the state file, as before the key was an integer).
    pub queues: BTreeMap<QueueKey, QueueAcc>,
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
    /// Fold one sample interval of `dev` into the window (`prev_pools`:
    /// the previous sample's pools, [`crate::accounting`]).
    pub(crate) fn add_tick(
        &mut self,
        prev_pools: &PoolLedger,
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
        };
        // `queue_deltas` gives each key once, in ascending order: the open
        // window's queues are walked alongside instead of looked up one by
        // one; a queue the window has not seen yet is added after the walk.
        let mut open = self.queues.iter_mut().peekable();
        let mut new = Vec::new();
        let mut reset = false;
        queue_deltas(prev_pools, dev, |key, q| {
            if q.pools == 0 {
                return;
            }
            reset |= q.reset;
            while open.next_if(|(k, _)| **k < key).is_some() {}
            match open.next_if(|(k, _)| **k == key) {
                Some((_, acc)) => fold(acc, q),
                None => new.push((key, *q)),
            }
        });
        for (key, q) in &new {
            fold(self.queues.entry(*key).or_default(), q);
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
    pub(crate) fn from_acc(key: QueueKey, acc: &QueueAcc) -> Self {
        let s = acc.stats;
        let returned = s
            .recycle_cached
            .saturating_add(s.recycle_ring)
            .saturating_add(s.recycle_ring_full);
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
