//! The per-queue series [`super::Metrics::encode`] writes itself (see the
//! module's docs), the ledger of the pools behind them, and the text
//! primitives that write them as prometheus-client writes its families.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use policy::accounting::{QueueDelta, QueueKey};
use policy::counters::{self, METRICS as POOL_COUNTERS};
use policy::policy::QueueSelection;
use policy::signals;
use policy::snapshot::{Device, PoolStats};
use prometheus_client::metrics::gauge::Gauge;

use super::family::Family;

/// The per-queue gauges after the counters: (name, unit, help).
pub(super) const QUEUE_GAUGES: [(&str, Option<&str>, &str); 3] = [
    ("pptune_pools", None, "Live page pools serving the queue"),
    (
        "pptune_pool_inflight",
        Some("pages"),
        "Pages out of the queue's pools (held by the NIC, the stack, or the pools' own ring and cache)",
    ),
    (
        "pptune_pool_inflight",
        Some("bytes"),
        "Memory of the queue's inflight pages",
    ),
];

/// The help of the per-device sums of [`QUEUE_GAUGES`], in their order.
const DEVICE_GAUGE_HELP: [&str; 3] = [
    "Live page pools serving the device's RX queues",
    "Pages out of the device's pools (held by the NIC, the stack, or the pools' own ring and cache)",
    "Memory of the device's inflight pages",
];

/// The help of the per-device sums of the pool counters: the counter's own,
/// summed over the device's queues.
fn device_counter_help(i: usize) -> &'static str {
    static HELP: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        POOL_COUNTERS
            .iter()
            .map(|m| format!("{}, summed over the device's RX queues", m.help))
            .collect()
    });
    HELP.get(i).map_or("", String::as_str)
}

/// The per-queue ratio gauges (unit `ratio`), last: (name, help).
pub(super) const QUEUE_RATIOS: [(&str, &str); 3] = [
    (
        "pptune_queue_recycling",
        "ynltool's recycling figure as a ratio, over the last sampling interval",
    ),
    (
        "pptune_queue_recycle_miss",
        "ring_full / (recycle_cached + recycle_ring + ring_full) over the last interval: the pool ring was too small",
    ),
    (
        "pptune_queue_slow_refill",
        "alloc_slow / (alloc_slow + alloc_refill) (alloc_empty for memory providers) over the last interval",
    ),
];

/// One (device, queue): its exported series and what is carried for it.
#[derive(Debug)]
pub(super) struct QueueSeries {
    /// `{device="…",queue="…"}`, escaped as prometheus-client escapes.
    pub(super) labels: String,
    /// The series exist (the queue was in the last snapshot).
    pub(super) exported: bool,
    /// Tick of the last snapshot that had the queue.
    pub(super) seen: u64,
    /// pools, inflight pages, inflight bytes.
    pub(super) gauges: [i64; 3],
    /// The exported pool counters, once the queue had stats.
    pub(super) counters: Option<[u64; counters::COUNT]>,
    /// recycling, recycle miss, slow refill: once computed.
    pub(super) ratios: [Option<f64>; 3],
    /// Running sum of the queue's per-pool deltas (kept while the queue is
    /// away, so one that comes back resumes from it).
    pub(super) total: PoolStats,
}

impl QueueSeries {
    pub(super) fn new(device: &str, queue: QueueKey) -> Self {
        let mut labels = String::with_capacity(device.len() + 24);
        labels.push_str("{device=\"");
        push_label_value(&mut labels, device);
        labels.push_str("\",queue=\"");
        match queue {
            QueueKey::Id(id) => {
                let _ = write!(labels, "{id}");
            }
            QueueKey::Unmapped => labels.push_str(policy::accounting::UNMAPPED),
        }
        labels.push_str("\"}");
        Self {
            labels,
            exported: false,
            seen: 0,
            gauges: [0; 3],
            counters: None,
            ratios: [None; 3],
            total: PoolStats::default(),
        }
    }

    /// The queue vanished: drop its series (the total stays, so a queue
    /// that comes back resumes from it).
    pub(super) fn forget(&mut self) {
        self.exported = false;
        self.counters = None;
        self.ratios = [None; 3];
    }
}

/// A device's [current, max] gauge pair of each named knob set from
/// `values`, through the handles in `slots`: a handle is made from its
/// family with `labels(name)` the first time a value is there, then kept.
pub(super) fn set_knob_gauges<L: Clone + std::hash::Hash + Eq>(
    families: [&Family<L, Gauge>; 2],
    names: &[&str; 4],
    values: [(Option<u32>, Option<u32>); 4],
    slots: &mut [[Option<Gauge>; 2]; 4],
    labels: impl Fn(&str) -> L,
) {
    for ((name, (cur, max)), slot) in names.iter().zip(values).zip(slots) {
        for ((value, family), gauge) in [cur, max].into_iter().zip(families).zip(slot) {
            if let Some(v) = value {
                gauge
                    .get_or_insert_with(|| family.get_or_create(&labels(name)).clone())
                    .set(i64::from(v));
            }
        }
    }
}

/// A label value as prometheus-client's text encoder writes it.
pub(super) fn push_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[derive(Debug)]
pub(super) struct DevSeries {
    pub(super) name: Arc<str>,
    /// Tick of the last snapshot that had the device.
    pub(super) seen: u64,
    /// By key, ascending: the pass's deltas come in key order, so each is
    /// found by moving a cursor, not by a search per queue per pass.
    pub(super) queues: Vec<(QueueKey, QueueSeries)>,
    pub(super) knobs: KnobGauges,
}

/// The `ring` label values, in [`KnobGauges::rings`] order.
pub(super) const RINGS: [&str; 4] = ["rx", "rx_mini", "rx_jumbo", "tx"];
/// The `channel` label values, in [`KnobGauges::channels`] order.
pub(super) const CHANNELS: [&str; 4] = ["rx", "tx", "other", "combined"];
/// The `capability` label values, in the order `observe_snapshot` sets them.
pub(super) const CAPABILITIES: [&str; 8] = [
    "netdev_family",
    "page_pool_get",
    "page_pool_stats",
    "queue_get",
    "napi_get",
    "qstats_get",
    "ethtool_family",
    "cap_net_admin",
];

/// Handles on a device's ring and channel series ([current, max] per
/// [`RINGS`] / [`CHANNELS`] entry), made on first use; they go with the
/// device's [`DevSeries`] when [`Metrics::forget_device`] drops the series.
#[derive(Debug, Default)]
pub(super) struct KnobGauges {
    pub(super) rings: [[Option<Gauge>; 2]; 4],
    pub(super) channels: [[Option<Gauge>; 2]; 4],
}

/// The per-queue series, carried from pass to pass.
#[derive(Debug, Default)]
pub(super) struct Carry {
    /// Incremented per pass; `seen` stamps compare against it.
    pub(super) tick: u64,
    pub(super) devices: BTreeMap<Arc<str>, DevSeries>,
    /// Handles on the capability series, in [`CAPABILITIES`] order.
    pub(super) capabilities: Option<[Gauge; 8]>,
}

impl Carry {
    /// One device's queue series brought up to the pass (`queues`: its
    /// deltas, the RX queues with pools merged per queue id, then the pools
    /// that map to no queue); returns its series.
    pub(super) fn observe_device(
        &mut self,
        dev: &Device,
        queues: &[(QueueKey, QueueDelta)],
        tick: u64,
    ) -> Option<&mut DevSeries> {
        let devices = &mut self.devices;
        let name = dev.name.as_str();
        if !devices.contains_key(name) {
            let name: Arc<str> = Arc::from(name);
            devices.insert(
                Arc::clone(&name),
                DevSeries {
                    name,
                    seen: 0,
                    queues: Vec::new(),
                    knobs: KnobGauges::default(),
                },
            );
        }
        let d = devices.get_mut(name)?;
        d.seen = tick;
        let mut at = 0;
        for (key, q) in queues {
            observe_queue(d, &mut at, *key, q, tick);
        }
        Some(d)
    }
}

/// One queue's deltas since the last snapshot. `at`: where the device's
/// last queue of this snapshot was (keys come in ascending order).
pub(super) fn observe_queue(
    d: &mut DevSeries,
    at: &mut usize,
    key: QueueKey,
    qd: &QueueDelta,
    tick: u64,
) {
    let queues = &mut d.queues;
    while queues.get(*at).is_some_and(|(k, _)| *k < key) {
        *at += 1;
    }
    if queues.get(*at).is_none_or(|(k, _)| *k != key) {
        queues.insert(*at, (key, QueueSeries::new(&d.name, key)));
    }
    let Some((_, q)) = queues.get_mut(*at) else {
        return;
    };
    *at += 1;
    q.exported = true;
    q.seen = tick;
    q.gauges = [
        i64::try_from(qd.pools).unwrap_or(i64::MAX),
        sat(qd.inflight),
        sat(qd.inflight_mem),
    ];
    if !qd.counted && !qd.reset {
        // No pool of the queue has stats (yet).
        return;
    }
    // Counters only go up: a reset adds nothing (no data), never a drop.
    q.total = q.total.add(&qd.stats);
    let had = q.counters.replace(q.total.values()).is_some();
    if had && !qd.reset {
        // Ratios over the last interval; a queue's first sample is its
        // pools' whole life, not an interval.
        let delta = &qd.stats;
        if let Some(v) = signals::recycling_pct(delta) {
            q.ratios[0] = Some(v / 100.0);
        }
        if let Some(v) = signals::recycle_miss_share(delta) {
            q.ratios[1] = Some(v);
        }
        if let Some(v) = signals::slow_refill_share(delta, qd.provider) {
            q.ratios[2] = Some(v);
        }
    }
}

/// Appends the device's queues that get per-queue series, in queue order:
/// every exported queue, none, or the `count` with the highest recycle-miss
/// share over the last interval (queues without one rank last; ties keep
/// queue order).
pub(super) fn select_queues<'a>(
    d: &'a DevSeries,
    policy: QueueSelection,
    out: &mut Vec<&'a QueueSeries>,
) {
    let exported = d.queues.iter().map(|(_, q)| q).filter(|q| q.exported);
    match policy {
        QueueSelection::All => out.extend(exported),
        QueueSelection::None => {}
        QueueSelection::Worst { count } => {
            let mut ranked: Vec<(usize, &QueueSeries)> = exported.enumerate().collect();
            let miss = |q: &QueueSeries| q.ratios[1].unwrap_or(-1.0);
            ranked.sort_by(|(_, a), (_, b)| miss(b).total_cmp(&miss(a)));
            ranked.truncate(usize::try_from(count).unwrap_or(usize::MAX));
            ranked.sort_unstable_by_key(|(i, _)| *i);
            out.extend(ranked.into_iter().map(|(_, q)| q));
        }
    }
}

/// The per-device sums, written whatever the per-queue setting: every pool
/// counter as `pptune_device_pool_*_total` (summed over all of the device's
/// queues, including ones away, so the sum stays monotonic) and the three
/// per-queue gauges as `pptune_device_*` (over the queues present). Ratios
/// are left to PromQL over the summed rates.
pub(super) fn encode_device_sums(out: &mut String, devices: &BTreeMap<Arc<str>, DevSeries>) {
    let mut sums: Vec<(String, [u64; counters::COUNT], [i64; 3], bool)> = Vec::new();
    for d in devices.values() {
        let present: Vec<&QueueSeries> = d
            .queues
            .iter()
            .map(|(_, q)| q)
            .filter(|q| q.exported)
            .collect();
        if present.is_empty() {
            continue;
        }
        let mut labels = String::with_capacity(d.name.len() + 12);
        labels.push_str("{device=\"");
        push_label_value(&mut labels, &d.name);
        labels.push_str("\"}");
        let total = d
            .queues
            .iter()
            .fold(PoolStats::default(), |acc, (_, q)| acc.add(&q.total));
        let mut gauges = [0i64; 3];
        for q in &present {
            for (g, v) in gauges.iter_mut().zip(q.gauges) {
                *g = g.saturating_add(v);
            }
        }
        let has_counters = present.iter().any(|q| q.counters.is_some());
        sums.push((labels, total.values(), gauges, has_counters));
    }
    if sums.is_empty() {
        return;
    }
    let mut num = itoa_buf();
    if sums.iter().any(|s| s.3) {
        for (i, m) in POOL_COUNTERS.iter().enumerate() {
            let name = device_name(m.metric);
            descriptor(out, &name, m.unit, device_counter_help(i), "counter");
            for (labels, c, _, has) in &sums {
                if *has {
                    series(out, &name, m.unit, "_total", labels);
                    out.push_str(num.format(c[i]));
                    out.push('\n');
                }
            }
        }
    }
    for (i, ((name, unit, _), help)) in QUEUE_GAUGES.iter().zip(DEVICE_GAUGE_HELP).enumerate() {
        let name = device_name(name);
        descriptor(out, &name, *unit, help, "gauge");
        for (labels, _, g, _) in &sums {
            series(out, &name, *unit, "", labels);
            out.push_str(num.format(g[i]));
            out.push('\n');
        }
    }
}

/// `pptune_pool_x` → `pptune_device_pool_x`.
pub(super) fn device_name(queue_metric: &str) -> String {
    format!(
        "pptune_device_{}",
        queue_metric.strip_prefix("pptune_").unwrap_or(queue_metric)
    )
}

pub(super) fn itoa_buf() -> itoa::Buffer {
    itoa::Buffer::new()
}

/// `# HELP`, `# TYPE` and `# UNIT` of a family, as prometheus-client
/// writes them (the unit is appended to the name).
pub(super) fn descriptor(out: &mut String, name: &str, unit: Option<&str>, help: &str, kind: &str) {
    let full = |out: &mut String| {
        out.push_str(name);
        if let Some(u) = unit {
            out.push('_');
            out.push_str(u);
        }
    };
    out.push_str("# HELP ");
    full(out);
    out.push(' ');
    out.push_str(help);
    // prometheus-client's `Registry::register` ends every help with a period.
    out.push_str(".\n# TYPE ");
    full(out);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
    if let Some(u) = unit {
        out.push_str("# UNIT ");
        full(out);
        out.push(' ');
        out.push_str(u);
        out.push('\n');
    }
}

/// A sample's name and labels, up to the space before its value.
pub(super) fn series(out: &mut String, name: &str, unit: Option<&str>, suffix: &str, labels: &str) {
    out.push_str(name);
    if let Some(u) = unit {
        out.push('_');
        out.push_str(u);
    }
    out.push_str(suffix);
    out.push_str(labels);
    out.push(' ');
}

pub(super) fn sat(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
