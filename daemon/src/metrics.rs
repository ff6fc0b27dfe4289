//! Every metric pptune exports, declared here and only here.
//!
//! Conventions: names `pptune_*`; counters are registered without `_total`
//! because prometheus-client appends it; units are passed as units (the
//! encoder appends them to the name and writes `# UNIT`); the label `device`
//! joins node_exporter's series; no label is keyed by pool id (ids change on
//! every rebuild). Pool counters are exported per (device, RX queue) and
//! carry the last values of retired pools, so they stay monotonic across the
//! pool rebuilds that every ring change causes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use policy::signals;
use policy::snapshot::{Device, Pool, PoolStats, Snapshot};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

type FGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DevLabels {
    pub device: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct QueueLabels {
    pub device: String,
    /// RX queue id, or `unmapped` for pools that map to no queue.
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RingLabels {
    pub device: String,
    /// `rx`, `rx_mini`, `rx_jumbo`, `tx`.
    pub ring: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChannelLabels {
    pub device: String,
    /// `rx`, `tx`, `other`, `combined`.
    pub channel: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub device: String,
    /// `hold`, `set_ring`, `set_channels`.
    pub action: String,
    pub reason: String,
    /// `observe` or `enforce` (after rollout).
    pub mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    pub device: String,
    /// `ring.rx`, `channels.combined` …
    pub knob: String,
    /// `grow`, `shrink`, `revert`, `restore`.
    pub direction: String,
    /// `applied`, `refused`, `failed`, `effective`, `ineffective`,
    /// `reverted`, `skipped_backoff`, `skipped_cooldown`, `skipped_budget`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecLabels {
    pub device: String,
    /// The stable recommendation id (hash of device identity, knob, reason).
    pub recommendation: String,
    pub knob: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KnobLabels {
    pub device: String,
    pub knob: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabels {
    pub device: String,
    pub mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CapLabels {
    pub capability: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
}

/// Error kinds counted in `pptune_errors_total` (every kind is exported from
/// the start, at 0, so an alert can use `increase()` from the first scrape).
pub const ERROR_KINDS: &[&str] = &[
    "sample",
    "sample_device",
    "set",
    "verify",
    "state_write",
    "policy_reload",
    "control",
];

/// The pool counters: (field name, metric name, unit, help).
const POOL_COUNTERS: &[(&str, &str, Option<&str>, &str)] = &[
    (
        "alloc_fast",
        "pptune_pool_alloc_fast",
        Some("pages"),
        "Pages allocated from the pool's cache (fast path)",
    ),
    (
        "alloc_slow",
        "pptune_pool_alloc_slow",
        Some("refills"),
        "Slow-path refills from the page allocator (up to 64 pages each)",
    ),
    (
        "alloc_slow_high_order",
        "pptune_pool_alloc_slow_high_order",
        Some("refills"),
        "Slow-path high-order allocations",
    ),
    (
        "alloc_empty",
        "pptune_pool_alloc_empty",
        None,
        "Times the pool ring was empty on refill (memory-provider pools count their slow path here)",
    ),
    (
        "alloc_refill",
        "pptune_pool_alloc_refill",
        Some("refills"),
        "Cache refills from the pool ring",
    ),
    (
        "alloc_waive",
        "pptune_pool_alloc_waive",
        Some("pages"),
        "Pages waived because they were on the wrong NUMA node",
    ),
    (
        "recycle_cached",
        "pptune_pool_recycle_cached",
        Some("pages"),
        "Pages recycled into the per-CPU cache",
    ),
    (
        "recycle_cache_full",
        "pptune_pool_recycle_cache_full",
        Some("pages"),
        "Recycles that found the cache full",
    ),
    (
        "recycle_ring",
        "pptune_pool_recycle_ring",
        Some("pages"),
        "Pages recycled into the pool ring",
    ),
    (
        "recycle_ring_full",
        "pptune_pool_recycle_ring_full",
        None,
        "Returns freed because the pool ring was full (once per bulk on the bulk path)",
    ),
    (
        "recycle_released_refcnt",
        "pptune_pool_recycle_released_refcnt",
        Some("pages"),
        "Pages released because the stack still held a reference",
    ),
];

fn field(s: &PoolStats, name: &str) -> u64 {
    match name {
        "alloc_fast" => s.alloc_fast,
        "alloc_slow" => s.alloc_slow,
        "alloc_slow_high_order" => s.alloc_slow_high_order,
        "alloc_empty" => s.alloc_empty,
        "alloc_refill" => s.alloc_refill,
        "alloc_waive" => s.alloc_waive,
        "recycle_cached" => s.recycle_cached,
        "recycle_cache_full" => s.recycle_cache_full,
        "recycle_ring" => s.recycle_ring,
        "recycle_ring_full" => s.recycle_ring_full,
        _ => s.recycle_released_refcnt,
    }
}

/// Per (device, queue) carry of retired pools' last counters.
#[derive(Debug, Default)]
struct Carry {
    /// Last stats seen per live pool id, with its (device, queue).
    pools: BTreeMap<u64, (QueueLabels, PoolStats)>,
    /// Sum of retired pools' last stats per (device, queue).
    retired: BTreeMap<QueueLabels, PoolStats>,
    /// Previous per-queue totals, for the derived ratios over one interval.
    last_totals: BTreeMap<QueueLabels, PoolStats>,
    /// Queue label sets exported last time, to drop those that vanished.
    queues: BTreeSet<QueueLabels>,
}

/// The registry and every family.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pool_counters: Vec<(&'static str, Family<QueueLabels, Counter>)>,
    pub pools: Family<QueueLabels, Gauge>,
    pub inflight_pages: Family<QueueLabels, Gauge>,
    pub inflight_bytes: Family<QueueLabels, Gauge>,
    pub recycling_ratio: Family<QueueLabels, FGauge>,
    pub recycle_miss_ratio: Family<QueueLabels, FGauge>,
    pub slow_refill_ratio: Family<QueueLabels, FGauge>,
    pub ring: Family<RingLabels, Gauge>,
    pub ring_max: Family<RingLabels, Gauge>,
    pub channels: Family<ChannelLabels, Gauge>,
    pub channels_max: Family<ChannelLabels, Gauge>,
    pub orphan_pools: Gauge,
    pub orphan_inflight_pages: Gauge,
    pub decisions: Family<DecisionLabels, Counter>,
    pub actions: Family<ActionLabels, Counter>,
    pub last_action: Family<DevLabels, Gauge>,
    pub overrides: Family<KnobLabels, Counter>,
    pub recommendation: Family<RecLabels, Gauge>,
    /// The recommendation series currently exported per device.
    rec_current: Mutex<BTreeMap<String, RecLabels>>,
    pub backoff: Family<DevLabels, Gauge>,
    pub errors: Family<KindLabels, Counter>,
    pub capability: Family<CapLabels, Gauge>,
    pub device_mode: Family<ModeLabels, Gauge>,
    pub rollout_enforcing: Gauge,
    pub rollout_fraction: FGauge,
    pub reloads: Family<ResultLabels, Counter>,
    pub policy_valid: Gauge,
    pub samples: Counter,
    pub sample_duration: FGauge,
    pub resyncs: Family<KindLabels, Counter>,
    carry: Mutex<Carry>,
}

/// Every family name as it appears in the exposition (counters with
/// `_total`), for docs and tests.
pub fn family_names() -> Vec<String> {
    let mut v: Vec<String> = POOL_COUNTERS
        .iter()
        .map(|(_, n, u, _)| match u {
            Some(u) => format!("{n}_{u}_total"),
            None => format!("{n}_total"),
        })
        .collect();
    v.extend(
        [
            "pptune_pools",
            "pptune_pool_inflight_pages",
            "pptune_pool_inflight_bytes",
            "pptune_queue_recycling_ratio",
            "pptune_queue_recycle_miss_ratio",
            "pptune_queue_slow_refill_ratio",
            "pptune_ring_entries",
            "pptune_ring_max_entries",
            "pptune_channels",
            "pptune_channels_max",
            "pptune_orphan_pools",
            "pptune_orphan_inflight_pages",
            "pptune_decisions_total",
            "pptune_actions_total",
            "pptune_last_action_timestamp_seconds",
            "pptune_operator_overrides_total",
            "pptune_recommendation_target",
            "pptune_device_backoff",
            "pptune_errors_total",
            "pptune_capability",
            "pptune_device_mode",
            "pptune_build_info",
            "pptune_rollout_enforcing",
            "pptune_rollout_fraction_ratio",
            "pptune_policy_reloads_total",
            "pptune_policy_valid",
            "pptune_samples_total",
            "pptune_sample_duration_seconds",
            "pptune_resyncs_total",
        ]
        .map(String::from),
    );
    v
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    #[must_use]
    #[allow(clippy::too_many_lines)]
    pub fn new() -> Self {
        let mut r = Registry::default();
        let mut pool_counters = Vec::new();
        for (f, name, unit, help) in POOL_COUNTERS {
            let fam = Family::<QueueLabels, Counter>::default();
            match unit {
                Some(u) => {
                    r.register_with_unit(*name, *help, Unit::Other((*u).into()), fam.clone());
                }
                None => r.register(*name, *help, fam.clone()),
            }
            pool_counters.push((*f, fam));
        }
        macro_rules! reg {
            ($name:expr, $help:expr, $m:expr) => {{
                let m = $m;
                r.register($name, $help, m.clone());
                m
            }};
            ($name:expr, $help:expr, $unit:expr, $m:expr) => {{
                let m = $m;
                r.register_with_unit($name, $help, $unit, m.clone());
                m
            }};
        }
        let pages = || Unit::Other("pages".into());
        let entries = || Unit::Other("entries".into());
        let m = Self {
            pools: reg!(
                "pptune_pools",
                "Live page pools serving the queue",
                Family::default()
            ),
            inflight_pages: reg!(
                "pptune_pool_inflight",
                "Pages out of the queue's pools (held by the NIC, the stack, or the pools' own ring and cache)",
                pages(),
                Family::default()
            ),
            inflight_bytes: reg!(
                "pptune_pool_inflight",
                "Memory of the queue's inflight pages",
                Unit::Bytes,
                Family::default()
            ),
            recycling_ratio: reg!(
                "pptune_queue_recycling",
                "ynltool's recycling figure as a ratio, over the last sampling interval",
                Unit::Other("ratio".into()),
                Family::default()
            ),
            recycle_miss_ratio: reg!(
                "pptune_queue_recycle_miss",
                "ring_full / (recycle_cached + recycle_ring + ring_full) over the last interval: the pool ring was too small",
                Unit::Other("ratio".into()),
                Family::default()
            ),
            slow_refill_ratio: reg!(
                "pptune_queue_slow_refill",
                "alloc_slow / (alloc_slow + alloc_refill) (alloc_empty for memory providers) over the last interval",
                Unit::Other("ratio".into()),
                Family::default()
            ),
            ring: reg!(
                "pptune_ring",
                "Current ring size",
                entries(),
                Family::default()
            ),
            ring_max: reg!(
                "pptune_ring_max",
                "Maximum ring size the driver allows",
                entries(),
                Family::default()
            ),
            channels: reg!(
                "pptune_channels",
                "Current channel count",
                Family::default()
            ),
            channels_max: reg!(
                "pptune_channels_max",
                "Maximum channel count the driver allows",
                Family::default()
            ),
            orphan_pools: reg!(
                "pptune_orphan_pools",
                "Pools whose device is gone but which still hold pages",
                Gauge::default()
            ),
            orphan_inflight_pages: reg!(
                "pptune_orphan_inflight",
                "Pages held by orphaned pools",
                pages(),
                Gauge::default()
            ),
            decisions: reg!(
                "pptune_decisions",
                "Engine decisions by action and reason",
                Family::default()
            ),
            actions: reg!(
                "pptune_actions",
                "Changes pptune made or tried, by knob, direction and result",
                Family::default()
            ),
            last_action: reg!(
                "pptune_last_action_timestamp",
                "Unix time of the last change on the device",
                Unit::Seconds,
                Family::default()
            ),
            overrides: reg!(
                "pptune_operator_overrides",
                "Knobs someone else changed: pptune stopped managing them until the policy is reloaded",
                Family::default()
            ),
            recommendation: reg!(
                "pptune_recommendation_target",
                "The engine's current recommendation for the device (observe and enforce alike): the target value, labelled with its stable id",
                Family::default()
            ),
            rec_current: Mutex::new(BTreeMap::new()),
            backoff: reg!(
                "pptune_device_backoff",
                "1 while the device is backed off after repeated failures",
                Family::default()
            ),
            errors: reg!("pptune_errors", "Errors by kind", Family::default()),
            capability: reg!(
                "pptune_capability",
                "1 when the kernel (or process) has the capability",
                Family::default()
            ),
            device_mode: reg!(
                "pptune_device_mode",
                "1 for the mode the device is in (after rollout)",
                Family::default()
            ),
            rollout_enforcing: reg!(
                "pptune_rollout_enforcing",
                "1 when this host enforces under the policy's rollout, 0 when it only observes",
                Gauge::default()
            ),
            rollout_fraction: reg!(
                "pptune_rollout_fraction",
                "The policy's rollout fraction (1 without a rollout)",
                Unit::Other("ratio".into()),
                FGauge::default()
            ),
            reloads: reg!(
                "pptune_policy_reloads",
                "Policy reloads by result (ok, invalid)",
                Family::default()
            ),
            policy_valid: reg!(
                "pptune_policy_valid",
                "0 when the last reload was invalid and the last good policy is still in force",
                Gauge::default()
            ),
            samples: reg!(
                "pptune_samples",
                "Successful sampling passes",
                Counter::default()
            ),
            sample_duration: reg!(
                "pptune_sample_duration",
                "Duration of the last sampling pass",
                Unit::Seconds,
                FGauge::default()
            ),
            resyncs: reg!(
                "pptune_resyncs",
                "Full resyncs after lost notifications, by source",
                Family::default()
            ),
            pool_counters,
            carry: Mutex::new(Carry::default()),
            registry: Registry::default(),
        };
        r.register(
            "pptune_build",
            "Build information",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            }),
        );
        for k in ERROR_KINDS {
            let _ = m.errors.get_or_create(&KindLabels {
                kind: (*k).to_owned(),
            });
        }
        for res in ["ok", "invalid"] {
            let _ = m.reloads.get_or_create(&ResultLabels {
                result: res.to_owned(),
            });
        }
        m.policy_valid.set(1);
        m.rollout_fraction.set(1.0);
        Self { registry: r, ..m }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, &self.registry)?;
        Ok(s)
    }

    pub fn error(&self, kind: &str) {
        self.errors
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// Updates the per-device series from one snapshot.
    pub fn observe_snapshot(&self, snap: &Snapshot) {
        let caps = &snap.capabilities;
        for (name, v) in [
            ("netdev_family", caps.netdev_family),
            ("page_pool_get", caps.page_pool_get),
            ("page_pool_stats", caps.page_pool_stats),
            ("queue_get", caps.queue_get),
            ("napi_get", caps.napi_get),
            ("qstats_get", caps.qstats_get),
            ("ethtool_family", caps.ethtool_family),
            ("cap_net_admin", caps.cap_net_admin),
        ] {
            self.capability
                .get_or_create(&CapLabels {
                    capability: name.to_owned(),
                })
                .set(i64::from(v));
        }
        self.orphan_pools
            .set(i64::try_from(snap.orphan_pools.len()).unwrap_or(i64::MAX));
        self.orphan_inflight_pages.set(sat(snap
            .orphan_pools
            .iter()
            .filter_map(|p| p.inflight)
            .sum::<u64>()));
        let Ok(mut carry) = self.carry.lock() else {
            return;
        };
        let mut seen_pools = BTreeSet::new();
        let mut seen_queues = BTreeSet::new();
        for dev in &snap.devices {
            self.observe_rings_channels(dev);
            let mut by_queue: BTreeMap<String, Vec<&Pool>> = BTreeMap::new();
            for q in &dev.rx_queues {
                by_queue
                    .entry(q.id.to_string())
                    .or_default()
                    .extend(q.pools.iter());
            }
            if !dev.unmapped_pools.is_empty() {
                by_queue
                    .entry("unmapped".to_owned())
                    .or_default()
                    .extend(dev.unmapped_pools.iter());
            }
            for (queue, pools) in by_queue {
                // Built once per queue and moved into the seen set: the
                // label strings are not cloned again per series or per pool.
                let labels = QueueLabels {
                    device: dev.name.clone(),
                    queue,
                };
                self.observe_queue(&mut carry, &labels, &pools, &mut seen_pools);
                seen_queues.insert(labels);
            }
        }
        // Pools not seen any more retire: their last values are carried.
        let retired: Vec<u64> = carry
            .pools
            .keys()
            .filter(|id| !seen_pools.contains(*id))
            .copied()
            .collect();
        for id in retired {
            if let Some((l, s)) = carry.pools.remove(&id) {
                let e = carry.retired.entry(l).or_default();
                *e = e.add(&s);
            }
        }
        // Queues (or whole devices) that vanished: drop their series, so
        // churning virtual devices do not leak series. A queue that comes
        // back resumes from its carried total.
        let gone: Vec<QueueLabels> = carry.queues.difference(&seen_queues).cloned().collect();
        for l in gone {
            self.forget_queue(&l);
            carry.last_totals.remove(&l);
        }
        let devices: BTreeSet<&str> = snap.devices.iter().map(|d| d.name.as_str()).collect();
        let gone_devices: BTreeSet<String> = carry
            .queues
            .iter()
            .map(|l| l.device.clone())
            .filter(|d| !devices.contains(d.as_str()))
            .collect();
        for d in &gone_devices {
            self.forget_device(d);
        }
        carry
            .retired
            .retain(|l, _| !gone_devices.contains(&l.device));
        carry.queues = seen_queues;
    }

    fn forget_queue(&self, l: &QueueLabels) {
        self.pools.remove(l);
        self.inflight_pages.remove(l);
        self.inflight_bytes.remove(l);
        self.recycling_ratio.remove(l);
        self.recycle_miss_ratio.remove(l);
        self.slow_refill_ratio.remove(l);
        for (_, fam) in &self.pool_counters {
            fam.remove(l);
        }
    }

    fn observe_queue(
        &self,
        carry: &mut Carry,
        labels: &QueueLabels,
        pools: &[&Pool],
        seen: &mut BTreeSet<u64>,
    ) {
        let mut live = PoolStats::default();
        let mut has_stats = false;
        let provider = pools.iter().any(|p| p.provider.is_some());
        for p in pools {
            seen.insert(p.id);
            if let Some(s) = p.stats {
                has_stats = true;
                live = live.add(&s);
                match carry.pools.get_mut(&p.id) {
                    // Same pool, same queue: update in place, no label copy.
                    Some((l, last)) if l == labels => *last = s,
                    _ => {
                        carry.pools.insert(p.id, (labels.clone(), s));
                    }
                }
            }
        }
        self.pools
            .get_or_create(labels)
            .set(i64::try_from(pools.len()).unwrap_or(i64::MAX));
        self.inflight_pages
            .get_or_create(labels)
            .set(sat(pools.iter().filter_map(|p| p.inflight).sum()));
        self.inflight_bytes
            .get_or_create(labels)
            .set(sat(pools.iter().filter_map(|p| p.inflight_mem).sum()));
        if !has_stats {
            return;
        }
        let total = carry.retired.get(labels).map_or(live, |r| r.add(&live));
        for (f, fam) in &self.pool_counters {
            let c = fam.get_or_create(labels);
            let want = field(&total, f);
            let have = c.get();
            if want > have {
                c.inc_by(want - have);
            }
        }
        let prev = match carry.last_totals.get_mut(labels) {
            Some(last) => Some(std::mem::replace(last, total)),
            None => {
                carry.last_totals.insert(labels.clone(), total);
                None
            }
        };
        if let Some(prev) = prev
            && let Some(d) = total.delta(&prev)
        {
            if let Some(v) = signals::recycling_pct(&d) {
                self.recycling_ratio.get_or_create(labels).set(v / 100.0);
            }
            if let Some(v) = signals::recycle_miss_share(&d) {
                self.recycle_miss_ratio.get_or_create(labels).set(v);
            }
            if let Some(v) = signals::slow_refill_share(&d, provider) {
                self.slow_refill_ratio.get_or_create(labels).set(v);
            }
        }
    }

    fn observe_rings_channels(&self, dev: &Device) {
        if let Some(r) = dev.rings.available() {
            for (name, cur, max) in [
                ("rx", r.rx, r.rx_max),
                ("rx_mini", r.rx_mini, r.rx_mini_max),
                ("rx_jumbo", r.rx_jumbo, r.rx_jumbo_max),
                ("tx", r.tx, r.tx_max),
            ] {
                let l = RingLabels {
                    device: dev.name.clone(),
                    ring: name.to_owned(),
                };
                if let Some(v) = cur {
                    self.ring.get_or_create(&l).set(i64::from(v));
                }
                if let Some(v) = max {
                    self.ring_max.get_or_create(&l).set(i64::from(v));
                }
            }
        }
        if let Some(c) = dev.channels.available() {
            for (name, cur, max) in [
                ("rx", c.rx, c.rx_max),
                ("tx", c.tx, c.tx_max),
                ("other", c.other, c.other_max),
                ("combined", c.combined, c.combined_max),
            ] {
                let l = ChannelLabels {
                    device: dev.name.clone(),
                    channel: name.to_owned(),
                };
                if let Some(v) = cur {
                    self.channels.get_or_create(&l).set(i64::from(v));
                }
                if let Some(v) = max {
                    self.channels_max.get_or_create(&l).set(i64::from(v));
                }
            }
        }
    }

    /// Drops the ring/channel/mode series of a vanished device.
    fn forget_device(&self, device: &str) {
        for ring in ["rx", "rx_mini", "rx_jumbo", "tx"] {
            let l = RingLabels {
                device: device.to_owned(),
                ring: ring.to_owned(),
            };
            self.ring.remove(&l);
            self.ring_max.remove(&l);
        }
        for ch in ["rx", "tx", "other", "combined"] {
            let l = ChannelLabels {
                device: device.to_owned(),
                channel: ch.to_owned(),
            };
            self.channels.remove(&l);
            self.channels_max.remove(&l);
        }
        for mode in ["observe", "enforce", "unmanaged"] {
            self.device_mode.remove(&ModeLabels {
                device: device.to_owned(),
                mode: mode.to_owned(),
            });
        }
    }

    /// Exports the device's current recommendation (`None` = hold: the
    /// series goes away).
    pub fn set_recommendation(&self, device: &str, rec: Option<(RecLabels, u32)>) {
        let Ok(mut cur) = self.rec_current.lock() else {
            return;
        };
        if let Some(old) = cur.remove(device)
            && rec.as_ref().is_none_or(|(l, _)| *l != old)
        {
            self.recommendation.remove(&old);
        }
        if let Some((l, target)) = rec {
            self.recommendation.get_or_create(&l).set(i64::from(target));
            cur.insert(device.to_owned(), l);
        }
    }

    /// Sets the device's mode series (one of them 1, the others removed).
    pub fn set_mode(&self, device: &str, mode: &str) {
        for m in ["observe", "enforce", "unmanaged"] {
            let l = ModeLabels {
                device: device.to_owned(),
                mode: m.to_owned(),
            };
            if m == mode {
                self.device_mode.get_or_create(&l).set(1);
            } else {
                self.device_mode.remove(&l);
            }
        }
    }
}

fn sat(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
