//! Per-pool accounting, defined once: per-pool-id deltas, the carry of
//! retired pools, per-(device, RX queue) sums, and the device's harm
//! counters. The finding windows, the evaluation of a change and the
//! exported metrics all read counters through here.
//!
//! Rules (design.md "Signals"):
//! - a pool is known by its id; a rebuilt pool gets a new id;
//! - a pool present in both samples contributes `now - before`;
//! - a new pool contributes its counters since creation;
//! - a pool that vanished contributes nothing after its last sample (its
//!   counts up to then were already taken: that is the retired-pool carry);
//! - a counter that goes backwards is a **reset: no data**, never a rate and
//!   never zero — the caller learns `reset` and decides what no data means;
//! - pools of the same RX queue id are summed; pools with no RX queue go
//!   to the device's [`QueueKey::Unmapped`] bucket.

use crate::reuse::Reused as _;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::snapshot::{Device, LinkStats, Pool, PoolStats, QueueStats, RxQueue, Snapshot};

/// Where a pool's counters are summed within its device.
///
/// An integer key, not a string: the finding windows look a queue up on
/// every tick, and a name formatted per queue per tick would be a string
/// per queue per pass. It is written (state file, evidence, messages) as
/// `rx-<id>` or `unmapped`, and read back from that form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueKey {
    /// An RX queue id.
    Id(u32),
    /// Pools that map to no RX queue.
    Unmapped,
}

/// The written name of [`QueueKey::Unmapped`].
pub const UNMAPPED: &str = "unmapped";

impl QueueKey {
    /// The key of RX queue `id`, or the unmapped bucket.
    #[must_use]
    pub fn of(id: Option<u32>) -> Self {
        id.map_or(Self::Unmapped, Self::Id)
    }
}

impl std::fmt::Display for QueueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Id(i) => write!(f, "rx-{i}"),
            Self::Unmapped => f.write_str(UNMAPPED),
        }
    }
}

impl std::str::FromStr for QueueKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == UNMAPPED {
            return Ok(Self::Unmapped);
        }
        s.strip_prefix("rx-")
            .and_then(|n| n.parse().ok())
            .map(Self::Id)
            .ok_or_else(|| format!("queue key {s:?}: expected rx-<id> or {UNMAPPED}"))
    }
}

impl Serialize for QueueKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for QueueKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = QueueKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "a queue key (rx-<id> or {UNMAPPED})")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<QueueKey, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// One pool's counters over an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolDelta {
    /// Counted: a plain delta, or a new pool's counters since creation.
    Counted(PoolStats),
    /// A counter went backwards: no data.
    Reset,
    /// No stats now, or none to compare with (the stats dump raced).
    NoStats,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u64,
    stats: Option<PoolStats>,
    seen: u64,
}

/// The last counters seen per pool id.
///
/// Built from one device ([`Self::of_device`]) for a two-sample delta, or
/// kept across samples ([`Self::follow`]) by [`PassDeltas`], which every
/// pass's reader shares.
///
/// Kept as a vector sorted by pool id, not a hash map: a sample lists its
/// pools in (nearly) ascending id order, so building one is appending, and
/// the lookups of the next sample come in the same order: `cursor` (where
/// the last lookup ended) finds the next pool without a search. Only the
/// cost differs from a map; the answers are a map's.
#[derive(Debug, Default)]
pub struct PoolLedger {
    tick: u64,
    pools: Vec<Entry>,
    cursor: AtomicUsize,
}

impl Clone for PoolLedger {
    fn clone(&self) -> Self {
        Self {
            tick: self.tick,
            pools: self.pools.clone(),
            cursor: AtomicUsize::new(self.cursor.load(Ordering::Relaxed)),
        }
    }
}

impl PoolLedger {
    /// Moves on to sample `s`: its pools, each with its stats, or with the
    /// last stats seen when `s` lists it without (the stats dump raced);
    /// pools not in `s` retire (what they counted stays counted).
    pub fn follow(&mut self, s: &Snapshot) {
        for d in &s.devices {
            for q in &d.rx_queues {
                for p in &q.pools {
                    self.record(p);
                }
            }
            for p in &d.unmapped_pools {
                self.record(p);
            }
        }
        for p in &s.orphan_pools {
            self.record(p);
        }
        self.retire_unseen();
    }

    /// The pools of one device.
    #[must_use]
    pub fn of_device(d: &Device) -> Self {
        let mut l = Self::with_capacity(d.pools().count());
        for p in d.pools() {
            l.record(p);
        }
        l
    }

    fn with_capacity(n: usize) -> Self {
        Self {
            pools: Vec::with_capacity(n),
            ..Self::default()
        }
    }

    /// Where `id` is (`Ok`) or would go (`Err`), trying the slot after the
    /// last lookup first.
    fn find(&self, id: u64) -> Result<usize, usize> {
        let at = self.cursor.load(Ordering::Relaxed);
        let found = match self.pools.get(at) {
            Some(e) if e.id == id => Ok(at),
            _ => self.pools.binary_search_by_key(&id, |e| e.id),
        };
        if let Ok(i) = found {
            self.cursor.store(i + 1, Ordering::Relaxed);
        }
        found
    }

    /// `pool`'s counters since this ledger last saw it.
    #[must_use]
    pub fn delta(&self, pool: &Pool) -> PoolDelta {
        let Some(now) = pool.stats else {
            return PoolDelta::NoStats;
        };
        match self.find(pool.id).ok().and_then(|i| self.pools.get(i)) {
            None => PoolDelta::Counted(now),
            Some(Entry { stats: None, .. }) => PoolDelta::NoStats,
            Some(Entry {
                stats: Some(before),
                ..
            }) => now
                .delta(before)
                .map_or(PoolDelta::Reset, PoolDelta::Counted),
        }
    }

    /// Remembers `pool`'s sample (a pool seen without stats keeps its last).
    pub fn record(&mut self, pool: &Pool) {
        let tick = self.tick;
        // Appending is the common case: a sample lists pools by rising id.
        let at = match self.pools.last() {
            Some(e) if e.id < pool.id => Err(self.pools.len()),
            None => Err(0),
            _ => self.find(pool.id),
        };
        let i = match at {
            Ok(i) => i,
            Err(i) => {
                self.pools.insert(
                    i,
                    Entry {
                        id: pool.id,
                        stats: None,
                        seen: tick,
                    },
                );
                i
            }
        };
        if let Some(e) = self.pools.get_mut(i) {
            e.seen = tick;
            if pool.stats.is_some() {
                e.stats = pool.stats;
            }
        }
    }

    /// Ends one sample: pools not recorded since the last call retire (what
    /// they counted stays counted; nothing more is expected of them).
    pub fn retire_unseen(&mut self) {
        let tick = self.tick;
        self.pools.retain(|e| e.seen == tick);
        self.tick = tick.wrapping_add(1);
        *self.cursor.get_mut() = 0;
    }
}

/// One (device, queue) over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDelta {
    /// Sum of the counted pools' deltas.
    pub stats: PoolStats,
    /// Any pool (or the queue itself) has a memory provider.
    pub provider: bool,
    /// Pools serving the queue now.
    pub pools: usize,
    /// Pages and bytes in flight now (sum over the pools).
    pub inflight: u64,
    pub inflight_mem: u64,
    /// At least one pool was counted.
    pub counted: bool,
    /// A pool's counter went backwards: this interval is no data.
    pub reset: bool,
}

/// Every RX queue of `dev` (with or without pools) and, if any pool maps to
/// no queue, the unmapped bucket: the deltas against `ledger`, pools of the
/// same queue id summed, in queue order, the unmapped bucket last.
pub fn queue_deltas(ledger: &PoolLedger, dev: &Device, mut f: impl FnMut(QueueKey, &QueueDelta)) {
    let rxqs = &dev.rx_queues;
    if rxqs.is_sorted_by(|a, b| a.id < b.id) {
        // What the kernel's queue dump and the join give: ascending, each
        // id once. Nothing to group, nothing to allocate.
        for rxq in rxqs {
            f(
                QueueKey::Id(rxq.id),
                &rx_delta(ledger, std::slice::from_ref(rxq).iter()),
            );
        }
    } else {
        let mut order: Vec<(u32, usize)> =
            rxqs.iter().enumerate().map(|(at, q)| (q.id, at)).collect();
        order.sort_unstable();
        let mut rest = order.as_slice();
        while let Some(&(id, _)) = rest.first() {
            let n = rest.iter().take_while(|(k, _)| *k == id).count();
            let (same, next) = rest.split_at(n);
            rest = next;
            let q = rx_delta(ledger, same.iter().filter_map(|(_, at)| rxqs.get(*at)));
            f(QueueKey::Id(id), &q);
        }
    }
    if !dev.unmapped_pools.is_empty() {
        let mut q = QueueDelta::default();
        for p in &dev.unmapped_pools {
            add_pool(&mut q, ledger, p, false);
        }
        f(QueueKey::Unmapped, &q);
    }
}

/// The delta of the RX queue entries that share one id.
fn rx_delta<'a>(ledger: &PoolLedger, same: impl Iterator<Item = &'a RxQueue>) -> QueueDelta {
    let mut q = QueueDelta::default();
    for rxq in same {
        for p in &rxq.pools {
            add_pool(&mut q, ledger, p, rxq.has_provider());
        }
    }
    q
}

fn add_pool(q: &mut QueueDelta, ledger: &PoolLedger, p: &Pool, queue_provider: bool) {
    q.pools += 1;
    q.provider |= queue_provider || p.provider.is_some();
    q.inflight = q.inflight.saturating_add(p.inflight.unwrap_or(0));
    q.inflight_mem = q.inflight_mem.saturating_add(p.inflight_mem.unwrap_or(0));
    match ledger.delta(p) {
        PoolDelta::Counted(d) => {
            q.stats = q.stats.add(&d);
            q.counted = true;
        }
        PoolDelta::Reset => q.reset = true,
        PoolDelta::NoStats => {}
    }
}

/// The device's pool counters over an interval: every queue summed.
#[must_use]
pub fn device_delta(ledger: &PoolLedger, dev: &Device) -> QueueDelta {
    let mut sum = QueueDelta::default();
    queue_deltas(ledger, dev, |_, q| sum.add_queue(q));
    sum
}

impl QueueDelta {
    /// Adds one queue's delta into a device's sum.
    fn add_queue(&mut self, q: &Self) {
        self.stats = self.stats.add(&q.stats);
        self.provider |= q.provider;
        self.pools += q.pools;
        self.inflight = self.inflight.saturating_add(q.inflight);
        self.inflight_mem = self.inflight_mem.saturating_add(q.inflight_mem);
        self.counted |= q.counted;
        self.reset |= q.reset;
    }
}

/// One pass's pool deltas: every (device, queue) of the current sample
/// against the previous one, computed once and read by all who need them
/// (the engine's finding windows, the exported per-queue series, replay's
/// series). Kept from pass to pass, it also remembers a pool's last stats
/// across a sample that listed it without (a raced stats dump), so no
/// count is lost; [`Self::of`] knows only the previous sample.
#[derive(Debug, Default)]
pub struct PassDeltas {
    ledger: PoolLedger,
    /// Per device of the current sample, by position: its run of `queues`.
    devices: Vec<std::ops::Range<usize>>,
    queues: Vec<(QueueKey, QueueDelta)>,
}

/// The deltas of no pass, for an [`crate::Observation`] that only the gates
/// read (they judge no counters).
pub(crate) static NO_DELTAS: PassDeltas = PassDeltas {
    ledger: PoolLedger {
        tick: 0,
        pools: Vec::new(),
        cursor: AtomicUsize::new(0),
    },
    devices: Vec::new(),
    queues: Vec::new(),
};

impl PassDeltas {
    /// The deltas of `current` against `previous` (`None`: the first
    /// sample, each pool counted since its creation).
    #[must_use]
    pub fn of(previous: Option<&Snapshot>, current: &Snapshot) -> Self {
        let mut d = Self::default();
        d.compute(previous, current);
        d
    }

    /// Becomes [`Self::of`]`(previous, current)`, in the storage it has.
    pub fn compute(&mut self, previous: Option<&Snapshot>, current: &Snapshot) {
        let Self {
            ledger,
            devices,
            queues,
        } = self;
        match previous {
            Some(p) => ledger.follow(p),
            None => *ledger = PoolLedger::default(),
        }
        devices.clear();
        queues.clear();
        for dev in &current.devices {
            let start = queues.len();
            queue_deltas(ledger, dev, |key, q| queues.push((key, *q)));
            devices.push(start..queues.len());
        }
        devices.let_go();
        queues.let_go();
    }

    /// The queues of the current sample's device at `position` (in
    /// [`queue_deltas`]' order: ascending ids, the unmapped bucket last);
    /// none past the end.
    #[must_use]
    pub fn queues(&self, position: usize) -> &[(QueueKey, QueueDelta)] {
        self.devices
            .get(position)
            .and_then(|r| self.queues.get(r.clone()))
            .unwrap_or_default()
    }

    /// [`Self::queues`], to write: a caller that stands another reading
    /// of one device in for a moment (the daemon's shadow policy, its
    /// modelled devices) swaps their deltas in and back out.
    pub fn queues_mut(&mut self, position: usize) -> &mut [(QueueKey, QueueDelta)] {
        match self.devices.get(position) {
            Some(r) => self.queues.get_mut(r.clone()).unwrap_or_default(),
            None => &mut [],
        }
    }

    /// The device at `position`, its queues summed ([`device_delta`]).
    #[must_use]
    pub fn device(&self, position: usize) -> QueueDelta {
        let mut sum = QueueDelta::default();
        for (_, q) in self.queues(position) {
            sum.add_queue(q);
        }
        sum
    }
}

/// The device's harm counters over an interval. Harm is read from qstats
/// drop counters (queue-level when the driver has them, else device scope)
/// or, without those, from the link's receive-loss counters; received
/// packets come from the same source. `rx-alloc-fail` is kept apart (it is
/// memory pressure as well as harm: the evaluation adds it, the windows
/// hold growth on it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarmDelta {
    /// Packets lost: qstats hw drops + overruns, or link dropped + missed + fifo.
    pub drops: u64,
    /// qstats `rx-alloc-fail`.
    pub alloc_fail: u64,
    /// Received packets, to normalise harm.
    pub packets: u64,
    /// The device has a drop counter to read harm from.
    pub known: bool,
    /// A harm counter went backwards: no data.
    pub reset: bool,
}

/// The one harm count: packets lost plus buffers that could not be
/// allocated. A change is judged on it ([`crate::window::Rates::harm`]),
/// over an interval ([`HarmDelta::events`]) or a finding window.
#[must_use]
pub fn harm_events(drops: u64, alloc_fail: u64) -> u64 {
    drops.saturating_add(alloc_fail)
}

impl HarmDelta {
    /// [`harm_events`] over this interval.
    #[must_use]
    pub fn events(&self) -> u64 {
        harm_events(self.drops, self.alloc_fail)
    }

    /// Harm between two samples of one device.
    #[must_use]
    pub fn between(prev: &Device, dev: &Device) -> Self {
        let mut h = Self::default();
        let (now_q, prev_q) = match (queue_stats_sum(dev), queue_stats_sum(prev)) {
            (Some(a), Some(b)) => (Some(a), Some(b)),
            _ => (dev.qstats, prev.qstats),
        };
        if let (Some(a), Some(b)) = (now_q, prev_q) {
            match qstats_delta(&a, &b) {
                Some((fail, drops, packets, has_drops)) => {
                    h.alloc_fail = fail;
                    if has_drops {
                        h.known = true;
                        h.drops = drops;
                        h.packets = packets;
                    }
                }
                None => h.reset = true,
            }
        }
        if !h.known
            && let (Some(a), Some(b)) = (dev.link_stats, prev.link_stats)
        {
            match link_delta(&a, &b) {
                Some((drops, packets)) => {
                    h.known = true;
                    h.drops = drops;
                    h.packets = packets;
                }
                None => h.reset = true,
            }
        }
        h
    }

    /// Field-wise sum (a window of several intervals).
    #[must_use]
    pub fn add(&self, o: &Self) -> Self {
        Self {
            drops: self.drops.saturating_add(o.drops),
            alloc_fail: self.alloc_fail.saturating_add(o.alloc_fail),
            packets: self.packets.saturating_add(o.packets),
            known: self.known || o.known,
            reset: self.reset || o.reset,
        }
    }
}

/// Sum of queue-level qstats, `None` when no queue reports any.
fn queue_stats_sum(dev: &Device) -> Option<QueueStats> {
    let mut it = dev
        .rx_queues
        .iter()
        .filter_map(|q| q.qstats.as_ref())
        .peekable();
    it.peek()?;
    // Per field: the saturating sum of the queues that report it, `None`
    // when none does; added in place, not through a `QueueStats` built
    // per queue.
    let add = |t: &mut Option<u64>, v: Option<u64>| {
        if let Some(v) = v {
            *t = Some(t.unwrap_or(0).saturating_add(v));
        }
    };
    let mut t = QueueStats::default();
    for s in it {
        add(&mut t.rx_packets, s.rx_packets);
        add(&mut t.rx_bytes, s.rx_bytes);
        add(&mut t.rx_alloc_fail, s.rx_alloc_fail);
        add(&mut t.rx_hw_drops, s.rx_hw_drops);
        add(&mut t.rx_hw_drop_overruns, s.rx_hw_drop_overruns);
    }
    Some(t)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::RxQueue;

    /// The state file's window keys keep their written form (`rx-<id>`,
    /// `unmapped`), so [`crate::state::ENGINE_STATE_VERSION`] 1 files
    /// written before the key became an integer still load; anything else
    /// is refused with the key named.
    #[test]
    fn queue_key_keeps_its_written_form() {
        use std::collections::BTreeMap;
        let m: BTreeMap<QueueKey, u8> = [(QueueKey::Id(12), 1), (QueueKey::Unmapped, 2)].into();
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(text, r#"{"rx-12":1,"unmapped":2}"#);
        let back: BTreeMap<QueueKey, u8> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        for bad in [r#"{"rx-x":1}"#, r#"{"tx-1":1}"#, r#"{"rx-":1}"#] {
            let e = serde_json::from_str::<BTreeMap<QueueKey, u8>>(bad).unwrap_err();
            assert!(
                e.to_string().contains("expected rx-<id> or unmapped"),
                "{e}"
            );
        }
    }

    fn pool(id: u64, fast: Option<u64>) -> Pool {
        Pool {
            id,
            inflight: Some(1),
            stats: fast.map(|f| PoolStats {
                alloc_fast: f,
                ..PoolStats::default()
            }),
            ..Pool::default()
        }
    }

    fn dev(queues: Vec<(u32, Vec<Pool>)>) -> Device {
        Device {
            rx_queues: queues
                .into_iter()
                .map(|(id, pools)| RxQueue {
                    id,
                    pools,
                    ..RxQueue::default()
                })
                .collect(),
            ..Device::default()
        }
    }

    fn sums(l: &PoolLedger, d: &Device) -> Vec<(QueueKey, u64, bool)> {
        let mut v = Vec::new();
        queue_deltas(l, d, |k, q| v.push((k, q.stats.alloc_fast, q.reset)));
        v
    }

    /// A pool listed once without stats (a raced stats dump): the kept
    /// pass counts its interval at the next pass; a pass built from the
    /// previous sample alone has nothing to compare with and counts none.
    #[test]
    fn a_kept_pass_counts_across_a_raced_stats_dump() {
        let snap = |fast: Option<u64>| Snapshot {
            devices: vec![dev(vec![(0, vec![pool(1, fast)])])],
            ..Snapshot::default()
        };
        let (s1, s2, s3) = (snap(Some(100)), snap(None), snap(Some(250)));
        let mut kept = PassDeltas::of(None, &s1);
        kept.compute(Some(&s1), &s2);
        assert!(!kept.device(0).counted, "no stats, no count");
        kept.compute(Some(&s2), &s3);
        assert_eq!(kept.device(0).stats.alloc_fast, 150);
        assert!(kept.device(0).counted);
        let fresh = PassDeltas::of(Some(&s2), &s3);
        assert!(!fresh.device(0).counted);
        assert_eq!(fresh.device(0).stats.alloc_fast, 0);
    }

    #[test]
    fn deltas_new_pools_resets_and_duplicate_queue_ids() {
        let a = dev(vec![
            (0, vec![pool(1, Some(100))]),
            (1, vec![pool(2, Some(50))]),
        ]);
        let l = PoolLedger::of_device(&a);
        // Pool 1 moved on; pool 2 was rebuilt as 3 (counts since creation);
        // a second entry for queue 0 adds pool 4.
        let b = dev(vec![
            (1, vec![pool(3, Some(7))]),
            (0, vec![pool(1, Some(130))]),
            (0, vec![pool(4, Some(5))]),
        ]);
        assert_eq!(
            sums(&l, &b),
            vec![(QueueKey::Id(0), 35, false), (QueueKey::Id(1), 7, false)]
        );
        // The sorted form (the kernel's order, no grouping pass) sums the
        // same as the same queues out of order.
        let sorted = dev(vec![
            (0, vec![pool(1, Some(130)), pool(4, Some(5))]),
            (1, vec![pool(3, Some(7))]),
        ]);
        let mut reversed = sorted.clone();
        reversed.rx_queues.reverse();
        assert_eq!(sums(&l, &sorted), sums(&l, &b));
        assert_eq!(sums(&l, &reversed), sums(&l, &b));
        // A counter that went backwards: the queue is no data.
        let c = dev(vec![(0, vec![pool(1, Some(10))])]);
        assert_eq!(sums(&l, &c), vec![(QueueKey::Id(0), 0, true)]);
        // Stats that vanish keep the last ones in a running ledger.
        let mut run = PoolLedger::of_device(&a);
        run.retire_unseen();
        run.record(&pool(1, None));
        run.retire_unseen();
        assert_eq!(
            run.delta(&pool(1, Some(110))),
            PoolDelta::Counted(PoolStats {
                alloc_fast: 10,
                ..PoolStats::default()
            })
        );
        // Pool 2 retired: met again, it would count from zero.
        assert_eq!(
            run.delta(&pool(2, Some(60))),
            PoolDelta::Counted(PoolStats {
                alloc_fast: 60,
                ..PoolStats::default()
            })
        );
    }

    /// A seeded xorshift: `rnd(n)` in `0..n`, the same sequence every run.
    fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    /// The sorted ledger answers exactly as the plain map it replaced, for
    /// samples in any order, with duplicates, stats that come and go, and
    /// pools that retire.
    #[test]
    fn the_ledger_answers_as_a_map_does() {
        use std::collections::HashMap;
        #[derive(Default)]
        struct Map {
            tick: u64,
            pools: HashMap<u64, (Option<PoolStats>, u64)>,
        }
        impl Map {
            fn record(&mut self, p: &Pool) {
                let e = self.pools.entry(p.id).or_insert((None, self.tick));
                e.1 = self.tick;
                if p.stats.is_some() {
                    e.0 = p.stats;
                }
            }
            fn retire_unseen(&mut self) {
                let t = self.tick;
                self.pools.retain(|_, e| e.1 == t);
                self.tick += 1;
            }
            fn delta(&self, p: &Pool) -> PoolDelta {
                let Some(now) = p.stats else {
                    return PoolDelta::NoStats;
                };
                match self.pools.get(&p.id) {
                    None => PoolDelta::Counted(now),
                    Some((None, _)) => PoolDelta::NoStats,
                    Some((Some(b), _)) => now.delta(b).map_or(PoolDelta::Reset, PoolDelta::Counted),
                }
            }
        }
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
        let mut running = PoolLedger::default();
        let mut reference = Map::default();
        let mut last: Vec<Pool> = Vec::new();
        for _ in 0..300 {
            let n = rnd(40);
            let mut sample: Vec<Pool> = (0..n)
                .map(|_| pool(rnd(60), (rnd(5) > 0).then(|| rnd(1000))))
                .collect();
            if rnd(2) == 0 {
                sample.sort_by_key(|p| p.id);
            }
            let one = PoolLedger::of_device(&dev(vec![(0, last.clone())]));
            let mut one_ref = Map::default();
            for p in &last {
                one_ref.record(p);
            }
            for p in &sample {
                assert_eq!(one.delta(p), one_ref.delta(p));
                assert_eq!(running.delta(p), reference.delta(p));
            }
            for p in &sample {
                running.record(p);
                reference.record(p);
            }
            running.retire_unseen();
            reference.retire_unseen();
            last = sample;
        }
    }

    /// The queues' qstats sum, per field: the saturating sum of the
    /// queues that report it, `None` when none does or no queue has qstats
    /// (a plain `Option` fold as the reference).
    #[test]
    fn queue_stats_sum_adds_what_the_queues_report() {
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..300 {
            let v = |r: &mut dyn FnMut(u64) -> u64| match r(4) {
                0 => None,
                1 => Some(u64::MAX - r(3)),
                _ => Some(r(1000)),
            };
            let queues: Vec<RxQueue> = (0..rnd(5))
                .map(|id| RxQueue {
                    id: u32::try_from(id).unwrap(),
                    qstats: (rnd(4) > 0).then(|| QueueStats {
                        rx_packets: v(&mut rnd),
                        rx_bytes: v(&mut rnd),
                        rx_alloc_fail: v(&mut rnd),
                        rx_hw_drops: v(&mut rnd),
                        rx_hw_drop_overruns: v(&mut rnd),
                    }),
                    ..RxQueue::default()
                })
                .collect();
            let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
            };
            let reported: Vec<QueueStats> = queues.iter().filter_map(|q| q.qstats).collect();
            let want = (!reported.is_empty()).then(|| {
                reported
                    .iter()
                    .fold(QueueStats::default(), |a, q| QueueStats {
                        rx_packets: add(a.rx_packets, q.rx_packets),
                        rx_bytes: add(a.rx_bytes, q.rx_bytes),
                        rx_alloc_fail: add(a.rx_alloc_fail, q.rx_alloc_fail),
                        rx_hw_drops: add(a.rx_hw_drops, q.rx_hw_drops),
                        rx_hw_drop_overruns: add(a.rx_hw_drop_overruns, q.rx_hw_drop_overruns),
                    })
            });
            let d = Device {
                rx_queues: queues,
                ..Device::default()
            };
            assert_eq!(queue_stats_sum(&d), want);
        }
    }

    #[test]
    fn harm_reset_is_no_data() {
        let q = |drops: u64, packets: u64| QueueStats {
            rx_hw_drops: Some(drops),
            rx_packets: Some(packets),
            rx_alloc_fail: Some(0),
            ..QueueStats::default()
        };
        let a = Device {
            qstats: Some(q(10, 1000)),
            ..Device::default()
        };
        let b = Device {
            qstats: Some(q(15, 2000)),
            ..Device::default()
        };
        let h = HarmDelta::between(&a, &b);
        assert_eq!(
            (h.drops, h.packets, h.known, h.reset),
            (5, 1000, true, false)
        );
        let back = HarmDelta::between(&b, &a);
        assert!(back.reset, "a counter that went back is no data: {back:?}");
    }
}
