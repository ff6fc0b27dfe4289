//! Counter deltas per pool id, accumulated per (device, RX queue) over one
//! finding window.
//!
//! Rules (design.md "Signals"): a pool that vanished between samples
//! contributes nothing after its last sample; a new pool contributes its
//! counters since creation; a counter that goes backwards is "no data" for
//! the whole window (never a rate). Pools without an RX queue go to a
//! device-level bucket.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::signals;
use crate::snapshot::{Device, LinkStats, Pool, PoolStats, QueueStats, Snapshot};

/// Key of the device-level bucket (pools with no RX queue).
pub const UNMAPPED: &str = "unmapped";

/// Counters summed over one queue's pools during the open window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueAcc {
    /// Sum of per-pool deltas.
    pub stats: PoolStats,
    /// Refills that reached the allocator or provider, in refills: `alloc_slow`
    /// for ordinary pools, `alloc_empty` for memory-provider pools
    /// (they never count `alloc_slow`).
    pub slow: u64,
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
    /// Per RX queue (`rx-<id>`) and the [`UNMAPPED`] bucket.
    pub queues: BTreeMap<String, QueueAcc>,
    /// qstats `rx-alloc-fail` (queue-level when present, else device-level).
    pub alloc_fail: u64,
    /// Harm: hardware drops (qstats) or link drop counters.
    pub drops: u64,
    /// Received packets, to normalise harm.
    pub packets: u64,
    /// Samples folded into this window.
    pub samples: u32,
}

/// Queue key used in evidence and state.
#[must_use]
pub fn queue_key(id: Option<u32>) -> String {
    id.map_or_else(|| UNMAPPED.to_owned(), |i| format!("rx-{i}"))
}

/// Index the previous snapshot's pools by id (all devices and orphans).
pub(crate) fn pool_index(prev: &Snapshot) -> HashMap<u64, &Pool> {
    prev.devices
        .iter()
        .flat_map(Device::pools)
        .chain(prev.orphan_pools.iter())
        .map(|p| (p.id, p))
        .collect()
}

impl WindowAcc {
    /// Fold one sample interval of `dev` into the window.
    pub(crate) fn add_tick(
        &mut self,
        prev_pools: &HashMap<u64, &Pool>,
        prev_dev: Option<&Device>,
        dev: &Device,
        elapsed: Duration,
    ) {
        self.elapsed = self.elapsed.saturating_add(elapsed);
        self.samples = self.samples.saturating_add(1);
        let queues = dev
            .rx_queues
            .iter()
            .map(|q| (Some(q.id), q.provider.is_some(), q.pools.as_slice()))
            .chain(std::iter::once((
                None,
                false,
                dev.unmapped_pools.as_slice(),
            )));
        for (qid, queue_provider, pools) in queues {
            if pools.is_empty() {
                continue;
            }
            let acc = self.queues.entry(queue_key(qid)).or_default();
            let mut inflight = 0u64;
            for pool in pools {
                inflight = inflight.saturating_add(pool.inflight.unwrap_or(0));
                let provider = queue_provider || pool.provider.is_some();
                acc.provider |= provider;
                let Some(now) = pool.stats else { continue };
                let delta = match prev_pools.get(&pool.id) {
                    // Same pool id: a plain delta, or no data if it went back.
                    Some(old) => match old.stats {
                        Some(before) => now.delta(&before),
                        // Stats appeared (dump raced): nothing to compare.
                        None => continue,
                    },
                    // A new pool contributes its counters since creation.
                    None => Some(now),
                };
                match delta {
                    Some(d) => {
                        acc.stats = acc.stats.add(&d);
                        let slow = if provider {
                            d.alloc_empty
                        } else {
                            d.alloc_slow
                        };
                        acc.slow = acc.slow.saturating_add(slow);
                    }
                    None => self.reset = true,
                }
            }
            acc.inflight_peak = acc.inflight_peak.max(inflight);
        }
        self.add_harm(prev_dev, dev);
    }

    fn add_harm(&mut self, prev_dev: Option<&Device>, dev: &Device) {
        let Some(prev) = prev_dev else { return };
        // Queue-level qstats when the driver has them, else device scope.
        let q_now = queue_stats_sum(dev);
        let q_prev = queue_stats_sum(prev);
        let (now_q, prev_q) = match (q_now, q_prev) {
            (Some(a), Some(b)) => (Some(a), Some(b)),
            _ => (dev.qstats, prev.qstats),
        };
        let mut harm_from_qstats = false;
        if let (Some(a), Some(b)) = (now_q, prev_q) {
            match qstats_delta(&a, &b) {
                Some((fail, drops, packets, has_drops)) => {
                    self.alloc_fail = self.alloc_fail.saturating_add(fail);
                    if has_drops {
                        harm_from_qstats = true;
                        self.drops = self.drops.saturating_add(drops);
                        self.packets = self.packets.saturating_add(packets);
                    }
                }
                None => self.reset = true,
            }
        }
        if !harm_from_qstats && let (Some(a), Some(b)) = (dev.link_stats, prev.link_stats) {
            match link_delta(&a, &b) {
                Some((drops, packets)) => {
                    self.drops = self.drops.saturating_add(drops);
                    self.packets = self.packets.saturating_add(packets);
                }
                None => self.reset = true,
            }
        }
    }
}

/// Sum of queue-level qstats, `None` when no queue reports any.
fn queue_stats_sum(dev: &Device) -> Option<QueueStats> {
    let mut it = dev.rx_queues.iter().filter_map(|q| q.qstats).peekable();
    it.peek()?;
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
    };
    Some(it.fold(QueueStats::default(), |acc, q| QueueStats {
        rx_packets: add(acc.rx_packets, q.rx_packets),
        rx_bytes: add(acc.rx_bytes, q.rx_bytes),
        rx_alloc_fail: add(acc.rx_alloc_fail, q.rx_alloc_fail),
        rx_hw_drops: add(acc.rx_hw_drops, q.rx_hw_drops),
        rx_hw_drop_overruns: add(acc.rx_hw_drop_overruns, q.rx_hw_drop_overruns),
    }))
}

/// (alloc_fail, drops, packets, drops-known) deltas; `None` on a reset.
fn qstats_delta(a: &QueueStats, b: &QueueStats) -> Option<(u64, u64, u64, bool)> {
    let d = |x: Option<u64>, y: Option<u64>| -> Option<u64> {
        match (x, y) {
            (Some(x), Some(y)) => x.checked_sub(y),
            _ => Some(0),
        }
    };
    let fail = d(a.rx_alloc_fail, b.rx_alloc_fail)?;
    let drops = d(a.rx_hw_drops, b.rx_hw_drops)?
        .saturating_add(d(a.rx_hw_drop_overruns, b.rx_hw_drop_overruns)?);
    let packets = d(a.rx_packets, b.rx_packets)?;
    let has = a.rx_hw_drops.is_some() || a.rx_hw_drop_overruns.is_some();
    Some((fail, drops, packets, has))
}

fn link_delta(a: &LinkStats, b: &LinkStats) -> Option<(u64, u64)> {
    let drops = a
        .rx_missed_errors
        .checked_sub(b.rx_missed_errors)?
        .saturating_add(a.rx_fifo_errors.checked_sub(b.rx_fifo_errors)?)
        .saturating_add(a.rx_dropped.checked_sub(b.rx_dropped)?);
    Some((drops, a.rx_packets.checked_sub(b.rx_packets)?))
}

/// The signals of one queue over a closed window.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueFacts {
    pub key: String,
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
    pub(crate) fn from_acc(key: &str, acc: &QueueAcc) -> Self {
        let s = acc.stats;
        let returned = s
            .recycle_cached
            .saturating_add(s.recycle_ring)
            .saturating_add(s.recycle_ring_full);
        // `signals::slow_refill_share` is the one definition; it picks
        // alloc_empty for provider pools itself.
        let slow_refill = signals::slow_refill_share(&s, acc.provider);
        Self {
            key: key.to_owned(),
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

#[allow(clippy::cast_precision_loss)]
pub(crate) fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}
