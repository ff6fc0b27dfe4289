//! pptune's in-process observe pass, timed: the daemon's sampling pass
//! (`NetlinkKernel::sample`: link, page-pool, page-pool-stats, queue and
//! qstats dumps, rings and channels per device, decode, aggregation into a
//! `Snapshot`), the policy decision (`policy::decide` with the shipped
//! default policy and the engine state carried between passes) and the
//! metrics update (`Metrics::observe`) — what one daemon tick
//! does, minus logging and the state file. The `/metrics` render
//! (`encode`) is a scrape's cost, not a tick's: it is timed after the
//! passes, on the last snapshot, and printed as its own line
//! (`pptune-encode`).
//!
//! Not a criterion bench: `benches/observe-cost.sh` runs the built binary in
//! the VM (it needs a kernel with page pools):
//!
//! ```text
//! observe_pass-<hash> --passes 100 [--save-snapshot FILE]
//! ```
//!
//! prints one JSON line; `--save-snapshot` writes the last snapshot as JSON
//! (the render bench's recorded input). `--shadow` also runs a shadow policy
//! (the shipped default in enforce mode, `service::shadow`) after each
//! pass, as the daemon does, and prints a `pptune-shadow` line: the time of
//! the pass without it and of the shadow, summed over the measured passes
//! (under `-icount` the guest clock counts instructions), which follow two
//! warm-up ticks; the shadow's time on those two (`change_ticks_ms`) is
//! what its changes cost once, apart from every pass. `--shadow-prior
//! RING` gives that shadow a fleet prior of RING for driver `ice` and shows
//! it each sampled device as an `ice` NIC (netdevsim's ring does not size
//! its pool, so no ring change is ever proposed for it; ice's does): it
//! changes every device's ring at the warm-up tick, so every measured pass
//! models all of them (the most a shadow can model); the relabelling is
//! outside both timings, and the line says how many devices it modelled.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench binary

use benchkit::meter;
use std::alloc::System;
use std::time::Duration;
use tokio::time::Instant;

use policy::Observation;
use policy::observer::Observer;
use pptune::publish::metrics::Metrics;
use pptune::sample::kernel_netlink::NetlinkKernel;
use pptune::sample::{Kernel, SampleScope};
use pptune::service::{Engine, PolicyEngine};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[path = "shared/shadow.rs"]
mod shadow_setup;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    let passes: u64 = meter::arg("--passes").map_or(100, |s| s.parse().unwrap());
    let save = meter::arg("--save-snapshot");
    let prior: Option<u32> = meter::arg("--shadow-prior").map(|s| s.parse().unwrap());
    let with_shadow = prior.is_some() || std::env::args().any(|a| a == "--shadow");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let policy = config::default_policy().unwrap();
        let kernel = NetlinkKernel::connect().await.unwrap();
        let metrics = Metrics::new();
        let scope = SampleScope::default();
        let (mut engine, mut plan) = (PolicyEngine::default(), policy::Plan::default());
        let first_sample = kernel.sample(&scope).await.unwrap();
        let pools: usize = first_sample.devices.iter().map(|d| d.pools().count()).sum();
        let mut observer = Observer::default();
        observer.next(&first_sample, Duration::ZERO);
        metrics.observe(&first_sample, observer.deltas());
        observer.keep(first_sample, Duration::ZERO);
        let interval = policy.timing.interval;
        let mut shadow = with_shadow.then(|| shadow_setup::bench_shadow(&policy, prior));
        let (mut pass_time, mut shadow_time) = (Duration::ZERO, Duration::ZERO);
        let mut bytes = 0usize;
        let mut decisions = 0usize;
        // Tick 1 warms up (the engine's memory, the metrics' series and
        // the pass's reused buffers, as after a daemon's first ticks);
        // ticks 2..=passes+1 are measured. With a shadow, tick 2 warms up
        // too: a shadow change costs its pass (tick 1: the change, its
        // evaluation opened) and the next (tick 2: the evaluation's
        // start, a copy of the device) once, not every pass; their shadow
        // time is printed apart (`change_ticks_ms`).
        let first = if with_shadow { 3 } else { 2 };
        let mut change_ticks = Duration::ZERO;
        let mut m = None;
        for i in 1..first + passes {
            if i == first {
                m = Some(meter::Meter::start(GLOBAL));
            }
            let t0 = Instant::now();
            let mut snap = kernel.sample(&scope).await.unwrap();
            // The pass's deltas, once, for the engine and the metrics.
            let now = interval * u32::try_from(i).unwrap_or(u32::MAX);
            let obs = Observation {
                pass: observer.next(&snap, now),
                local_time: None,
                history: &[],
                overrides: &[],
                originals: &[],
                backoff: &policy::engine::NO_BACKOFF,
            };
            // The daemon's engine, refilling the plan it kept (`service`'s `tick`).
            engine.decide_into(&policy, &obs, &mut plan);
            if i >= first {
                decisions += plan.decisions.len();
            }
            metrics.observe(&snap, observer.deltas());
            let t1 = Instant::now();
            if prior.is_some() {
                shadow_setup::as_ice(&mut snap);
            }
            let t2 = Instant::now();
            if let Some(s) = &mut shadow {
                let live = (&mut observer, &mut snap);
                s.pass(live, (now, interval, None), &[], &metrics);
            }
            if i >= first {
                pass_time += t1 - t0;
                shadow_time += t2.elapsed();
            } else {
                change_ticks += t2.elapsed();
            }
            // As the run loop does with the snapshot it replaces.
            if let Some(spent) = observer.keep(snap, now) {
                kernel.recycle(spent);
            }
        }
        let m = m.unwrap();
        let r = m.stop(passes);
        let m = meter::Meter::start(GLOBAL);
        for _ in 0..passes {
            bytes = metrics.encode().unwrap().len();
        }
        let enc = m.stop(passes);
        println!(
            "{}",
            r.json(
                "pptune-pass",
                pools,
                &format!(
                    ",\"devices\":{},\"decisions_per_pass\":{}",
                    observer.previous().map_or(0, |p| p.devices.len()),
                    decisions / usize::try_from(passes.max(1)).unwrap()
                )
            )
        );
        println!(
            "{}",
            enc.json(
                "pptune-encode",
                pools,
                &format!(",\"metrics_bytes\":{bytes}")
            )
        );
        if with_shadow {
            // The devices the shadow modelled: its `pptune_shadow_modelled` 1s.
            let text = metrics.encode().unwrap();
            let modelled = text
                .lines()
                .filter(|l| l.starts_with("pptune_shadow_modelled{") && l.ends_with(" 1"))
                .count();
            println!(
                "{{\"tool\":\"pptune-shadow\",\"pools\":{pools},\"passes\":{passes},\"modelled_devices\":{modelled},\"pass_ms\":{:.3},\"shadow_ms\":{:.3},\"shadow_per_pass\":{:.4},\"change_ticks_ms\":{:.3}}}",
                pass_time.as_secs_f64() * 1e3 / f64::from(u32::try_from(passes).unwrap()),
                shadow_time.as_secs_f64() * 1e3 / f64::from(u32::try_from(passes).unwrap()),
                shadow_time.as_secs_f64() / pass_time.as_secs_f64(),
                change_ticks.as_secs_f64() * 1e3
            );
        }
        if let Some(path) = save {
            std::fs::write(&path, serde_json::to_vec_pretty(&observer.previous()).unwrap()).unwrap();
        }
    });
}
