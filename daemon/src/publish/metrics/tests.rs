//! The metrics' unit tests: the per-device series' life (known at 0,
//! dropped with the device). The hand-written per-queue exposition is
//! checked beside its encoder (`series/tests.rs`), the rollout gauges
//! beside theirs (`policy_gauges.rs`).

use super::*;

/// The passes as the loop makes them: the loop's observer (deltas against
/// the previous snapshot, kept from pass to pass), then the metrics.
#[derive(Default)]
pub(super) struct Passes(policy::observer::Observer);

impl Passes {
    pub(super) fn feed(&mut self, m: &Metrics, snap: &Snapshot) {
        self.0.next(snap, std::time::Duration::ZERO);
        m.observe(snap, self.0.deltas());
        self.0.keep(snap.clone(), std::time::Duration::ZERO);
    }
}
use policy::snapshot::{Pool, PoolStats, RxQueue};

/// A device with rings (rx `rx` of 4096) and 2 combined channels, no
/// pools.
fn knob_device(name: &str, rx: u32) -> Device {
    Device {
        ifindex: 9,
        name: name.to_owned(),
        rings: policy::snapshot::Availability::Available(policy::snapshot::Rings {
            rx: Some(rx),
            rx_max: Some(4096),
            ..Default::default()
        }),
        channels: policy::snapshot::Availability::Available(policy::snapshot::Channels {
            combined: Some(2),
            ..Default::default()
        }),
        ..Device::default()
    }
}

/// A device with rings but no pools (so no per-queue series) that
/// vanishes takes its ring and channel series with it, and when it
/// comes back its series are live again (the kept handles went with
/// it). The first half failed before the handles were kept: only
/// devices with exported queue series were ever forgotten.
#[test]
fn a_vanished_device_without_pools_drops_its_knob_series() {
    let m = Metrics::new();
    let mut passes = Passes::default();
    let snap = |rx: u32| Snapshot {
        devices: vec![knob_device("veth9", rx)],
        ..Snapshot::default()
    };
    let text = |m: &Metrics| m.encode().unwrap();
    passes.feed(&m, &snap(256));
    assert!(text(&m).contains("pptune_ring_entries{device=\"veth9\",ring=\"rx\"} 256"));
    passes.feed(&m, &Snapshot::default());
    assert!(!text(&m).contains("veth9"), "{}", text(&m));
    passes.feed(&m, &snap(512));
    passes.feed(&m, &snap(1024));
    let t = text(&m);
    assert!(
        t.contains("pptune_ring_entries{device=\"veth9\",ring=\"rx\"} 1024"),
        "{t}"
    );
    assert!(
        t.contains("pptune_channels{device=\"veth9\",channel=\"combined\"} 2"),
        "{t}"
    );
}

/// A device pptune decides for has its change, override and change
/// decision counters at 0 before anything happens, for each knob the
/// policy manages on it (not for knobs it lacks or the policy leaves
/// alone), so the first change is a step from 0 that `increase()`
/// sees; the first event then reads 1 and the vanished device takes
/// them all.
#[test]
fn a_known_device_exports_its_counters_at_zero() {
    let m = Metrics::new();
    let t = m.encode().unwrap();
    for source in netlink::events::NOTIFY_SOURCES {
        assert!(
            t.contains(&format!("pptune_resyncs_total{{kind=\"{source}\"}} 0\n")),
            "{t}"
        );
    }
    let mut p = policy::fixtures::policy();
    p.channels.enabled = false;
    let dev = knob_device("eth9", 256);
    let mut passes = Passes::default();
    passes.feed(
        &m,
        &Snapshot {
            devices: vec![dev.clone()],
            ..Snapshot::default()
        },
    );
    m.known(&dev, &p, "observe");
    m.known(&dev, &p, "observe");
    let t = m.encode().unwrap();
    for want in [
        "pptune_actions_total{device=\"eth9\",knob=\"ring.rx\",direction=\"grow\",result=\"applied\"} 0\n",
        "pptune_actions_total{device=\"eth9\",knob=\"ring.rx\",direction=\"shrink\",result=\"refused\"} 0\n",
        "pptune_actions_total{device=\"eth9\",knob=\"ring.rx\",direction=\"revert\",result=\"applied\"} 0\n",
        "pptune_operator_overrides_total{device=\"eth9\",knob=\"ring.rx\"} 0\n",
        "pptune_decisions_total{device=\"eth9\",action=\"set_ring\",reason=\"recycle_miss_high\",mode=\"observe\"} 0\n",
    ] {
        assert!(t.contains(want), "{want} in\n{t}");
    }
    assert!(
        !t.contains("ring.rx-jumbo") && !t.contains("channels."),
        "{t}"
    );
    assert!(!t.contains("mode=\"enforce\""), "{t}");
    m.known(&dev, &p, "enforce");
    let t = m.encode().unwrap();
    assert!(t.contains("pptune_decisions_total{device=\"eth9\",action=\"set_ring\",reason=\"calm_shrink\",mode=\"enforce\"} 0\n"), "{t}");
    m.count([Event::Action {
        device: "eth9".to_owned(),
        knob: policy::Knob::Ring(policy::RingField::Rx),
        direction: "grow",
        result: "applied".to_owned(),
    }]);
    let t = m.encode().unwrap();
    assert!(t.contains("pptune_actions_total{device=\"eth9\",knob=\"ring.rx\",direction=\"grow\",result=\"applied\"} 1\n"), "{t}");
    passes.feed(&m, &Snapshot::default());
    assert!(!m.encode().unwrap().contains("eth9"));
}

/// The reclaimable memory of a selected device is a series from its
/// first pass, at 0 while nothing is reclaimable (a fleet sum counts
/// the device), its value after; a device no longer selected has
/// none.
#[test]
fn a_selected_device_exports_its_reclaimable_bytes_from_zero() {
    let m = Metrics::new();
    let series = |n: u64| format!("pptune_device_reclaimable_bytes{{device=\"eth0\"}} {n}\n");
    m.set_reclaimable("eth0", Some(0));
    let t = m.encode().unwrap();
    assert!(t.contains(&series(0)), "{t}");
    assert!(
        t.contains("# TYPE pptune_device_reclaimable_bytes gauge\n")
            && t.contains("# UNIT pptune_device_reclaimable_bytes bytes\n"),
        "{t}"
    );
    m.set_reclaimable("eth0", Some(58 << 20));
    let t = m.encode().unwrap();
    assert!(t.contains(&series(58 << 20)), "{t}");
    m.set_reclaimable("eth0", None);
    assert!(!m.encode().unwrap().contains("reclaimable_bytes{"));
}

/// The per-device sums describe a device, not "the queue" their
/// per-queue families describe.
#[test]
fn device_sums_say_device_in_their_help() {
    let m = Metrics::new();
    let mut passes = Passes::default();
    let snap = |k: u64| Snapshot {
        devices: vec![device(
            "eth0",
            vec![queue(0, vec![pool(1, Some(stats(k)))])],
            vec![],
        )],
        ..Snapshot::default()
    };
    passes.feed(&m, &snap(1));
    passes.feed(&m, &snap(2));
    let t = m.encode().unwrap();
    let help: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("# HELP pptune_device_pool"))
        .collect();
    assert_eq!(
        help.len(),
        policy::counters::COUNT + series::QUEUE_GAUGES.len(),
        "{t}"
    );
    for h in help {
        assert!(!h.contains("queue's") && !h.contains("the queue"), "{h}");
        assert!(h.contains("device"), "{h}");
    }
}

/// A device that vanishes takes every per-device series with it: the
/// decision, action and override counters, the last-action time, the
/// backoff flag and the recommendation, as well as its ring and channel
/// gauges. Found by the soak (tests/tests/vm_faults.rs): a device
/// replaced every few minutes under a new name left its counters and
/// gauges behind, one set of series per name for the daemon's life.
#[test]
fn a_vanished_device_drops_its_counters_and_flags() {
    let m = Metrics::new();
    let mut passes = Passes::default();
    let dev = |name: &str| Device {
        ifindex: 9,
        name: name.to_owned(),
        ..Device::default()
    };
    let snap = |names: &[&str]| Snapshot {
        devices: names.iter().map(|n| dev(n)).collect(),
        ..Snapshot::default()
    };
    let text = |m: &Metrics| m.encode().unwrap();
    passes.feed(&m, &snap(&["soakb0", "keep0"]));
    for device in ["soakb0", "keep0"] {
        m.count_decision(device, "set_ring", "recycle_miss_high", "enforce");
        m.set_mode(device, "enforce");
        let device = device.to_owned();
        let rx = policy::Knob::Ring(policy::RingField::Rx);
        m.count([
            Event::Action {
                device: device.clone(),
                knob: rx,
                direction: "grow",
                result: "applied".to_owned(),
            },
            Event::Override {
                device: device.clone(),
                knob: rx,
            },
            Event::Applied {
                device: device.clone(),
                unix_s: 1_796_091_744,
            },
            Event::BackedOff {
                device: device.clone(),
            },
        ]);
        let device = device.as_str();
        m.set_ring_cost(device, Some(8 << 20));
        m.set_reclaimable(device, Some(0));
        m.set_recommendation(
            device,
            Some((
                RecLabels {
                    device: device.to_owned(),
                    recommendation: "0a1f51615c09".to_owned(),
                    knob: "ring.rx".to_owned(),
                    reason: "recycle_miss_high".to_owned(),
                },
                2048,
            )),
        );
    }
    let t = text(&m);
    assert_eq!(t.matches("device=\"soakb0\"").count(), 10, "{t}");
    passes.feed(&m, &snap(&["keep0"]));
    let t = text(&m);
    assert!(!t.contains("soakb0"), "{t}");
    assert_eq!(t.matches("device=\"keep0\"").count(), 10, "{t}");
    // Back under the same name: counted from zero.
    passes.feed(&m, &snap(&["soakb0", "keep0"]));
    m.count([Event::Action {
        device: "soakb0".to_owned(),
        knob: policy::Knob::Ring(policy::RingField::Rx),
        direction: "grow",
        result: "applied".to_owned(),
    }]);
    let t = text(&m);
    assert!(
        t.contains("pptune_actions_total{device=\"soakb0\",knob=\"ring.rx\",direction=\"grow\",result=\"applied\"} 1"),
        "{t}"
    );
}

pub(super) fn stats(k: u64) -> PoolStats {
    PoolStats {
        alloc_fast: 1000 * k,
        alloc_slow: 10 * k,
        alloc_slow_high_order: k,
        alloc_empty: 3 * k,
        alloc_refill: 50 * k,
        alloc_waive: k / 2,
        recycle_cached: 800 * k,
        recycle_cache_full: k,
        recycle_ring: 100 * k,
        recycle_ring_full: 5 * k,
        recycle_released_refcnt: 7 * k,
    }
}

pub(super) fn pool(id: u64, s: Option<PoolStats>) -> Pool {
    Pool {
        id,
        inflight: Some(id * 10),
        inflight_mem: id.is_multiple_of(2).then_some(id * 40960),
        stats: s,
        ..Pool::default()
    }
}

pub(super) fn queue(id: u32, pools: Vec<Pool>) -> RxQueue {
    RxQueue {
        id,
        pools,
        ..RxQueue::default()
    }
}

pub(super) fn device(name: &str, rx_queues: Vec<RxQueue>, unmapped: Vec<Pool>) -> Device {
    Device {
        ifindex: 2,
        name: name.to_owned(),
        rx_queues,
        unmapped_pools: unmapped,
        ..Device::default()
    }
}
