//! `/metrics` render at 2048 pools: `Metrics::observe` (what the
//! loop does after every sample) followed by `Metrics::encode` (what a
//! scrape does), timed together and apart.
//!
//! The snapshot is the one `benches/observe-cost.sh` RECORDED in the VM at
//! 2048 pools (`benches/results/vm-snapshot-2048.json`, netdevsim devices,
//! kernel 7.3) when that file exists, or `$PPTUNE_BENCH_SNAPSHOT`; otherwise
//! a SYNTHESISED one of the same shape (16 devices × 128 queues, one pool
//! each, every counter filled). The bench prints which one it used.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench file

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use policy::accounting::PassDeltas;
use policy::fixtures::{self, Nic, QueueCounters};
use policy::snapshot::{PoolStats, QueueStats, Snapshot};
use pptune::cmd::status::Report;
use pptune::publish::metrics::Metrics;

const RECORDED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../benches/results/vm-snapshot-2048.json"
);

fn synthesised(devices: u32, queues: u32, tick: u64) -> Snapshot {
    let t = tick + 1;
    let devices = (0..devices)
        .map(|d| {
            Nic::netdevsim(d, queues).device(|_| QueueCounters {
                qstats: QueueStats {
                    rx_packets: Some(t * 1000),
                    rx_bytes: Some(t * 1_500_000),
                    rx_alloc_fail: Some(0),
                    rx_hw_drops: Some(t),
                    rx_hw_drop_overruns: None,
                },
                pool: PoolStats {
                    alloc_fast: t * 100_000,
                    alloc_slow: t * 100,
                    alloc_empty: t * 100,
                    alloc_refill: t * 1_500,
                    recycle_cached: t * 20_000,
                    recycle_cache_full: t,
                    recycle_ring: t * 70_000,
                    recycle_ring_full: t * 10_000,
                    recycle_released_refcnt: t,
                    ..PoolStats::default()
                },
                inflight: 512,
            })
        })
        .collect();
    fixtures::snapshot(tick * 10_000, "7.3.4", devices)
}

/// The recorded snapshot with every counter advanced, so the second
/// observation computes ratios like a real second sample.
fn advanced(s: &Snapshot) -> Snapshot {
    let mut s = s.clone();
    s.taken_at_ms += 10_000;
    for d in &mut s.devices {
        for q in &mut d.rx_queues {
            for p in &mut q.pools {
                if let Some(st) = &mut p.stats {
                    st.alloc_fast += 100_000;
                    st.alloc_refill += 1_500;
                    st.recycle_ring += 70_000;
                    st.recycle_ring_full += 10_000;
                    st.recycle_cached += 20_000;
                    st.alloc_slow += 100;
                }
            }
        }
    }
    s
}

fn pools(s: &Snapshot) -> u64 {
    s.devices.iter().map(|d| d.pools().count() as u64).sum()
}

fn bench(c: &mut Criterion) {
    let path = std::env::var("PPTUNE_BENCH_SNAPSHOT").unwrap_or_else(|_| RECORDED.to_owned());
    let (what, first) = match std::fs::read(&path) {
        Ok(b) => (
            format!("recorded in the VM ({path})"),
            serde_json::from_slice::<Snapshot>(&b).unwrap(),
        ),
        Err(_) => (
            "synthesised (16 devices x 128 queues)".to_owned(),
            synthesised(16, 128, 0),
        ),
    };
    let second = advanced(&first);
    let n = pools(&first);
    eprintln!("render: snapshot {what}: {n} pools");

    let mut g = c.benchmark_group("metrics");
    g.throughput(Throughput::Elements(n));
    let m = Metrics::new();
    // The passes' deltas are the loop's, computed once before the metrics
    // read them: not part of the metrics' cost.
    let (d1, d2) = (
        PassDeltas::of(None, &first),
        PassDeltas::of(Some(&first), &second),
    );
    m.observe(&first, &d1);
    let text = m.encode().unwrap();
    eprintln!(
        "render: exposition {} bytes, {} lines",
        text.len(),
        text.lines().count()
    );
    assert!(
        text.contains("pptune_pools"),
        "render produced no pool series"
    );
    g.bench_with_input(BenchmarkId::new("observe+encode", n), &second, |b, s| {
        b.iter(|| {
            m.observe(black_box(s), &d2);
            m.encode().unwrap()
        });
    });
    g.bench_with_input(BenchmarkId::new("encode", n), &m, |b, m| {
        b.iter(|| m.encode().unwrap());
    });
    g.bench_with_input(BenchmarkId::new("observe", n), &second, |b, s| {
        b.iter(|| m.observe(black_box(s), &d2));
    });
    g.finish();

    // What `pptune status --json` does after its sampling pass: build the
    // report, serialize it.
    let mut g = c.benchmark_group("status");
    g.throughput(Throughput::Elements(n));
    g.bench_with_input(BenchmarkId::new("build", n), &first, |b, s| {
        b.iter(|| Report::build(black_box(s), Some(1_000), Vec::new()));
    });
    let report = Report::build(&first, Some(1_000), Vec::new());
    g.bench_with_input(BenchmarkId::new("json", n), &report, |b, r| {
        b.iter(|| serde_json::to_string_pretty(black_box(r)).unwrap());
    });
    g.bench_with_input(BenchmarkId::new("json-compact", n), &report, |b, r| {
        b.iter(|| serde_json::to_string(black_box(r)).unwrap());
    });
    g.finish();

    // This host is shared and loaded: criterion's wall times include time
    // spent waiting for a CPU. Also report process CPU time per render.
    #[allow(clippy::cast_precision_loss)] // seconds and nanoseconds of CPU time
    let cpu = || {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
            .map_or(0.0, |t| t.tv_sec() as f64 * 1e3 + t.tv_nsec() as f64 / 1e6)
    };
    let runs = 20;
    let t0 = cpu();
    for _ in 0..runs {
        m.observe(black_box(&second), &d2);
        black_box(m.encode().unwrap());
    }
    let both = (cpu() - t0) / f64::from(runs);
    let t0 = cpu();
    for _ in 0..runs {
        black_box(m.encode().unwrap());
    }
    let enc = (cpu() - t0) / f64::from(runs);
    println!(
        "{{\"bench\":\"metrics-cpu\",\"pools\":{n},\"snapshot\":\"{what}\",\"observe_encode_cpu_ms\":{both:.2},\"encode_cpu_ms\":{enc:.2},\"exposition_bytes\":{}}}",
        text.len()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
