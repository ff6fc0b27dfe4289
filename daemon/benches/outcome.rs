//! Tuning outcome against static settings, in the VM with ppsim.
//!
//! Not a criterion bench: `benches/outcome.sh` runs the built binary inside
//! the 7.3 test VM (ppsim loaded from `PPTUNE_PPSIM_KO`):
//!
//! ```text
//! outcome-<hash> --pptune PATH --policy FILE [--preset zonelock] [--queues 2]
//!     [--static-secs 8] [--enforce-secs 100] [--rounds 2] [--window-secs 3]
//!     [--sweep 256,512,1024,2048,4096,8192,16384] [--workloads bursty-1500,steady,...]
//!     [--channels-policy FILE] [--warmup-secs 1] [--naive-secs S] [--quiet-secs Q]
//! ```
//!
//! `--static-secs` and `--warmup-secs` take fractions of a second.
//!
//! The queue workloads (`queues-*`) sweep (ring, queues) pairs over their
//! own rings and 1, 2, 4, 6, 8, 16 queues, and start the naive tuner and
//! pptune from 16 queues at the default ring; pptune then runs with
//! `--channels-policy` (the same policy with channel changes enabled).
//!
//! For each workload: a static sweep (a fresh ppsim device per ring size,
//! measured after a warm-up; `--rounds` interleaved rounds over the sweep)
//! gives the default ring (256), the maximum (16384, ppsim's rx-max) and the
//! best static ring; then a fresh device at the default ring runs under the
//! **naive tuner** (grow the ring by 25 % after every `--window-secs` window
//! whose ring_full share is at or above the policy's grow threshold, 5 %:
//! the rule generic tuners use), and another under `pptune run` in enforce
//! mode; both are watched every second (ring, goodput) until
//! `--enforce-secs` (the naive tuner until `--naive-secs`, default the same), and their last `--static-secs` are measured like a
//! static point. With `--quiet-secs Q` the pptune run ends earlier, once
//! it has made no change for Q seconds (counted from its last change, or
//! from the start when it made none), and is then measured: Q is chosen
//! to cover everything pptune does about its own change (the bench
//! policy's cooldown + evaluation), and for the settle check it is the
//! ten minutes the target asks for. The line carries `daemon_run_s`, how
//! long the run was watched in all. Every window carries ppsim's modelled goodput beside the
//! wall figure (tests/ppsim/README.md): the figure the targets are judged
//! on. One JSON line per
//! measurement on stdout. ppsim is driven with the testbed's own helper
//! (`pptune_tests::ppsim`, so both use the same calls);
//! pool counters come from page-pool-stats over netlink and the shares are
//! `policy::signals`'.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench binary
#![allow(clippy::disallowed_types)] // wall-clock timing of a bench run

#[path = "shared/vm_outcome.rs"]
mod shared;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netlink::Client;
use policy::signals::{recycle_miss_share, slow_refill_share};
use pptune_tests::pools::{attached_inflight_mem, attached_pools, set_rx_ring, stats_of};
use pptune_tests::ppsim::{CostPreset, Knobs, Ppsim, PpsimDev};
use shared::{Daemon, GROW_AT, arg, naive_next};

#[derive(Debug, Clone, Copy)]
struct Workload {
    name: &'static str,
    burst: u32,
    rate_pps: u32,
    hold_us: u32,
    running: bool,
    /// % of returned pages the stack still references (0: none).
    stack_ref_pct: u32,
    /// For the queue workloads: the cost model (slow and release cost,
    /// µs, contention %, line rate) instead of the preset's, the rings
    /// and queue counts swept; the runs start from the largest count.
    queues: Option<QueueCase>,
}

#[derive(Debug, Clone, Copy)]
struct QueueCase {
    cost_us: u32,
    contention_pct: u32,
    line_pps: u32,
    /// ppsim's paced delivery (0 = off): the kernel's rx-packets rate
    /// follows the modelled figure / this (tests/ppsim/README.md "Paced
    /// delivery"), for the workload whose queue cuts pptune judges on it.
    pace_scale: u32,
    rings: &'static [u32],
    counts: &'static [u32],
}

/// The queue-count anchor (tests/ppsim/README.md "Queue count"): the zone
/// lock's uncontended cost per bulk (6 µs, the zonelock preset's own
/// calibration before contention), 44 % more per other queue on the slow
/// path (goodput at the default ring peaks at 6 queues and falls to 0.69
/// of that at 16, the field report's 63.6 → 43.3 Gbit/s), and a line rate
/// of 3.4 Mpps (the peak is 0.68 of it, as 63.6 is of 94 Gbit/s).
const QUEUE_COUNTS: &[u32] = &[1, 2, 4, 6, 8, 16];
const CONTENDED: QueueCase = QueueCase {
    cost_us: 6,
    contention_pct: 44,
    line_pps: 3_400_000,
    pace_scale: 0,
    rings: &[256, 2048],
    counts: QUEUE_COUNTS,
};

const fn bursty(name: &'static str, burst: u32) -> Workload {
    Workload {
        name,
        burst,
        rate_pps: 0,
        hold_us: 0,
        running: true,
        stack_ref_pct: 0,
        queues: None,
    }
}

const WORKLOADS: &[Workload] = &[
    // Bursty returns, as fast as the VM goes, at burst sizes that are not
    // powers of two (300 fits the default ring: nothing to tune).
    bursty("bursty-300", 300),
    bursty("bursty-1500", 1500),
    bursty("bursty-2500", 2500),
    bursty("bursty-6000", 6000),
    bursty("bursty-10000", 10000),
    // The sizes earlier runs used (benches/results/outcome-model.md).
    bursty("bursty-2k", 2048),
    bursty("bursty-8k", 8192),
    // Bursty at a fixed arrival rate (per queue): the ring buffers arrivals,
    // so a slow path that misses its budget turns into drops.
    Workload {
        name: "bursty-1k-100kpps",
        burst: 1024,
        rate_pps: 100_000,
        hold_us: 1000,
        running: true,
        stack_ref_pct: 0,
        queues: None,
    },
    // Held pages (untunable): every returned page is still referenced by
    // the stack, so the pool releases it and refills from the slow path
    // whatever its ring size; no ring_full. Target: no ring growth.
    Workload {
        name: "held",
        burst: 64,
        rate_pps: 0,
        hold_us: 0,
        running: true,
        stack_ref_pct: 100,
        queues: None,
    },
    // The queue-count case: bursts past the default ring, the slow path
    // contended. Fewer queues help at the default ring, a bigger ring
    // helps more (line rate from 4 queues up).
    Workload {
        name: "queues-contended",
        burst: 1500,
        rate_pps: 0,
        hold_us: 0,
        running: true,
        stack_ref_pct: 0,
        queues: Some(CONTENDED),
    },
    // Held pages with the same contention: the ring cannot help, fewer
    // queues do. pptune judges each queue cut on the delivered rate
    // (qstats rx-packets), so ppsim paces delivery to the model (1/50:
    // ~63 k pages/s at the peak, which one TCG vCPU keeps up with).
    Workload {
        name: "queues-held",
        burst: 64,
        rate_pps: 0,
        hold_us: 0,
        running: true,
        stack_ref_pct: 100,
        queues: Some(QueueCase {
            pace_scale: 50,
            ..CONTENDED
        }),
    },
    // Uncontended slow path (no line rate): fewer queues never help.
    Workload {
        name: "queues-uncontended",
        burst: 1500,
        rate_pps: 0,
        hold_us: 0,
        running: true,
        stack_ref_pct: 0,
        queues: Some(QueueCase {
            contention_pct: 0,
            line_pps: 0,
            ..CONTENDED
        }),
    },
    // Steady: pages come back one small bulk at a time; the default ring is enough.
    Workload {
        name: "steady",
        burst: 64,
        rate_pps: 0,
        hold_us: 0,
        running: true,
        stack_ref_pct: 0,
        queues: None,
    },
    // Idle: no traffic at all.
    Workload {
        name: "idle",
        burst: 64,
        rate_pps: 0,
        hold_us: 0,
        running: false,
        stack_ref_pct: 0,
        queues: None,
    },
];

async fn rx_ring(c: &Client, ifx: u32) -> u32 {
    c.rings(ifx, None).await.unwrap().rx.unwrap_or(0)
}

#[derive(Debug, Default)]
struct Window {
    goodput_pps: f64,
    /// ppsim's modelled goodput over the same window.
    modelled_pps: f64,
    /// ppsim's modelled capacity (no arrival-rate bound) over the window.
    capacity_pps: f64,
    dropped_pps: f64,
    ring_full_share: f64,
    slow_share: f64,
    inflight_mem: u64,
    ring: u32,
    queues: u64,
}

/// Measure `secs` of the device as it is (ring must not change meanwhile).
#[allow(clippy::cast_precision_loss)] // rates from counters far below 2^52
async fn window(c: &Client, d: &PpsimDev, secs: f64) -> Window {
    let ifx = d.ifindex().unwrap();
    let ids = attached_pools(c, ifx).await.unwrap();
    let s0 = stats_of(c, &ids).await.unwrap();
    let g0 = d.goodput().unwrap();
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    let s1 = stats_of(c, &ids).await.unwrap();
    let g1 = d.goodput().unwrap();
    let mem = attached_inflight_mem(c, ifx).await.unwrap();
    let delta = s1.delta(&s0).unwrap_or_default();
    let dt = (g1.now_ns.saturating_sub(g0.now_ns)) as f64 / 1e9;
    Window {
        goodput_pps: g1.pps_since(&g0),
        modelled_pps: g1.modelled_pps_since(&g0),
        capacity_pps: g1.capacity_pps_since(&g0),
        dropped_pps: g1.dropped.saturating_sub(g0.dropped) as f64 / dt.max(1e-9),
        ring_full_share: recycle_miss_share(&delta).unwrap_or(0.0),
        slow_share: slow_refill_share(&delta, false).unwrap_or(0.0),
        inflight_mem: mem,
        ring: rx_ring(c, ifx).await,
        queues: g1.queues,
    }
}

fn device(p: &Ppsim, queues: u32, w: &Workload, knobs: &Knobs) -> PpsimDev {
    let d = p.new_device(queues).unwrap();
    let _ = w;
    d.set_knobs(knobs).unwrap();
    d
}

/// Stop a device's traffic and delete it.
fn retire(d: PpsimDev, w: &Workload) {
    if w.running {
        d.stop().unwrap();
    }
    d.delete().unwrap();
}

fn line(kind: &str, w: &Workload, config: &str, m: &Window, extra: &str) -> String {
    format!(
        "{{\"kind\":\"{kind}\",\"workload\":\"{}\",\"burst_pages\":{},\"rate_pps\":{},\"hold_us\":{},\
         \"config\":\"{config}\",\"ring_final\":{},\"goodput_pps\":{:.0},\"modelled_pps\":{:.0},\"capacity_pps\":{:.0},\"dropped_pps\":{:.0},\
         \"ring_full_share\":{:.4},\"slow_share\":{:.4},\"inflight_mem\":{},\"queues\":{}{extra}}}",
        w.name,
        w.burst,
        w.rate_pps,
        w.hold_us,
        m.ring,
        m.goodput_pps,
        m.modelled_pps,
        m.capacity_pps,
        m.dropped_pps,
        m.ring_full_share,
        m.slow_share,
        m.inflight_mem,
        m.queues
    )
}

/// The naive tuner (the rule generic tuners use): after every window whose
/// ring_full share is at or above 5 % (the policy's grow threshold), grow
/// the ring by 25 %, up to the maximum. Watched like the pptune run.
#[allow(clippy::too_many_arguments, clippy::cast_precision_loss)]
async fn naive(
    c: &Client,
    p: &Ppsim,
    queues: u32,
    w: &Workload,
    knobs: &Knobs,
    params: &str,
    enforce_secs: u64,
    static_secs: f64,
    window_secs: u64,
    max_ring: u32,
) {
    let d = device(p, queues, w, knobs);
    d.set_up(true).unwrap();
    if w.running {
        d.start().unwrap();
    }
    let ifx = d.ifindex().unwrap();
    let t0 = Instant::now();
    let mut timeline = Vec::new();
    let mut changes = 0u32;
    let mut last_change_s = 0.0f64;
    let measure_from = Duration::from_secs_f64((enforce_secs as f64 - static_secs).max(0.0));
    while t0.elapsed() + Duration::from_secs(window_secs) <= measure_from {
        let ids = attached_pools(c, ifx).await.unwrap();
        let s0 = stats_of(c, &ids).await.unwrap();
        let mut g_prev = d.goodput().unwrap();
        for _ in 0..window_secs {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let g = d.goodput().unwrap();
            timeline.push(format!(
                "[{:.1},{},{:.0},{:.0},{}]",
                t0.elapsed().as_secs_f64(),
                rx_ring(c, ifx).await,
                g.pps_since(&g_prev),
                g.modelled_pps_since(&g_prev),
                g.queues
            ));
            g_prev = g;
        }
        let s1 = stats_of(c, &ids).await.unwrap();
        let share = s1
            .delta(&s0)
            .and_then(|d| recycle_miss_share(&d))
            .unwrap_or(0.0);
        let ring = rx_ring(c, ifx).await;
        if share >= GROW_AT && ring < max_ring {
            let to = naive_next(ring, max_ring);
            set_rx_ring(c, &d, to).await;
            changes += 1;
            last_change_s = t0.elapsed().as_secs_f64();
        }
    }
    let m = window(c, &d, static_secs).await;
    retire(d, w);
    println!(
        "{}",
        line(
            "naive",
            w,
            "naive-tuner",
            &m,
            &format!(
                "{params},\"changes\":{changes},\"converge_s\":{last_change_s:.1},\"enforce_secs\":{enforce_secs},\"timeline\":[{}]",
                timeline.join(",")
            )
        )
    );
}

#[tokio::main(flavor = "current_thread")]
#[allow(clippy::cast_precision_loss)] // means of goodput samples and seconds
async fn main() {
    let pptune = arg("--pptune").expect("--pptune PATH");
    let policy = arg("--policy").expect("--policy FILE");
    let preset = match arg("--preset").as_deref().unwrap_or("zonelock") {
        "off" => CostPreset::Off,
        "devmem" => CostPreset::Devmem,
        _ => CostPreset::ZoneLock,
    };
    let base_queues: u32 = arg("--queues").map_or(2, |s| s.parse().unwrap());
    let channels_policy = arg("--channels-policy");
    let static_secs: f64 = arg("--static-secs").map_or(8.0, |s| s.parse().unwrap());
    let enforce_secs: u64 = arg("--enforce-secs").map_or(100, |s| s.parse().unwrap());
    let rounds: u32 = arg("--rounds").map_or(2, |s| s.parse().unwrap());
    let window_secs: u64 = arg("--window-secs").map_or(3, |s| s.parse().unwrap());
    let warmup_secs: f64 = arg("--warmup-secs").map_or(1.0, |s| s.parse().unwrap());
    let quiet_secs: Option<f64> = arg("--quiet-secs").map(|s| s.parse().unwrap());
    let naive_secs: u64 = arg("--naive-secs").map_or(enforce_secs, |s| s.parse().unwrap());
    let sweep: Vec<u32> = arg("--sweep")
        .unwrap_or_else(|| "256,512,1024,2048,4096,8192,16384".into())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let wanted: Option<Vec<String>> =
        arg("--workloads").map(|s| s.split(',').map(str::to_owned).collect());
    let c = Client::connect().await.unwrap();
    let p = Ppsim::load().unwrap();
    let default_ring = 256;
    let max_ring = *sweep.iter().max().unwrap();

    for w in WORKLOADS {
        if wanted
            .as_ref()
            .is_some_and(|v| !v.iter().any(|n| n == w.name))
        {
            continue;
        }
        let mut knobs = Knobs {
            rate_pps: w.rate_pps,
            burst_pages: w.burst,
            hold_us: w.hold_us,
            stack_ref_pct: w.stack_ref_pct,
            ..Knobs::default()
        }
        .with_preset(preset);
        // (ring, queues) pairs of the static sweep; the runs start from
        // `queues` at the default ring.
        let (pairs, queues, policy): (Vec<(u32, u32)>, u32, &str) = match w.queues {
            Some(q) => {
                knobs.slow_cost_us = q.cost_us;
                knobs.release_cost_us = q.cost_us;
                knobs.contention_pct = q.contention_pct;
                knobs.line_pps = q.line_pps;
                knobs.pace_scale = q.pace_scale;
                let pairs = q
                    .rings
                    .iter()
                    .flat_map(|&r| q.counts.iter().map(move |&n| (r, n)))
                    .collect();
                let start = *q.counts.iter().max().unwrap();
                let pol = channels_policy
                    .as_deref()
                    .expect("--channels-policy FILE for the queue workloads");
                (pairs, start, pol)
            }
            None => (
                sweep.iter().map(|&r| (r, base_queues)).collect(),
                base_queues,
                policy.as_str(),
            ),
        };
        let params = format!(
            ",\"preset\":\"{}\",\"slow_cost_us\":{},\"release_cost_us\":{},\"contention_pct\":{},\"stack_ref_pct\":{},\"line_pps\":{},\"pace_scale\":{},\"start_queues\":{queues},\"queue_case\":{}",
            preset.name(),
            knobs.slow_cost_us,
            knobs.release_cost_us,
            knobs.contention_pct,
            knobs.stack_ref_pct,
            knobs.line_pps,
            knobs.pace_scale,
            w.queues.is_some()
        );
        let max_ring = pairs.iter().map(|p| p.0).max().unwrap_or(max_ring);
        // ---- static sweep: interleaved rounds, so a drift of the host
        // does not fall on one ring only
        for (round, &(ring, nq)) in (0..rounds).flat_map(|r| pairs.iter().map(move |x| (r, x))) {
            let d = device(&p, nq, w, &knobs);
            set_rx_ring(&c, &d, ring).await;
            d.set_up(true).unwrap();
            if w.running {
                d.start().unwrap();
            }
            tokio::time::sleep(Duration::from_secs_f64(warmup_secs)).await;
            let m = window(&c, &d, static_secs).await;
            retire(d, w);
            let cfg = match ring {
                r if r == default_ring => "default",
                r if r == max_ring => "max",
                _ => "sweep",
            };
            println!(
                "{}",
                line("static", w, cfg, &m, &format!("{params},\"round\":{round}"))
            );
        }

        // ---- the naive tuner from the default ring
        naive(
            &c,
            &p,
            queues,
            w,
            &knobs,
            &params,
            naive_secs,
            static_secs,
            window_secs,
            max_ring,
        )
        .await;
        // The best static ring is chosen from these rows by benches/report.py.

        // ---- pptune enforce from the default ring
        let d = device(&p, queues, w, &knobs);
        d.set_up(true).unwrap();
        if w.running {
            d.start().unwrap();
        }
        let ifx = d.ifindex().unwrap();
        // A fresh runtime dir (state.json, control socket) per workload: ppsim
        // devices are identified by name and every workload's device is
        // `ppsim0` again, so a shared /run/pptune would hand this run the
        // previous workload's change history for "the same" device.
        let rundir =
            std::env::temp_dir().join(format!("pptune-outcome-{}-{}", std::process::id(), w.name));
        let _ = std::fs::remove_dir_all(&rundir);
        std::fs::create_dir_all(&rundir).unwrap();
        // The daemon's log (its decisions and evaluations, JSON lines) goes
        // to the VM's shared output directory when there is one.
        let log = std::env::var_os("PPTUNE_VM_OUT").map_or_else(Stdio::null, |dir| {
            let path =
                std::path::Path::new(&dir).join(format!("pptune-{}-{}.log", w.name, preset.name()));
            std::fs::File::create(path).map_or_else(|_| Stdio::null(), Stdio::from)
        });
        let daemon = Daemon(
            Command::new(&pptune)
                .args(["--config", policy, "run"])
                .env("RUNTIME_DIRECTORY", &rundir)
                .env("STATE_DIRECTORY", &rundir)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let t0 = Instant::now();
        let mut timeline = Vec::new();
        // (t, goodput) per second, to average the settled part.
        let mut samples: Vec<(f64, f64)> = Vec::new();
        // A change is a new ring or a new queue count.
        let mut last = (rx_ring(&c, ifx).await, u64::from(queues));
        let mut changes = 0u32;
        let mut last_change_s = 0.0f64;
        let mut g_prev = d.goodput().unwrap();
        let measure_from = (enforce_secs as f64 - static_secs).max(0.0);
        loop {
            let t = t0.elapsed().as_secs_f64();
            if t >= measure_from || quiet_secs.is_some_and(|q| t >= last_change_s + q) {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            let ring = rx_ring(&c, ifx).await;
            let g = d.goodput().unwrap();
            let t = t0.elapsed().as_secs_f64();
            if (ring, g.queues) != last {
                changes += 1;
                last_change_s = t;
                last = (ring, g.queues);
            }
            timeline.push(format!(
                "[{t:.1},{ring},{:.0},{:.0},{}]",
                g.pps_since(&g_prev),
                g.modelled_pps_since(&g_prev),
                g.queues
            ));
            samples.push((t, g.pps_since(&g_prev)));
            g_prev = g;
        }
        let m = window(&c, &d, static_secs).await;
        if (m.ring, m.queues) != last {
            changes += 1;
            last_change_s = t0.elapsed().as_secs_f64();
        }
        // The daemon shares the guest's CPU with ppsim: what it used is
        // goodput the static points did not pay.
        let daemon_cpu = daemon.cpu_secs().unwrap_or(-1.0);
        let run_secs = t0.elapsed().as_secs_f64();
        drop(daemon);
        // Goodput once settled: the mean of the 1 s samples from 3 s after
        // the last change (the rebuild) to the measured window, plus that
        // window. One 1 s sample swings by ±40 % on this emulated, shared
        // host; a minute of them is what can be compared with a static point.
        let settled_from = last_change_s + 3.0;
        let tail: Vec<f64> = samples
            .iter()
            .filter(|(t, _)| *t > settled_from)
            .map(|(_, g)| *g)
            .collect();
        let settled_secs = tail.len() as f64 + static_secs;
        let settled = (tail.iter().sum::<f64>() + m.goodput_pps * static_secs) / settled_secs;
        retire(d, w);
        println!(
            "{}",
            line(
                "pptune",
                w,
                "pptune-enforce",
                &m,
                &format!(
                    "{params},\"changes\":{changes},\"converge_s\":{},\"enforce_secs\":{enforce_secs},\"goodput_settled_pps\":{settled:.0},\"settled_secs\":{settled_secs:.1},\"quiet_secs\":{},\"daemon_cpu_s\":{daemon_cpu:.2},\"daemon_run_s\":{run_secs:.1},\"timeline\":[{}]",
                    if changes == 0 {
                        "0".to_owned()
                    } else {
                        format!("{last_change_s:.1}")
                    },
                    quiet_secs.map_or_else(|| "null".to_owned(), |q| format!("{q}")),
                    timeline.join(",")
                )
            )
        );
    }
}
