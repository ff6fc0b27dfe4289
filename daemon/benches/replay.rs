//! `pptune replay` of a day: a recording synthesised at 2048 pools (16
//! devices × 128 RX queues, one pool each) and a 10 s interval (8640
//! passes), written with the daemon's writer, then replayed under an
//! enforce policy (the counterfactual path: simulated changes, the ring
//! model on every changed device). Prints the recording's size, the time
//! to write it and the time to replay it (BENCHMARKS.md, "Replay").
//!
//! `cargo bench -p pptune --bench replay` (`REPLAY_HOURS=1` for a shorter
//! run; `REPLAY_JSON=FILE` writes the replay's report there).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench binary
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::time::Duration;

use policy::Mode;
use policy::fixtures::{self, Nic, QueueCounters};
use policy::snapshot::{Device, DeviceId, PoolStats, QueueStats, Rings, Snapshot};
use pptune::record::Recorder;
use pptune::record::format::{Inputs, Pass, nanos};
use tokio::time::Instant;

const DEVICES: u32 = 16;
const QUEUES: u32 = 128;
const INTERVAL: Duration = Duration::from_secs(10);

/// The process's CPU time so far (user + system, every thread: the replay
/// reads on a second thread): on a shared machine the wall clock also
/// counts other jobs' time.
fn cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_SELF).unwrap();
    let d = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    d(u.user_time()) + d(u.system_time())
}

/// A small deterministic generator: varied deltas, as real traffic has.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

fn device(d: u32, pools: &[PoolStats], qstats: &[QueueStats], inflight: &[u64]) -> Device {
    let pci = Nic::pci(d, "mlx5_core", QUEUES);
    let nic = Nic {
        id: DeviceId {
            parent: Some(format!("0000:{:02x}:00.0", d + 0x10)),
            ..pci.id
        },
        rings: Rings {
            rx: Some(512),
            tx: Some(1024),
            ..pci.rings
        },
        channels_max: QUEUES,
        first_napi: d * QUEUES + 8192,
        ..pci
    };
    Device {
        num_rx_queues: Some(QUEUES),
        ..nic.device(|q| {
            let i = q as usize;
            QueueCounters {
                qstats: qstats[i],
                pool: pools[i],
                inflight: inflight[i],
            }
        })
    }
}

fn main() {
    let hours: u64 = std::env::var("REPLAY_HOURS")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(24);
    let passes = hours * 3600 / INTERVAL.as_secs();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("day.pptrec");
    let n = (DEVICES * QUEUES) as usize;
    let mut pools = vec![PoolStats::default(); n];
    let mut qstats = vec![
        QueueStats {
            rx_packets: Some(0),
            rx_bytes: Some(0),
            rx_alloc_fail: Some(0),
            rx_hw_drops: Some(0),
            rx_hw_drop_overruns: Some(0),
        };
        n
    ];
    let mut inflight = vec![512_u64; n];
    let mut rng = Lcg(42);
    let mut rec = Recorder::single(&path, pptune::VERSION);
    let mut prev: Option<(Snapshot, Duration)> = None;
    let t0 = Instant::now();
    let c0 = cpu();
    for i in 0..passes {
        for (k, p) in pools.iter_mut().enumerate() {
            let dev = k / QUEUES as usize;
            // A third of the devices see return bursts over their ring.
            let bursty = dev.is_multiple_of(3);
            let pkts = 20_000 + rng.next(10_000);
            p.alloc_fast += pkts;
            p.alloc_slow += if bursty {
                40 + rng.next(20)
            } else {
                rng.next(3)
            };
            p.alloc_refill += pkts / 64;
            p.recycle_cached += pkts / 2;
            p.recycle_ring += pkts / 2 - if bursty { 900 + rng.next(300) } else { 0 };
            p.recycle_ring_full += if bursty {
                900 + rng.next(300)
            } else {
                rng.next(2)
            };
            let q = &mut qstats[k];
            q.rx_packets = q.rx_packets.map(|v| v + pkts);
            q.rx_bytes = q.rx_bytes.map(|v| v + pkts * 1400);
            inflight[k] = 480 + rng.next(64);
        }
        let devices = (0..DEVICES)
            .map(|d| {
                let r = (d * QUEUES) as usize..((d + 1) * QUEUES) as usize;
                device(d, &pools[r.clone()], &qstats[r.clone()], &inflight[r])
            })
            .collect();
        let snap = fixtures::snapshot(i * INTERVAL.as_millis() as u64, "7.3.0", devices);
        let now = INTERVAL * u32::try_from(i).unwrap();
        rec.write(
            || None,
            prev.as_ref().map(|(s, t)| (s, *t)),
            &snap,
            |snapshot| Pass {
                unix_ms: 1_764_460_800_000 + nanos(now) / 1_000_000,
                now_ns: nanos(now),
                elapsed_ns: if i == 0 { 0 } else { nanos(INTERVAL) },
                local_time: Some((0, u16::try_from((i * 10 / 60) % 1440).unwrap())),
                snapshot,
                inputs: Inputs::default(),
                decisions: Vec::new(),
                changes: Vec::new(),
            },
        )
        .unwrap();
        prev = Some((snap, now));
    }
    let write = t0.elapsed();
    let write_cpu = cpu() - c0;
    let size = std::fs::metadata(&path).unwrap().len();
    let mut policy = config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap();
    policy.mode = Mode::Enforce;
    for s in &mut policy.selectors {
        s.mode = Some(Mode::Enforce);
    }
    // Reading alone (inflate, CBOR, the snapshot block into one reused
    // buffer), to tell the format's share from the engine's.
    let t1 = Instant::now();
    let c1 = cpu();
    let mut reader = pptune::record::Recording::open(&path).unwrap();
    let mut buf = Snapshot::default();
    let mut read_passes = 0_u64;
    while let Some(item) = reader.next_into(&mut buf) {
        if matches!(item, pptune::record::Next::Pass(_)) {
            read_passes += 1;
        }
    }
    let read = t1.elapsed();
    let read_cpu = cpu() - c1;
    assert_eq!(read_passes, passes);
    let t1 = Instant::now();
    let c1 = cpu();
    let report = pptune::replay::replay(&path, &policy).unwrap();
    let replay = t1.elapsed();
    let replay_cpu = cpu() - c1;
    // The whole report, to compare two builds' replays of the same history.
    if let Ok(out) = std::env::var("REPLAY_JSON") {
        std::fs::write(out, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    }
    assert_eq!(report.passes, passes);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let modelled = report
        .decisions
        .iter()
        .filter(|d| d.basis == pptune::replay::Basis::Modelled)
        .count();
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / passes as f64;
    println!(
        "replay bench: {hours} h, {passes} passes x {n} pools: recording {:.1} MiB ({:.0} bytes/pass); \
         write {:.2} s ({:.3} ms/pass, CPU {:.3}); read alone {:.2} s ({:.3} ms/pass, CPU {:.3}); \
         replay {:.2} s ({:.3} ms/pass, CPU {:.3} ms/pass); {} changes ({modelled} modelled)",
        size as f64 / f64::from(1 << 20),
        size as f64 / passes as f64,
        write.as_secs_f64(),
        per(write),
        per(write_cpu),
        read.as_secs_f64(),
        per(read),
        per(read_cpu),
        replay.as_secs_f64(),
        per(replay),
        per(replay_cpu),
        report.decisions.len(),
    );
}
