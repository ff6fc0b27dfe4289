//! The hand-written per-queue exposition ([`super`]) against
//! prometheus-client's own encoding of the same families, kept by a plain
//! restatement of the accounting rules.

use std::collections::{BTreeMap, BTreeSet};

use policy::signals;
use policy::snapshot::{Device, Pool, PoolStats, Snapshot};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::super::tests::{Passes, device, pool, queue, stats};
use super::super::*;

type FGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The per-queue families as prometheus-client `Family`s, kept by a
/// plain restatement of the accounting rules (per-pool-id deltas, new
/// pools since creation, a reset adds nothing, retired pools stay
/// counted): the reference the hand-written exposition must equal.
struct Reference {
    registry: Registry,
    counters: Vec<Family<QueueLabels, Counter>>,
    gauges: Vec<Family<QueueLabels, Gauge>>,
    ratios: Vec<Family<QueueLabels, FGauge>>,
    /// Last stats per pool id seen in the previous snapshot.
    pools: BTreeMap<u64, Option<PoolStats>>,
    totals: BTreeMap<QueueLabels, PoolStats>,
    with_counters: BTreeSet<QueueLabels>,
    queues: BTreeSet<QueueLabels>,
}

impl Reference {
    fn new() -> Self {
        let mut r = Registry::default();
        let mut counters = Vec::new();
        for c in POOL_COUNTERS {
            let f = Family::<QueueLabels, Counter>::default();
            match c.unit {
                Some(u) => r.register_with_unit(c.metric, c.help, Unit::Other(u.into()), f.clone()),
                None => r.register(c.metric, c.help, f.clone()),
            }
            counters.push(f);
        }
        let mut gauges = Vec::new();
        for (name, unit, help) in QUEUE_GAUGES {
            let f = Family::<QueueLabels, Gauge>::default();
            match unit {
                Some(u) => r.register_with_unit(name, help, Unit::Other(u.into()), f.clone()),
                None => r.register(name, help, f.clone()),
            }
            gauges.push(f);
        }
        let mut ratios = Vec::new();
        for (name, help) in QUEUE_RATIOS {
            let f = Family::<QueueLabels, FGauge>::default();
            r.register_with_unit(name, help, Unit::Other("ratio".into()), f.clone());
            ratios.push(f);
        }
        Self {
            registry: r,
            counters,
            gauges,
            ratios,
            pools: BTreeMap::new(),
            totals: BTreeMap::new(),
            with_counters: BTreeSet::new(),
            queues: BTreeSet::new(),
        }
    }

    fn encode(&self) -> String {
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, &self.registry).unwrap();
        s
    }

    fn observe_snapshot(&mut self, snap: &Snapshot) {
        let mut seen_pools = BTreeMap::new();
        let mut seen_queues = BTreeSet::new();
        for dev in &snap.devices {
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
                let labels = QueueLabels {
                    device: dev.name.clone(),
                    queue,
                };
                self.observe_queue(&labels, &pools);
                seen_queues.insert(labels);
            }
            for p in dev.pools() {
                let last = self.pools.get(&p.id).copied().flatten();
                seen_pools.insert(p.id, p.stats.or(last));
            }
        }
        self.pools = seen_pools;
        let gone: Vec<QueueLabels> = self.queues.difference(&seen_queues).cloned().collect();
        for l in gone {
            for f in &self.counters {
                f.remove(&l);
            }
            for f in &self.gauges {
                f.remove(&l);
            }
            for f in &self.ratios {
                f.remove(&l);
            }
            self.with_counters.remove(&l);
        }
        let devices: BTreeSet<&str> = snap.devices.iter().map(|d| d.name.as_str()).collect();
        let gone_devices: BTreeSet<String> = self
            .queues
            .iter()
            .map(|l| l.device.clone())
            .filter(|d| !devices.contains(d.as_str()))
            .collect();
        self.totals.retain(|l, _| !gone_devices.contains(&l.device));
        self.queues = seen_queues;
    }

    fn observe_queue(&mut self, labels: &QueueLabels, pools: &[&Pool]) {
        let mut delta = PoolStats::default();
        let (mut counted, mut reset) = (false, false);
        let provider = pools.iter().any(|p| p.provider.is_some());
        for p in pools {
            let Some(now) = p.stats else { continue };
            match self.pools.get(&p.id) {
                None => {
                    delta = delta.add(&now);
                    counted = true;
                }
                Some(None) => {}
                Some(Some(before)) => match now.delta(before) {
                    Some(d) => {
                        delta = delta.add(&d);
                        counted = true;
                    }
                    None => reset = true,
                },
            }
        }
        self.gauges[0]
            .get_or_create(labels)
            .set(i64::try_from(pools.len()).unwrap());
        self.gauges[1]
            .get_or_create(labels)
            .set(sat(pools.iter().filter_map(|p| p.inflight).sum()));
        self.gauges[2]
            .get_or_create(labels)
            .set(sat(pools.iter().filter_map(|p| p.inflight_mem).sum()));
        if !counted && !reset {
            return;
        }
        let total = self.totals.entry(labels.clone()).or_default();
        *total = total.add(&delta);
        for (f, want) in self.counters.iter().zip(total.values()) {
            let c = f.get_or_create(labels);
            let have = c.get();
            if want > have {
                c.inc_by(want - have);
            }
        }
        let had = !self.with_counters.insert(labels.clone());
        if had && !reset {
            if let Some(v) = signals::recycling_pct(&delta) {
                self.ratios[0].get_or_create(labels).set(v / 100.0);
            }
            if let Some(v) = signals::recycle_miss_share(&delta) {
                self.ratios[1].get_or_create(labels).set(v);
            }
            if let Some(v) = signals::slow_refill_share(&delta, provider) {
                self.ratios[2].get_or_create(labels).set(v);
            }
        }
    }
}

/// Families of an exposition in order: the descriptor lines as they
/// are, the samples sorted (prometheus-client writes a family's series
/// in hash-map order).
fn families(text: &str) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    for line in text.lines().filter(|l| *l != "# EOF") {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_owned();
            out.push((name, vec![line.to_owned()], Vec::new()));
        } else if line.starts_with("# ") {
            out.last_mut().unwrap().1.push(line.to_owned());
        } else {
            out.last_mut().unwrap().2.push(line.to_owned());
        }
    }
    for f in &mut out {
        f.2.sort();
    }
    out
}

/// The hand-written per-queue families equal prometheus-client's
/// `Family` encoding of the old update algorithm, tick after tick:
/// pool rebuilds (carry), a pool without stats, duplicate queue ids,
/// unmapped pools, a queue and a device that vanish and come back, a
/// pool that moves queue, a counter reset, a ratio that dtoa writes
/// as `0.00001`, and a device name that needs escaping.
#[test]
fn queue_families_match_prometheus_client_encoding() {
    let weird = "we\"ird\\x\ny";
    let tiny = PoolStats {
        recycle_ring: 99_999,
        recycle_ring_full: 1,
        ..stats(90)
    };
    let tiny2 = PoolStats {
        recycle_ring: tiny.recycle_ring + 99_999,
        recycle_ring_full: tiny.recycle_ring_full + 1,
        alloc_slow: tiny.alloc_slow + 1,
        alloc_refill: tiny.alloc_refill + 7,
        ..tiny
    };
    let ticks: Vec<Vec<Device>> = vec![
        vec![],
        vec![
            device(
                "eth0",
                vec![
                    queue(0, vec![pool(1, Some(stats(1)))]),
                    queue(1, vec![pool(2, Some(stats(1)))]),
                    queue(2, vec![pool(3, None)]),
                    queue(10, vec![]),
                ],
                vec![pool(9, Some(stats(1)))],
            ),
            device(
                weird,
                vec![
                    queue(0, vec![pool(20, Some(stats(1)))]),
                    queue(0, vec![pool(21, Some(stats(2)))]),
                ],
                vec![],
            ),
        ],
        vec![
            device(
                "eth0",
                vec![
                    queue(0, vec![pool(1, Some(stats(2)))]),
                    queue(1, vec![pool(4, Some(stats(0)))]),
                    queue(2, vec![pool(3, Some(stats(1)))]),
                    queue(10, vec![]),
                ],
                vec![],
            ),
            device(
                weird,
                vec![
                    queue(0, vec![pool(20, Some(stats(3)))]),
                    queue(0, vec![pool(21, Some(stats(4)))]),
                ],
                vec![],
            ),
        ],
        vec![device(
            "eth0",
            vec![
                queue(0, vec![pool(1, Some(stats(3)))]),
                queue(1, vec![pool(4, Some(stats(1)))]),
            ],
            vec![],
        )],
        vec![
            device(
                "eth0",
                vec![
                    queue(0, vec![pool(1, Some(stats(4)))]),
                    queue(1, vec![pool(4, Some(stats(2)))]),
                    queue(2, vec![pool(5, Some(stats(1)))]),
                ],
                vec![pool(9, None)],
            ),
            device(
                weird,
                vec![queue(0, vec![pool(20, Some(stats(1)))])],
                vec![],
            ),
        ],
        vec![device(
            "eth0",
            vec![
                queue(0, vec![pool(4, Some(stats(3))), pool(6, Some(tiny))]),
                queue(1, vec![pool(1, Some(stats(1)))]),
                queue(2, vec![pool(5, None)]),
                // New, between queues the device has had (2 and 10).
                queue(5, vec![pool(7, Some(stats(1)))]),
            ],
            vec![],
        )],
        vec![device(
            "eth0",
            vec![
                queue(0, vec![pool(4, Some(stats(3))), pool(6, Some(tiny2))]),
                queue(1, vec![pool(1, Some(stats(2)))]),
                queue(2, vec![pool(5, Some(stats(9)))]),
                queue(5, vec![pool(7, Some(stats(4)))]),
            ],
            vec![],
        )],
        vec![],
    ];
    let m = Metrics::new();
    let mut passes = Passes::default();
    let mut r = Reference::new();
    let mut saw_tiny = false;
    for (tick, devices) in ticks.into_iter().enumerate() {
        let snap = Snapshot {
            devices,
            ..Snapshot::default()
        };
        passes.feed(&m, &snap);
        r.observe_snapshot(&snap);
        let text = m.encode().unwrap();
        let want = families(&r.encode());
        let names: BTreeSet<&str> = want.iter().map(|f| f.0.as_str()).collect();
        let got: Vec<_> = families(&text)
            .into_iter()
            .filter(|f| {
                f.0.starts_with("pptune_pool")
                    || f.0.starts_with("pptune_queue")
                    || names.contains(f.0.as_str())
            })
            .collect();
        assert_eq!(got, want, "tick {tick}:\n{text}");
        if tick == 2 {
            // Every per-queue family, ratios included, is compared.
            assert_eq!(want.len(), 17, "{text}");
        }
        // Written first, as registration order put them.
        if let Some(first) = want.first() {
            assert!(text.starts_with(&first.1[0]), "tick {tick}");
        }
        assert!(text.ends_with("# EOF\n"));
        saw_tiny |= text.contains("\"} 0.00001\n");
    }
    assert!(saw_tiny, "the 1e-5 ratio was never written");
}
