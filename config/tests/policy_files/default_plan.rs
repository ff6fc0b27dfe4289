//! The embedded default policy driven through the engine: `pptune plan`
//! takes `findings_needed` samples, and the last one must carry the finding.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use policy::snapshot::{
    Availability, Capabilities, Device, DeviceId, OperState, Pool, PoolStats, QueueStats, Rings,
    RxQueue, Snapshot,
};
use policy::{Action, EngineState, Mode, Observation, ReasonCode, decide, findings_needed};

fn snapshot(k: u64) -> Snapshot {
    // ice, rx 512: bursts of 2048 pages, 20 per interval, into a 512 ring.
    let per = PoolStats {
        alloc_fast: 40_960,
        alloc_refill: 160,
        alloc_slow: 480,
        recycle_ring: 10_240,
        recycle_ring_full: 30_720,
        recycle_cached: 500,
        ..PoolStats::default()
    };
    let stats = PoolStats {
        alloc_fast: per.alloc_fast * k,
        alloc_refill: per.alloc_refill * k,
        alloc_slow: per.alloc_slow * k,
        recycle_ring: per.recycle_ring * k,
        recycle_ring_full: per.recycle_ring_full * k,
        recycle_cached: per.recycle_cached * k,
        ..PoolStats::default()
    };
    Snapshot {
        taken_at_ms: k * 10_000,
        capabilities: Capabilities {
            page_pool_stats: true,
            ..Capabilities::default()
        },
        devices: vec![Device {
            ifindex: 2,
            name: "eth0".into(),
            id: DeviceId {
                bus: Some("pci".into()),
                parent: Some("0000:3b:00.0".into()),
                perm_addr: Some("0c:42:a1:00:00:01".into()),
                name_fallback: None,
            },
            driver: Some("ice".into()),
            oper_state: OperState::Up,
            rings: Availability::Available(Rings {
                rx: Some(512),
                rx_max: Some(8160),
                ..Rings::default()
            }),
            rx_queues: vec![RxQueue {
                id: 0,
                napi_id: Some(1),
                qstats: Some(QueueStats {
                    rx_hw_drops: Some(k * 10),
                    rx_packets: Some(k * 50_000),
                    ..QueueStats::default()
                }),
                pools: vec![Pool {
                    id: 7,
                    ifindex: Some(2),
                    napi_id: Some(1),
                    inflight: Some(1000),
                    inflight_mem: Some(4_096_000),
                    stats: Some(stats),
                    ..Pool::default()
                }],
                ..RxQueue::default()
            }],
            ..Device::default()
        }],
        orphan_pools: vec![],
    }
}

/// The decisions of `policy` on `samples` samples of the bursty NIC.
fn run(policy: &policy::Policy, samples: u32) -> Vec<policy::Decision> {
    let mut state = EngineState::default();
    let mut observer = policy::observer::Observer::default();
    let mut out = Vec::new();
    for k in 1..=u64::from(samples) {
        let cur = snapshot(k);
        let now = policy.timing.interval * u32::try_from(k).unwrap();
        let obs = Observation {
            pass: observer.next(&cur, now),
            local_time: None,
            history: &[],
            overrides: &[],
            originals: &[],
            backoff: &policy::engine::NO_BACKOFF,
        };
        let (plan, next) = decide(policy, &state, &obs);
        state = next;
        out.push(plan.decisions[0].clone());
        observer.keep(cur, now);
    }
    out
}

/// The bursty NIC frees three quarters of its returns: a severe miss. The
/// shipped default grows the ring on the second sample that shows it (the
/// third sample: the first has no rate), not after three windows.
#[test]
fn default_policy_acts_on_a_severe_miss_at_its_second_sample() {
    let policy = pptune_config::default_policy().unwrap();
    assert_eq!(
        (
            policy.thresholds.severe_recycle_miss,
            policy.thresholds.severe_samples
        ),
        (0.2, 2)
    );
    let d = run(&policy, 3);
    assert!(d[..2].iter().all(|d| d.action == Action::Hold), "{d:?}");
    assert!(
        matches!(
            d[2].action,
            Action::SetRing {
                from: 512,
                to: 2560,
                ..
            }
        ),
        "{:?}",
        d[2]
    );
    assert!(d[2].message.contains("a severe miss"), "{}", d[2].message);
}

/// With the early path off, the finding takes the windows `pptune plan`
/// announces.
#[test]
fn default_policy_reaches_a_finding_in_the_announced_samples() {
    let mut policy = pptune_config::default_policy().unwrap();
    policy.thresholds.severe_samples = 0;
    let (samples, span) = findings_needed(&policy);
    assert_eq!((samples, span), (10, Duration::from_secs(90)));
    let all = run(&policy, samples);
    let (d, before) = all.split_last().unwrap();
    assert!(
        before.iter().all(|d| d.action == Action::Hold),
        "{before:?}"
    );
    assert_eq!(d.reason, ReasonCode::RecycleMissHigh, "{d:?}");
    assert_eq!(d.mode, Mode::Observe, "the default only observes");
    // 512 × (1 + 30720/10240) = 2048-page bursts, × 1.25 = 2560.
    assert!(
        matches!(
            d.action,
            Action::SetRing {
                from: 512,
                to: 2560,
                ..
            }
        ),
        "{d:?}"
    );
    assert!(
        d.message.contains("too small for return bursts"),
        "{}",
        d.message
    );
}
