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
use pptune_policy::fixtures::{self, Nic, QueueCounters};
use pptune_policy::observer::Pass;
use pptune_policy::policy::{ChannelPolicy, Disruption, DisruptionClass, MemoryBudget, Timing};
use pptune_policy::snapshot::{PoolStats, QueueStats, Snapshot};
use pptune_policy::{EngineState, Observation, Policy, decide};

const INTERVAL: Duration = Duration::from_secs(10);

/// The shipped defaults' shape (config/src/default.yaml) from the fixture
/// policy: the policy crate cannot depend on the config crate.
fn policy() -> Policy {
    let base = fixtures::policy();
    Policy {
        timing: Timing {
            interval: INTERVAL,
            window: Duration::from_secs(30),
            ..base.timing
        },
        channels: ChannelPolicy {
            enabled: true,
            ..base.channels
        },
        budget: MemoryBudget {
            per_host_bytes: Some(64 << 30),
            ..base.budget
        },
        disruption: Disruption {
            allowed_while_up: vec![DisruptionClass::Brief, DisruptionClass::Restart],
            ..base.disruption
        },
        ..base
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
            let bursty = d % 3 == 0;
            Nic::pci(d, "ice", queues).device(|q| QueueCounters {
                qstats: QueueStats {
                    rx_packets: Some((tick + 1) * 200_000),
                    rx_bytes: Some((tick + 1) * 200_000 * 1500),
                    rx_alloc_fail: Some(0),
                    rx_hw_drops: Some(if bursty { tick * 50 } else { 0 }),
                    rx_hw_drop_overruns: None,
                },
                pool: counters(bursty, tick, u64::from(q)),
                inflight: 1024,
            })
        })
        .collect();
    fixtures::snapshot(tick * 10_000, "7.3.4", devices)
}

fn obs<'a>(
    prev: Option<&'a Snapshot>,
    cur: &'a Snapshot,
    deltas: &'a PassDeltas,
    tick: u64,
) -> Observation<'a> {
    Observation {
        pass: Pass {
            previous: prev,
            current: cur,
            deltas,
            elapsed: INTERVAL,
            now: INTERVAL * u32::try_from(tick).unwrap(),
        },
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
