//! `policy::decide` at 10,000 pools: 100 devices × 100 RX queues, one pool
//! per queue, synthesised (no I/O in the engine, so no kernel is needed).
//!
//! Traffic: a third of the devices see bursty returns larger than their
//! ring (recycle misses and slow refills: the grow finding), the rest are
//! calm. The engine state is warmed up by a few ticks first, so the
//! measured call is a steady-state tick (open windows, streaks), not the
//! first one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench file

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pptune_policy::accounting::PassDeltas;
use pptune_policy::policy::{
    ChangeLimits, ChannelPolicy, DaemonSettings, Disruption, DisruptionClass, MemoryBudget,
    RingPolicy, Rounding, Selector, Thresholds, Timing,
};
use pptune_policy::snapshot::{
    Availability, Capabilities, Channels, Device, DeviceId, OperState, Pool, PoolStats, QueueStats,
    Rings, RxQueue, Snapshot,
};
use pptune_policy::{EngineState, Mode, Observation, OnStop, Policy, decide};

const INTERVAL: Duration = Duration::from_secs(10);

/// The shipped defaults' shape (config/src/default.yaml), built directly:
/// the policy crate cannot depend on the config crate.
fn policy() -> Policy {
    Policy {
        mode: Mode::Enforce,
        selectors: vec![Selector {
            require_pools: true,
            ..Selector::default()
        }],
        timing: Timing {
            interval: INTERVAL,
            window: Duration::from_secs(30),
            windows_for_finding: 2,
            cooldown: Duration::from_secs(300),
            evaluation: Duration::from_secs(120),
            calm_before_shrink: Duration::from_secs(3600),
        },
        thresholds: Thresholds {
            grow_recycle_miss: 0.05,
            grow_slow_refill: 0.25,
            shrink_recycle_miss: 0.005,
            min_pages_per_window: 1000,
        },
        rings: RingPolicy {
            enabled: true,
            min: 64,
            max: 16384,
            rounding: Rounding::Auto,
            max_steps_to_target: 2,
            headroom: 1.25,
            shrink_when_calm: true,
        },
        channels: ChannelPolicy {
            enabled: true,
            min: 1,
            max: 256,
            grow_on_drops_when_healthy: true,
            shrink_when_contended: true,
            step: 2,
            grow_drop_share: 0.001,
            trial_gain: 0.05,
        },
        budget: MemoryBudget {
            per_device_bytes: None,
            per_host_bytes: Some(64 << 30),
        },
        limits: ChangeLimits {
            max_changes_per_hour: 6,
            windows: vec![],
            one_bond_member_at_a_time: true,
        },
        disruption: Disruption {
            drivers: vec![],
            default_class: DisruptionClass::Restart,
            allowed_while_up: vec![DisruptionClass::Brief, DisruptionClass::Restart],
        },
        on_stop: OnStop::Keep,
        coexist: pptune_policy::Coexist::Defer,
        rollout: None,
        daemon: DaemonSettings {
            metrics_listen: None,
            metrics_web_config: None,
            queue_series: pptune_policy::policy::QueueSelection::All,
            recording_max_bytes: pptune_policy::policy::DEFAULT_RECORDING_MAX_BYTES,
        },
    }
}

/// Counters of one pool after `tick` intervals.
fn counters(bursty: bool, tick: u64, q: u64) -> PoolStats {
    let t = tick + 1;
    if bursty {
        // 2048-page bursts into a 256-entry ring: most returns miss.
        PoolStats {
            alloc_fast: t * 200_000 + q,
            alloc_slow: t * 2_700,
            alloc_empty: t * 2_700,
            alloc_refill: t * 400,
            recycle_ring: t * 25_000,
            recycle_ring_full: t * 175_000,
            recycle_cached: t * 1_000,
            ..PoolStats::default()
        }
    } else {
        PoolStats {
            alloc_fast: t * 200_000 + q,
            alloc_refill: t * 3_000,
            recycle_ring: t * 150_000,
            recycle_cached: t * 50_000,
            ..PoolStats::default()
        }
    }
}

fn snapshot(devices: u32, queues: u32, tick: u64) -> Snapshot {
    let devices = (0..devices)
        .map(|d| {
            let ifindex = d + 2;
            let bursty = d % 3 == 0;
            Device {
                ifindex,
                name: format!("eth{d}"),
                id: DeviceId {
                    bus: Some("pci".into()),
                    parent: Some(format!("0000:{:02x}:00.0", d)),
                    perm_addr: Some(format!("0c:42:a1:00:{:02x}:{:02x}", d / 256, d % 256)),
                    name_fallback: None,
                },
                driver: Some("ice".into()),
                oper_state: OperState::Up,
                admin_up: true,
                mtu: Some(1500),
                rings: Availability::Available(Rings {
                    rx: Some(256),
                    rx_max: Some(8192),
                    tx: Some(256),
                    tx_max: Some(8192),
                    ..Rings::default()
                }),
                channels: Availability::Available(Channels {
                    combined: Some(queues),
                    combined_max: Some(256),
                    ..Channels::default()
                }),
                rx_queues: (0..queues)
                    .map(|q| RxQueue {
                        id: q,
                        napi_id: Some(d * 1000 + q + 8192),
                        provider: None,
                        qstats: Some(QueueStats {
                            rx_packets: Some((tick + 1) * 200_000),
                            rx_bytes: Some((tick + 1) * 200_000 * 1500),
                            rx_alloc_fail: Some(0),
                            rx_hw_drops: Some(if bursty { tick * 50 } else { 0 }),
                            rx_hw_drop_overruns: None,
                        }),
                        pools: vec![Pool {
                            id: u64::from(d * queues + q + 1),
                            ifindex: Some(ifindex),
                            napi_id: Some(u64::from(d * 1000 + q + 8192)),
                            inflight: Some(1024),
                            inflight_mem: Some(1024 * 4096),
                            stats: Some(counters(bursty, tick, u64::from(q))),
                            ..Pool::default()
                        }],
                    })
                    .collect(),
                ..Device::default()
            }
        })
        .collect();
    Snapshot {
        taken_at_ms: tick * 10_000,
        capabilities: Capabilities {
            kernel_release: "7.3.4".into(),
            netdev_family: true,
            page_pool_get: true,
            page_pool_stats: true,
            queue_get: true,
            napi_get: true,
            qstats_get: true,
            ethtool_family: true,
            cap_net_admin: true,
        },
        devices,
        orphan_pools: vec![],
    }
}

fn obs<'a>(
    prev: Option<&'a Snapshot>,
    cur: &'a Snapshot,
    deltas: &'a PassDeltas,
    tick: u64,
) -> Observation<'a> {
    Observation {
        previous: prev,
        current: cur,
        deltas,
        elapsed: INTERVAL,
        now: INTERVAL * u32::try_from(tick).unwrap(),
        local_time: None,
        history: &[],
        overrides: &[],
        originals: &[],
        backoff: &pptune_policy::engine::NO_BACKOFF,
    }
}

fn bench(c: &mut Criterion) {
    let policy = policy();
    let mut g = c.benchmark_group("decide");
    for (devices, queues) in [(16u32, 128u32), (100, 100)] {
        let pools = u64::from(devices * queues);
        // Warm the engine state over a few ticks.
        let snaps: Vec<Snapshot> = (0..4).map(|t| snapshot(devices, queues, t)).collect();
        let mut state = EngineState::default();
        let mut plan = None;
        for t in 1..3 {
            let deltas = PassDeltas::of(Some(&snaps[t - 1]), &snaps[t]);
            let (p, s) = decide(
                &policy,
                &state,
                &obs(Some(&snaps[t - 1]), &snaps[t], &deltas, t as u64),
            );
            state = s;
            plan = Some(p);
        }
        // Sanity: the engine saw every device (a bench of an engine that
        // skipped them measures nothing).
        let plan = plan.unwrap();
        assert_eq!(
            plan.decisions.len(),
            usize::try_from(devices).unwrap(),
            "{plan:?}"
        );
        g.throughput(Throughput::Elements(pools));
        g.bench_with_input(
            BenchmarkId::new(format!("{devices}x{queues}"), pools),
            &(&snaps, &state),
            |b, (snaps, state)| {
                // The pass's deltas are part of the work a pass does.
                b.iter(|| {
                    let deltas = PassDeltas::of(Some(&snaps[2]), &snaps[3]);
                    decide(
                        &policy,
                        state,
                        &black_box(obs(Some(&snaps[2]), &snaps[3], &deltas, 3)),
                    )
                });
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
