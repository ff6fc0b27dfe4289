//! Closed-loop tests: the real `pptune run` binary against ppsim (our
//! simulated page_pool NIC, `tests/ppsim/`) in the test VM
//! (`tests/vm/test.sh`; kernel 7.3 only, elsewhere each test prints why it
//! skips). Every outcome is read from the kernel (ethtool
//! netlink rings/channels, page-pool stats) and from ppsim's own goodput
//! figure, never from pptune's claims; pptune's metrics, log and control
//! socket are read only where the scenario is about what pptune *says*
//! (budget reason, operator override, recommendation id, resync count).
//!
//! Policies: `tests/policies/closed-loop-*.yaml` (1 s interval, 2 s windows,
//! seconds-long cooldowns); each test narrows the selector to the device it
//! created. Workload: one ppsim queue (two for channels), 2048-page return
//! bursts, unlimited arrival rate unless stated, ring 256, cost preset
//! `devmem` (slow_cost_us=100 release_cost_us=2500, see the ppsim README).
//!
//! The daemon runs as `pptune_tests::vm_daemon` starts it (the binary in
//! `PPTUNE_BIN`, which tests/vm/test.sh sets). Each measurement prints one
//! `MEASURE` line.
// Helpers outside #[test] fns fail the test the same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::cast_precision_loss)]

use std::time::Duration;

use netlink::Client;
use nix::sys::signal::Signal;
use policy::signals::{recycle_miss_share, slow_refill_share};
use policy::snapshot::PoolStats;
use pptune_tests::pools::{attached_inflight_mem, attached_pools, combined, rx_ring, stats_of};
use pptune_tests::ppsim::{CostPreset, Knobs, Personality, Ppsim, PpsimDev};
use pptune_tests::vm::{PpsimKernels, require_ppsim};
use pptune_tests::vm_daemon::Daemon;
use pptune_tests::wire::{
    DRAIN_PINNED, DRAIN_PINNED_4M, RX_NS, Traffic, Wire, assert_quiet_kernel, dmesg_mark, in_netns,
    stats_in,
};
use tokio::time::{Instant, sleep};

/// Grow threshold of the test policies (`thresholds.grow_recycle_miss`).
const MISS_THRESHOLD: f64 = 0.05;
/// `thresholds.grow_slow_refill`, also the "contended" level for channels.
const SLOW_THRESHOLD: f64 = 0.25;

fn bursty() -> Knobs {
    Knobs {
        burst_pages: 2048,
        ..Knobs::default()
    }
    .with_preset(CostPreset::Devmem)
}

fn knobs_line(k: &Knobs) -> String {
    format!(
        "rate_pps={} burst_pages={} hold_us={} slow_cost_us={} release_cost_us={} contention_pct={}",
        k.rate_pps, k.burst_pages, k.hold_us, k.slow_cost_us, k.release_cost_us, k.contention_pct
    )
}

/// A ppsim device stopped and deleted on drop too, so a failed test leaves
/// no traffic running under the next one.
struct Dev(Option<PpsimDev>);

impl std::ops::Deref for Dev {
    type Target = PpsimDev;
    fn deref(&self) -> &PpsimDev {
        self.0.as_ref().unwrap()
    }
}

impl Dev {
    fn delete(mut self) -> Result<(), pptune_tests::ppsim::PpsimError> {
        self.0.take().unwrap().delete()
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _ = d.stop();
            let _ = d.delete();
        }
    }
}

fn device(queues: u32, knobs: &Knobs) -> Dev {
    let p = Ppsim::load().expect("ppsim loads");
    let d = p.new_device(queues).expect("ppsim device");
    d.set_up(true).expect("up");
    d.set_knobs(knobs).expect("knobs");
    Dev(Some(d))
}

// ---------------------------------------------------------------- kernel

/// The kernel's ring_full and slow-refill shares and ppsim's goodput over
/// `secs` on the device's current pools (retried if the pools are rebuilt
/// during the window).
#[derive(Debug, Clone, Copy)]
struct Window {
    ring: u32,
    miss_share: f64,
    slow_share: f64,
    goodput_pps: f64,
}

async fn measure(c: &Client, d: &PpsimDev, secs: f64) -> Window {
    let ifx = d.ifindex().expect("ifindex");
    for _ in 0..5 {
        let ring = rx_ring(c, d).await;
        let ids = attached_pools(c, ifx).await.expect("page-pool-get");
        let s0 = stats_of(c, &ids).await.expect("page-pool-stats-get");
        let g0 = d.goodput().expect("goodput");
        sleep(Duration::from_secs_f64(secs)).await;
        if attached_pools(c, ifx).await.expect("page-pool-get") != ids {
            continue;
        }
        let s1 = stats_of(c, &ids).await.expect("page-pool-stats-get");
        let g1 = d.goodput().expect("goodput");
        let delta = s1.delta(&s0).expect("monotonic counters");
        return Window {
            ring,
            miss_share: recycle_miss_share(&delta).unwrap_or(0.0),
            slow_share: slow_refill_share(&delta, false).unwrap_or(0.0),
            goodput_pps: g1.pps_since(&g0),
        };
    }
    panic!("the pools kept being rebuilt; no stable measurement window");
}

// ---------------------------------------------------------------- pptune

/// Kernel-observed ring values over time: polls until the ring has been
/// raised and then held still for `settle`, or `limit` passes.
struct Trace {
    /// (seconds since start, ring) at each change seen.
    changes: Vec<(f64, u32)>,
}

async fn converge(
    c: &Client,
    d: &PpsimDev,
    p: &mut Daemon,
    settle: Duration,
    limit: Duration,
) -> Trace {
    let t0 = Instant::now();
    let mut last = rx_ring(c, d).await;
    let mut last_change = None;
    let mut changes = Vec::new();
    while t0.elapsed() < limit {
        sleep(Duration::from_millis(250)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        let r = rx_ring(c, d).await;
        if r != last {
            changes.push((t0.elapsed().as_secs_f64(), r));
            last = r;
            last_change = Some(Instant::now());
        }
        if last_change.is_some_and(|t| t.elapsed() >= settle) {
            break;
        }
    }
    Trace { changes }
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

// ---------------------------------------------------------------- tests

/// Scenarios 1 and 2: the bursty workload at ring 256 with the devmem cost;
/// enforce raises the ring until ring_full and the slow path fall below the
/// policy thresholds and goodput rises; then 60 s of the same steady
/// workload bring no further change.
#[tokio::test(flavor = "current_thread")]
async fn bursty_enforce_converges_then_holds_steady() {
    let k = require_ppsim(
        "bursty_enforce_converges_then_holds_steady",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let knobs = bursty();
    let d = device(1, &knobs);
    assert_eq!(rx_ring(&c, &d).await, 256);
    d.start().expect("start");
    sleep(Duration::from_secs(1)).await;
    let before = measure(&c, &d, 3.0).await;
    println!("before: {before:?}");
    assert!(
        before.miss_share >= MISS_THRESHOLD,
        "the workload must overflow ring 256 for the test to mean anything: {before:?}"
    );

    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-enforce.yaml", Some(d.name()))
        .metrics_port(19871)
        .start();
    let trace = converge(
        &c,
        &d,
        &mut p,
        Duration::from_secs(15),
        Duration::from_secs(150),
    )
    .await;
    let converged_s = trace.changes.last().map_or(f64::NAN, |(t, _)| *t);
    println!("ring changes seen in the kernel: {:?}", trace.changes);
    assert!(
        !trace.changes.is_empty(),
        "pptune never changed the ring:\n{}",
        p.log()
    );
    let after = measure(&c, &d, 3.0).await;
    println!("after: {after:?}");
    println!(
        "MEASURE scenario=bursty_enforce kernel={k} queues=1 {} | before ring={} ring_full_share={:.4} slow_refill_share={:.4} goodput_pps={:.0} | after ring={} ring_full_share={:.4} slow_refill_share={:.4} goodput_pps={:.0} | goodput_ratio={:.2} changes={} time_to_converge_s={:.1} (daemon start to last change)",
        knobs_line(&knobs),
        before.ring,
        before.miss_share,
        before.slow_share,
        before.goodput_pps,
        after.ring,
        after.miss_share,
        after.slow_share,
        after.goodput_pps,
        after.goodput_pps / before.goodput_pps.max(1.0),
        trace.changes.len(),
        converged_s,
    );
    assert!(after.ring > 256, "ring raised: {after:?}");
    assert!(
        after.miss_share < MISS_THRESHOLD,
        "ring_full share below the policy threshold after tuning: {after:?}"
    );
    assert!(
        after.slow_share < SLOW_THRESHOLD,
        "slow-refill share below the policy threshold after tuning: {after:?}"
    );
    assert!(
        after.goodput_pps > before.goodput_pps * 1.2,
        "goodput rises: {before:?} → {after:?}"
    );

    // Scenario 2: steady workload, converged: nothing changes for 60 s.
    let ifx = d.ifindex().unwrap();
    let pools = attached_pools(&c, ifx).await.expect("page-pool-get");
    let ring = rx_ring(&c, &d).await;
    let ch = combined(&c, &d).await;
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(60) {
        sleep(Duration::from_secs(1)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        assert_eq!(
            rx_ring(&c, &d).await,
            ring,
            "ring changed after convergence:\n{}",
            p.log()
        );
        assert_eq!(
            combined(&c, &d).await,
            ch,
            "channels changed after convergence"
        );
    }
    assert_eq!(
        attached_pools(&c, ifx).await.expect("page-pool-get"),
        pools,
        "pools were rebuilt after convergence (a change and back)"
    );
    println!("MEASURE scenario=steady kernel={k} ring={ring} channels={ch} changes_in_60s=0");
    assert_eq!(p.term().await, Some(0));
    d.stop().unwrap();
    d.delete().unwrap();
}

/// Non-power-of-two bursts (1500 pages on the default personality, 2500 on
/// one that refuses rings that are not a power of two): enforce ends with
/// no recycle misses at a ring within one power of two of the burst, in at
/// most two changes, never at the limit (16384), and holds there. Runs the
/// same on one vCPU and on two (consumer on the other CPU, `run.sh --smp 2`).
#[tokio::test(flavor = "current_thread")]
async fn non_power_of_two_bursts_converge_near_the_burst() {
    let k = require_ppsim(
        "non_power_of_two_bursts_converge_near_the_burst",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    // tests/vm/test.sh's two-vCPU run says how many it booted: a VM that
    // came up with fewer must not pass as the two-CPU case.
    if let Ok(want) = std::env::var("PPTUNE_VM_EXPECT_CPUS") {
        assert_eq!(cpus.to_string(), want, "vCPUs in this VM");
    }
    for (personality, burst) in [(Personality::Ppsim, 1500u32), (Personality::Pow2, 2500)] {
        let knobs = Knobs {
            burst_pages: burst,
            ..bursty()
        };
        let p = Ppsim::load().expect("ppsim loads");
        let raw = p.new_device(1).expect("ppsim device");
        raw.set_personality(personality).expect("personality");
        raw.set_up(true).expect("up");
        raw.set_knobs(&knobs).expect("knobs");
        let d = Dev(Some(raw));
        assert_eq!(rx_ring(&c, &d).await, 256);
        d.start().expect("start");
        sleep(Duration::from_secs(1)).await;
        let before = measure(&c, &d, 2.0).await;
        assert!(
            before.miss_share >= MISS_THRESHOLD,
            "{burst}-page bursts must overflow ring 256: {before:?}"
        );
        let dir = tmp();
        let mut pt = Daemon::new(dir.path(), "closed-loop-enforce.yaml", Some(d.name()))
            .metrics_port(19877)
            .start();
        let trace = converge(
            &c,
            &d,
            &mut pt,
            Duration::from_secs(12),
            Duration::from_secs(120),
        )
        .await;
        let after = measure(&c, &d, 2.0).await;
        println!(
            "MEASURE scenario=non_pow2_burst kernel={k} cpus={cpus} personality={} {} | changes={:?} | before {before:?} | after {after:?}",
            personality.name(),
            knobs_line(&knobs),
            trace.changes
        );
        assert!(
            !trace.changes.is_empty() && trace.changes.len() <= 2,
            "{} burst {burst}: at most two changes, got {:?}:\n{}",
            personality.name(),
            trace.changes,
            pt.log()
        );
        // The smallest ring that takes a whole burst: the burst itself, or
        // the next power of two where the driver refuses anything else.
        let best = if matches!(personality, Personality::Pow2) {
            burst.next_power_of_two()
        } else {
            burst
        };
        assert!(
            after.ring >= burst && after.ring <= 2 * best && after.ring < 16384,
            "{} burst {burst}: ring {} must cover the burst, within one power of two of {best}, not the limit:\n{}",
            personality.name(),
            after.ring,
            pt.log()
        );
        assert!(
            after.miss_share < MISS_THRESHOLD,
            "{} burst {burst}: misses remain at ring {}: {after:?}",
            personality.name(),
            after.ring
        );
        assert_eq!(pt.term().await, Some(0));
        d.stop().unwrap();
        d.delete().unwrap();
    }
}

/// Scenario 8: observe mode on the same workload changes nothing, and the
/// recommendation it exports (`pptune_recommendation_target`) has the id
/// and target that `pptune plan --json` gives for the same device.
#[tokio::test(flavor = "current_thread")]
async fn observe_changes_nothing_and_exports_the_plan_recommendation() {
    let k = require_ppsim(
        "observe_changes_nothing_and_exports_the_plan_recommendation",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let d = device(1, &bursty());
    d.start().expect("start");
    let ifx = d.ifindex().unwrap();
    let pools = attached_pools(&c, ifx).await.expect("page-pool-get");
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-observe.yaml", Some(d.name()))
        .metrics_port(19878)
        .start();
    p.ready().await;
    let dev_label = format!("device=\"{}\"", d.name());
    let t0 = Instant::now();
    let mut rec = None;
    while t0.elapsed() < Duration::from_secs(30) {
        sleep(Duration::from_secs(1)).await;
        assert_eq!(rx_ring(&c, &d).await, 256, "observe mode changed the ring");
        let m = p.metrics();
        if let Some(l) = m
            .lines()
            .find(|l| l.starts_with("pptune_recommendation_target{") && l.contains(&dev_label))
        {
            rec = Some(l.to_owned());
            if t0.elapsed() > Duration::from_secs(12) {
                break;
            }
        }
    }
    let rec = rec.unwrap_or_else(|| panic!("no recommendation exported:\n{}", p.metrics()));
    println!("exported: {rec}");
    let label = |name: &str| {
        let start = rec.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        rec[start..].split('"').next().unwrap().to_owned()
    };
    let id = label("recommendation");
    let target: f64 = rec.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(label("reason"), "recycle_miss_high", "{rec}");
    assert!(target > 256.0, "{rec}");
    // The same recommendation from `pptune plan --json` (samples the live
    // kernel itself, changes nothing); with --detailed-exitcode a plan that
    // would change something exits 2 (`terraform plan -detailed-exitcode`).
    let out = p.cmd(&["plan", "--json", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "plan: {out:?}");
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dec = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["device"] == d.name())
        .unwrap_or_else(|| panic!("plan has no decision for {}: {plan}", d.name()))
        .clone();
    println!("plan --json: {dec}");
    assert_eq!(
        dec["id"].as_str(),
        Some(id.as_str()),
        "plan id vs exported id"
    );
    assert_eq!(dec["action"]["kind"], "set_ring", "{dec}");
    // The target is an estimate from the burst seen in each window, so it
    // may differ between the two runs; the id (device, knob, reason) may not.
    let plan_target = dec["action"]["to"].as_f64().unwrap_or(0.0);
    assert!(plan_target > 256.0, "{dec}");
    assert_eq!(rx_ring(&c, &d).await, 256, "nothing changed the ring");
    assert_eq!(
        attached_pools(&c, ifx).await.expect("page-pool-get"),
        pools,
        "no pool was rebuilt"
    );
    let enforce_actions = p.metric("pptune_actions_total", &[&dev_label]);
    assert!(
        enforce_actions == 0.0,
        "observe mode took actions: {enforce_actions}"
    );
    println!(
        "MEASURE scenario=observe kernel={k} recommendation={id} exported_target={target} plan_target={plan_target} ring_after=256"
    );
    assert_eq!(p.term().await, Some(0));
    d.stop().unwrap();
    d.delete().unwrap();
}

/// Scenario 7: SIGTERM with on_stop restore puts the original ring back;
/// after kill -9 a restarted daemon still knows the original (state file)
/// and `pptune restore` puts it back.
#[tokio::test(flavor = "current_thread")]
async fn sigterm_restores_and_kill9_keeps_originals_for_restore() {
    let k = require_ppsim(
        "sigterm_restores_and_kill9_keeps_originals_for_restore",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let d = device(1, &bursty());
    d.start().expect("start");
    let dir = tmp();
    // Part 1: on_stop restore.
    let mut p = Daemon::new(dir.path(), "closed-loop-restore.yaml", Some(d.name()))
        .metrics_port(19877)
        .start();
    let raised = wait_ring_change(&c, &d, &mut p, 256, Duration::from_secs(90)).await;
    println!("raised to {raised}");
    assert_eq!(p.term().await, Some(0), "SIGTERM exits 0");
    assert_eq!(
        rx_ring(&c, &d).await,
        256,
        "original ring back after SIGTERM:\n{}",
        p.log()
    );
    drop(p);

    // Part 2: on_stop keep, kill -9.
    let dir2 = tmp();
    let mut p = Daemon::new(dir2.path(), "closed-loop-enforce.yaml", Some(d.name()))
        .metrics_port(19876)
        .start();
    let raised = wait_ring_change(&c, &d, &mut p, 256, Duration::from_secs(90)).await;
    p.kill9();
    assert_eq!(
        rx_ring(&c, &d).await,
        raised,
        "kill -9 leaves the tuned ring"
    );
    let st = p.state();
    let origs: Vec<u64> = st["devices"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|r| {
            r["originals"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|o| o["value"].as_u64())
        })
        .collect();
    assert_eq!(origs, vec![256], "the state file keeps the original: {st}");
    // Restart: the daemon knows the original from the record.
    d.stop().unwrap();
    p.spawn();
    p.ready().await;
    let v = p.view().await.unwrap();
    let dv = v.devices.iter().find(|x| x.name == d.name()).unwrap();
    println!("after restart: originals {:?}", dv.originals);
    assert!(
        dv.originals.iter().any(|(_, val)| *val == 256),
        "restarted daemon knows the original: {dv:?}"
    );
    // `pptune restore` (through the running daemon's control socket).
    let out = p.cmd(&["restore"]);
    println!(
        "restore: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "restore: {out:?}");
    assert_eq!(
        rx_ring(&c, &d).await,
        256,
        "pptune restore brings the original back"
    );
    sleep(Duration::from_secs(2)).await;
    let st = p.state();
    let left: usize = st["devices"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["originals"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(left, 0, "record cleared: {st}");
    assert_eq!(p.term().await, Some(0));
    println!(
        "MEASURE scenario=stop_restore kernel={k} sigterm_restored=256 kill9_ring={raised} restored=256"
    );
    d.delete().unwrap();
}

/// Giving memory back on a real pool: 2048-page bursts grow the ring from
/// 256, then stop. A page_pool's `inflight` counts the pages parked in its
/// own ring and cache, and a pool frees pages only when that ring is full,
/// so the kernel's `inflight-mem` stays far above the posted buffers (and
/// the 128-page cache) after the bursts stop — measured here: the reason a
/// calm keep target read from inflight never gave memory back. The ring
/// goes back to at most twice the original within 2 × calm_before_shrink +
/// one evaluation of the stop (+ 10 s for the windows, the gates and the
/// rebuilds), and the pools' memory to at most half of the grown pools'.
#[tokio::test(flavor = "current_thread")]
async fn give_back_after_the_bursts_stop() {
    let k = require_ppsim("give_back_after_the_bursts_stop", PpsimKernels::Only73);
    let c = Client::connect().await.expect("client");
    let d = device(1, &bursty());
    d.start().expect("start");
    let ifx = d.ifindex().expect("ifindex");
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-give-back.yaml", Some(d.name()))
        .metrics_port(19881)
        .start();
    let grown = wait_ring_change(&c, &d, &mut p, 256, Duration::from_secs(90)).await;
    assert!(grown > 256, "{grown}");
    // The grown pools take the bursts for a while, then the load stops.
    sleep(Duration::from_secs(2)).await;
    d.stop().expect("stop");
    let stopped = Instant::now();
    sleep(Duration::from_millis(500)).await;
    let ring = rx_ring(&c, &d).await;
    let mem_stop = attached_inflight_mem(&c, ifx).await.unwrap();
    sleep(Duration::from_secs(3)).await;
    let mem_later = attached_inflight_mem(&c, ifx).await.unwrap();
    let ring_later = rx_ring(&c, &d).await;
    let page = 4096;
    let posted = u64::from(ring) * page;
    println!(
        "after the stop: ring {ring}, inflight-mem {mem_stop} then {mem_later} 3 s later, posted {posted} (+ cache {})",
        128 * page
    );
    if ring_later == ring {
        assert!(
            mem_later > posted + 128 * page,
            "no traffic, yet the pools keep more than the posted buffers and the cache: the parked pages stay counted"
        );
    }
    let limit = Duration::from_secs(2 * 6 + 4 + 10);
    let mut back = None;
    while stopped.elapsed() < limit {
        sleep(Duration::from_millis(250)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        if rx_ring(&c, &d).await <= 2 * 256 {
            back = Some(stopped.elapsed());
            break;
        }
    }
    let Some(took) = back else {
        let now = rx_ring(&c, &d).await;
        panic!(
            "the ring is still {now} {limit:?} after the stop:\n{}",
            p.log()
        );
    };
    sleep(Duration::from_secs(1)).await;
    let end = rx_ring(&c, &d).await;
    let mem_end = attached_inflight_mem(&c, ifx).await.unwrap();
    assert!(mem_end * 2 <= mem_later, "{mem_end} against {mem_later}");
    println!(
        "MEASURE scenario=give_back kernel={k} grown={grown} parked_mem_after_stop={mem_later} ring_end={end} took_s={:.1} mem_end={mem_end}",
        took.as_secs_f64()
    );
    assert_eq!(p.term().await, Some(0));
    d.delete().unwrap();
}

/// Right-sizing, and a kill -9 in the middle of its step: a ring set to
/// the device's maximum (16384) under 256-page bursts, a calm of seconds,
/// `rings.right_size` on. The step (down to the ring that covers the pools'
/// high-water mark, here the 512 floor) is under evaluation (60 s) when
/// the daemon is killed. The record keeps the original and the pending
/// step; a restarted daemon closes the step inconclusive (not failed: no
/// shrink is barred, and nothing reverts it blindly), leaves the ring where
/// the step put it, and `pptune restore` puts the maximum back.
#[tokio::test(flavor = "current_thread")]
async fn kill9_during_a_give_back_step_leaves_it_restorable() {
    let k = require_ppsim(
        "kill9_during_a_give_back_step_leaves_it_restorable",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let knobs = Knobs {
        burst_pages: 256,
        ..Knobs::default()
    }
    .with_preset(CostPreset::Devmem);
    let d = device(1, &knobs);
    d.ethtool_set_rx_ring(16384).expect("ring to max");
    d.start().expect("start");
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-right-size.yaml", Some(d.name()))
        .metrics_port(19879)
        .start();
    let to = wait_ring_change(&c, &d, &mut p, 16384, Duration::from_secs(90)).await;
    assert!(to < 16384, "a give-back step: {to}\n{}", p.log());
    let actions = |st: &serde_json::Value| -> Vec<serde_json::Value> {
        st["devices"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|r| r["actions"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let originals = |st: &serde_json::Value| -> Vec<u64> {
        st["devices"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|r| {
                r["originals"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|o| o["value"].as_u64())
            })
            .collect()
    };
    // The step's record is written before the ring is set (pending, and
    // confirmed after): killed the moment the ring is seen to change, well
    // inside the step's 60 s evaluation, the daemon leaves it.
    p.kill9();
    let st = p.state();
    assert_eq!(originals(&st), vec![16384], "the original is kept: {st}");
    let last = actions(&st).last().cloned().expect("the step's record");
    assert_eq!(
        (last["from"].as_u64(), last["to"].as_u64()),
        (Some(16384), Some(u64::from(to))),
        "{st}"
    );
    assert_eq!(
        last["outcome"]["result"], "pending",
        "killed inside its evaluation: {st}"
    );
    assert_eq!(last["reason"], "calm_shrink", "{st}");
    // Restart: the step's window died with the old daemon.
    p.spawn();
    p.ready().await;
    let v = p.view().await.unwrap();
    let dv = v.devices.iter().find(|x| x.name == d.name()).unwrap();
    let step = dv
        .last_actions
        .iter()
        .find(|a| a.from == 16384)
        .unwrap_or_else(|| panic!("the step in the daemon's view: {dv:?}"));
    assert!(step.outcome.starts_with("inconclusive"), "{dv:?}");
    assert!(dv.originals.iter().any(|(_, v)| *v == 16384), "{dv:?}");
    assert_eq!(
        rx_ring(&c, &d).await,
        to,
        "the ring stays where the step put it"
    );
    // Restore (through the running daemon): the maximum the operator set.
    let out = p.cmd(&["restore"]);
    assert!(out.status.success(), "restore: {out:?}");
    assert_eq!(
        rx_ring(&c, &d).await,
        16384,
        "pptune restore brings the maximum back"
    );
    let st = p.state();
    assert!(originals(&st).is_empty(), "the record cleared: {st}");
    assert_eq!(p.term().await, Some(0));
    println!("MEASURE scenario=give_back_kill9 kernel={k} step_to={to} restored=16384");
    d.stop().unwrap();
    d.delete().unwrap();
}

/// Restart in the middle of a growth chain: the daemon is stopped between
/// growth step 1 and step 2 and started again. The engine's memory (the
/// ring probe step 1 was decided on) comes back from the state file, but
/// step 1's evaluation died with the old daemon (closed inconclusive), so
/// what it did is not known: step 2 is a first step on the bursts now, not
/// a fit across two loads and not the ring limit (docs/decisions.md §4,
/// "Which steps count"). Workload: 1024-page bursts at 100 kpps (devmem);
/// step 1 sizes the ring for them (256 → 1280). While the daemon is down
/// the bursts grow to 4096 pages, so a step 2 is needed. A fit across the
/// restart took 12,549-page bursts beside small returns from the same
/// counters and went 1280 → 15687.
#[tokio::test(flavor = "current_thread")]
async fn restart_between_growth_steps_starts_the_chain_afresh() {
    let k = require_ppsim(
        "restart_between_growth_steps_starts_the_chain_afresh",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let knobs = Knobs {
        burst_pages: 1024,
        rate_pps: 100_000,
        ..Knobs::default()
    }
    .with_preset(CostPreset::Devmem);
    let d = device(1, &knobs);
    assert_eq!(rx_ring(&c, &d).await, 256);
    d.start().expect("start");
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-enforce.yaml", Some(d.name()))
        .metrics_port(19878)
        .start();
    let step1 = wait_ring_change(&c, &d, &mut p, 256, Duration::from_secs(90)).await;
    println!("step 1: 256 -> {step1}");
    assert!(
        step1 < 16384,
        "step 1 is an estimate, not the limit:\n{}",
        p.log()
    );
    // Stop at once, before a second step can come (the daemon saves its
    // state on the way out): the action and the engine's probe are on disk.
    assert_eq!(p.term().await, Some(0), "SIGTERM exits 0");
    assert_eq!(rx_ring(&c, &d).await, step1, "on_stop keep leaves step 1");
    let probe = p.state()["engine"]["state"]["devices"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .find_map(|dv| dv["ring_probe"]["ring"].as_u64());
    assert_eq!(
        probe,
        Some(u64::from(step1)),
        "the state file carries step 1's ring probe: {}",
        p.state()
    );
    let before_restart = p.log().len();
    d.set_knobs(&Knobs {
        burst_pages: 4096,
        ..knobs
    })
    .expect("bigger bursts while the daemon is down");
    p.spawn();
    p.ready().await;
    let step2 = wait_ring_change(&c, &d, &mut p, step1, Duration::from_secs(120)).await;
    let log = p.log();
    let after = &log[before_restart..];
    println!("step 2: {step1} -> {step2}");
    assert!(
        after.contains("engine state restored"),
        "the restarted daemon picked up the engine state:\n{after}"
    );
    assert!(
        after.contains("changes still under evaluation when the last run stopped"),
        "step 1 is closed inconclusive:\n{after}"
    );
    assert!(
        after.contains("\"grow_step\":1.0") && !after.contains("burst fitted"),
        "step 2 after the restart is a first step, not a fit across it:\n{after}"
    );
    // ring_full's figure for 4096-page bursts (exact under devmem) with
    // the headroom: the ring covers the bursts and is no more than twice it.
    assert!(
        (4096..=8192).contains(&step2),
        "step 2 sizes the ring for the bursts now: {step1} -> {step2}\n{after}"
    );
    println!(
        "MEASURE scenario=restart_mid_chain kernel={k} step1=256->{step1} restart step2={step1}->{step2}"
    );
    assert_eq!(p.term().await, Some(0));
    d.stop().unwrap();
    d.delete().unwrap();
}

/// Waits until the kernel's ring differs from `from`; returns the new value.
async fn wait_ring_change(
    c: &Client,
    d: &PpsimDev,
    p: &mut Daemon,
    from: u32,
    limit: Duration,
) -> u32 {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        sleep(Duration::from_millis(250)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        let r = rx_ring(c, d).await;
        if r != from {
            return r;
        }
    }
    panic!("the ring stayed {from} for {limit:?}:\n{}", p.log());
}

/// Scenario 6: `ethtool -G` by hand after pptune's first change: pptune
/// stops managing the ring (the override shows in its control socket and
/// metrics) and leaves the operator's value alone although bursts still
/// overflow it.
#[tokio::test(flavor = "current_thread")]
async fn ethtool_by_hand_is_an_operator_override() {
    let k = require_ppsim(
        "ethtool_by_hand_is_an_operator_override",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let d = device(1, &bursty());
    d.start().expect("start");
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-enforce.yaml", Some(d.name()))
        .metrics_port(19875)
        .start();
    let raised = wait_ring_change(&c, &d, &mut p, 256, Duration::from_secs(90)).await;
    d.ethtool_set_rx_ring(512).expect("ethtool -G rx 512");
    // Longer than cooldown + evaluation + a finding: pptune would act again.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(25) {
        sleep(Duration::from_millis(500)).await;
        assert!(p.alive());
        assert_eq!(
            rx_ring(&c, &d).await,
            512,
            "pptune changed the operator's ring:\n{}",
            p.log()
        );
    }
    let w = measure(&c, &d, 2.0).await;
    let v = p.view().await.unwrap();
    let dv = v.devices.iter().find(|x| x.name == d.name()).unwrap();
    println!(
        "view: overrides {:?} last decision {:?}",
        dv.overrides, dv.last_decision
    );
    assert!(
        !dv.overrides.is_empty(),
        "the override is visible in the control socket: {dv:?}"
    );
    let dev_label = format!("device=\"{}\"", d.name());
    let n = p.metric("pptune_operator_overrides_total", &[&dev_label]);
    assert!(n >= 1.0, "override counted in metrics:\n{}", p.metrics());
    println!(
        "MEASURE scenario=override kernel={k} pptune_set={raised} operator_set=512 ring_after_25s=512 ring_full_share_at_512={:.4} overrides_total={n}",
        w.miss_share
    );
    assert_eq!(p.term().await, Some(0));
    d.stop().unwrap();
    d.delete().unwrap();
}

/// Scenario 5: a per-device budget below the ideal ring: pptune grows only
/// as far as the budget allows and says `budget_exhausted`.
#[tokio::test(flavor = "current_thread")]
async fn memory_budget_stops_growth_and_says_so() {
    let k = require_ppsim(
        "memory_budget_stops_growth_and_says_so",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let d = device(1, &bursty());
    d.start().expect("start");
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-budget.yaml", Some(d.name()))
        .metrics_port(19874)
        .start();
    let dev_label = format!("device=\"{}\"", d.name());
    let t0 = Instant::now();
    let mut said = 0.0;
    while t0.elapsed() < Duration::from_secs(90) {
        sleep(Duration::from_secs(1)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        let r = rx_ring(&c, &d).await;
        // (posted + pool + 128) × 4 KiB ≤ 8 MiB on one queue.
        assert!(r <= 960, "ring {r} exceeds the 8 MiB budget");
        said = p.metric(
            "pptune_decisions_total",
            &[&dev_label, "reason=\"budget_exhausted\""],
        );
        if said > 0.0 && r > 256 {
            break;
        }
    }
    let ring = rx_ring(&c, &d).await;
    let w = measure(&c, &d, 2.0).await;
    let log_says = p.log().contains("budget_exhausted");
    println!(
        "MEASURE scenario=budget kernel={k} budget=8MiB ring={ring} ring_full_share={:.4} budget_exhausted_decisions={said} log_mentions={log_says}",
        w.miss_share
    );
    assert!(
        ring > 256,
        "pptune grew the ring within the budget:\n{}",
        p.log()
    );
    assert!(said > 0.0, "no budget_exhausted decision:\n{}", p.log());
    assert!(log_says, "the log says budget_exhausted");
    assert!(
        w.miss_share >= MISS_THRESHOLD,
        "still overflowing at the budget: {w:?}"
    );
    assert_eq!(p.term().await, Some(0));
    d.stop().unwrap();
    d.delete().unwrap();
}

/// `net.core.rmem_max` set for a test and put back on drop (also when the
/// test fails, so later suites in the same VM get the usual value).
struct RmemMax(String);

impl RmemMax {
    const PATH: &str = "/proc/sys/net/core/rmem_max";

    fn set(v: u32) -> Self {
        let old = std::fs::read_to_string(Self::PATH).unwrap();
        std::fs::write(Self::PATH, v.to_string()).unwrap();
        Self(old.trim().to_owned())
    }
}

impl Drop for RmemMax {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::PATH, &self.0);
    }
}

/// Scenario 4a: notifications lost. `net.core.rmem_max` caps the receive
/// buffer pptune asks for on its notification sockets, so with it at 4 KiB
/// a burst of pool churn (ring changes by hand on a 16-queue device: every
/// change replaces 16 pools) overflows them (ENOBUFS). The daemon is
/// stopped (SIGSTOP) while the churn lands, so the overflow does not
/// depend on how fast it reads: left running, it once kept up with the 31
/// changes and nothing overflowed. pptune must resync and end with the
/// kernel's state: its ring and pool-count series equal what the kernel
/// reports.
#[tokio::test(flavor = "current_thread")]
async fn lost_notifications_resync_to_the_kernels_state() {
    let k = require_ppsim(
        "lost_notifications_resync_to_the_kernels_state",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let d = device(16, &Knobs::default());
    let rmem = RmemMax::set(4096);
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-observe.yaml", Some(d.name()))
        .metrics_port(19873)
        .start();
    p.ready().await;
    // The sockets are open with the small buffer; give the VM its value back.
    drop(rmem);
    let dev_label = format!("device=\"{}\"", d.name());
    let r0 = p.metric("pptune_resyncs_total", &[]);
    p.signal(Signal::SIGSTOP);
    for i in 0..30 {
        d.ethtool_set_rx_ring(if i % 2 == 0 { 512 } else { 1024 })
            .unwrap();
    }
    d.ethtool_set_rx_ring(2048).unwrap();
    p.signal(Signal::SIGCONT);
    let ifx = d.ifindex().unwrap();
    let kernel_pools = attached_pools(&c, ifx).await.expect("page-pool-get").len();
    // A resync is debounced (200 ms) and samples run every second.
    let t0 = Instant::now();
    let (mut ring_m, mut pools_m, mut resyncs) = (0.0, 0.0, 0.0);
    while t0.elapsed() < Duration::from_secs(20) {
        sleep(Duration::from_secs(1)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        let m = p.metrics();
        ring_m = pptune_tests::exposition::sample_sum(
            &m,
            "pptune_ring_entries",
            &[&dev_label, "ring=\"rx\""],
        );
        // The device's own gauge: the default exports 4 of the 16 queues.
        pools_m = pptune_tests::exposition::sample_sum(&m, "pptune_device_pools", &[&dev_label]);
        resyncs = pptune_tests::exposition::sample_sum(&m, "pptune_resyncs_total", &[]) - r0;
        if resyncs > 0.0 && ring_m == 2048.0 && pools_m == kernel_pools as f64 {
            break;
        }
    }
    let overflow_logged = p.log().contains("ENOBUFS");
    println!(
        "MEASURE scenario=notification_loss kernel={k} rmem_max=4096 ring_changes=31 queues=16 resyncs={resyncs} overflow_logged={overflow_logged} pptune_ring={ring_m} kernel_ring={} pptune_pools={pools_m} kernel_pools={kernel_pools}",
        rx_ring(&c, &d).await
    );
    assert!(
        overflow_logged,
        "the notification sockets did not overflow (no ENOBUFS logged):\n{}",
        p.log()
    );
    assert!(
        resyncs > 0.0,
        "no resync counted although notifications overflowed:\n{}",
        p.log()
    );
    assert_eq!(
        ring_m,
        f64::from(rx_ring(&c, &d).await),
        "pptune's ring = the kernel's"
    );
    assert_eq!(
        pools_m, kernel_pools as f64,
        "pptune's pool count = the kernel's"
    );
    assert_eq!(p.term().await, Some(0));
    d.delete().unwrap();
}

/// Scenario 4b: the device is deleted the moment pptune's ring change lands
/// (during its read-back/evaluation): the daemon keeps running and
/// sampling, drops the device from its view and metrics, and its state
/// record stays valid.
#[tokio::test(flavor = "current_thread")]
async fn device_deleted_mid_change_leaves_the_daemon_consistent() {
    let k = require_ppsim(
        "device_deleted_mid_change_leaves_the_daemon_consistent",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let d = device(1, &bursty());
    d.start().expect("start");
    let name = d.name().to_owned();
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-enforce.yaml", Some(&name))
        .metrics_port(19872)
        .start();
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "no change:\n{}",
            p.log()
        );
        assert!(p.alive());
        if rx_ring(&c, &d).await != 256 {
            break;
        }
        sleep(Duration::from_millis(20)).await;
    }
    d.delete().expect("delete mid-change");
    let s0 = p.metric("pptune_samples_total", &[]);
    sleep(Duration::from_secs(5)).await;
    assert!(
        p.alive(),
        "pptune died after the device vanished:\n{}",
        p.log()
    );
    let s1 = p.metric("pptune_samples_total", &[]);
    assert!(s1 > s0, "pptune keeps sampling ({s0} → {s1})");
    let v = p.view().await.expect("control socket answers");
    assert!(
        v.devices.iter().all(|x| x.name != name),
        "the vanished device is gone from the view: {v:?}"
    );
    let dev_label = format!("device=\"{name}\"");
    let m = p.metrics();
    assert!(
        !m.lines()
            .any(|l| l.starts_with("pptune_ring_entries") && l.contains(&dev_label)),
        "its ring series is gone"
    );
    let st = p.state();
    assert!(st["devices"].is_object(), "state record valid: {st}");
    // The change's window ended with its device: its record is closed (a
    // `pending` one would hold the device, were it to come back, until
    // the daemon restarted).
    let results: Vec<&serde_json::Value> = st["devices"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|d| d["actions"].as_array())
        .flatten()
        .map(|a| &a["outcome"]["result"])
        .collect();
    assert!(
        !results.is_empty()
            && results
                .iter()
                .all(|r| *r == "inconclusive" || *r == "failed"),
        "the change's record is closed: {st}"
    );
    println!("MEASURE scenario=delete_mid_change kernel={k} samples {s0}→{s1} state={st}");
    assert_eq!(p.term().await, Some(0));
}

/// Scenario 3: channels enabled, ppsim's contention knob on: the ring is
/// raised before any queue is added, and no queue is added while the slow
/// path is contended (slow-refill share ≥ the policy's grow_slow_refill in
/// the kernel's pool stats just before the change).
#[tokio::test(flavor = "current_thread")]
async fn channels_rings_first_and_no_queue_while_contended() {
    let k = require_ppsim(
        "channels_rings_first_and_no_queue_while_contended",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    // A fixed arrival rate above what the queues deliver, so RX drops give
    // the channel rule something to act on once recycling is healthy.
    let knobs = Knobs {
        rate_pps: 400_000,
        contention_pct: 50,
        ..bursty()
    };
    let d = device(2, &knobs);
    d.start().expect("start");
    let ifx = d.ifindex().unwrap();
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-channels.yaml", Some(d.name()))
        .metrics_port(19879)
        .start();
    // (t, ring, channels, slow share over the last interval if the pools
    // were stable)
    let mut trace: Vec<(f64, u32, u32, Option<f64>)> = Vec::new();
    let t0 = Instant::now();
    let mut ids = attached_pools(&c, ifx).await.expect("page-pool-get");
    let mut s_prev = stats_of(&c, &ids).await.expect("page-pool-stats-get");
    let mut last_change = Instant::now();
    let mut changed = false;
    let mut channels_changed = false;
    while t0.elapsed() < Duration::from_secs(110) {
        sleep(Duration::from_millis(500)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        let ring = rx_ring(&c, &d).await;
        let ch = combined(&c, &d).await;
        let now_ids = attached_pools(&c, ifx).await.expect("page-pool-get");
        let s = stats_of(&c, &now_ids).await.expect("page-pool-stats-get");
        let share = if now_ids == ids {
            s.delta(&s_prev)
                .and_then(|dl| slow_refill_share(&dl, false))
        } else {
            None
        };
        ids = now_ids;
        s_prev = s;
        if trace
            .last()
            .is_some_and(|(_, r, n, _)| (*r, *n) != (ring, ch))
        {
            last_change = Instant::now();
            changed = true;
            channels_changed |= trace.last().is_some_and(|(_, _, n, _)| *n != ch);
        }
        trace.push((t0.elapsed().as_secs_f64(), ring, ch, share));
        // Queues come (if at all) a cooldown and an evaluation after the
        // ring settles: wait for them, then for quiet.
        let quiet = if channels_changed { 20 } else { 40 };
        if changed && last_change.elapsed() > Duration::from_secs(quiet) {
            break;
        }
    }
    let mut events = Vec::new();
    for w in trace.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if (a.1, a.2) != (b.1, b.2) {
            events.push((b.0, a.1, b.1, a.2, b.2));
        }
    }
    println!("events (t, ring from→to, channels from→to): {events:?}");
    let first_ring = events.iter().position(|e| e.2 > e.1);
    let first_add = events.iter().position(|e| e.4 > e.3);
    assert!(
        first_ring.is_some(),
        "the ring was raised: {trace:?}\n{}",
        p.log()
    );
    if let Some(a) = first_add {
        assert!(first_ring.unwrap() < a, "rings before queues: {events:?}");
        // Every queue addition: the slow path was not contended in the
        // kernel's counters over the 2 s before it.
        for e in events.iter().filter(|e| e.4 > e.3) {
            let recent: Vec<f64> = trace
                .iter()
                .filter(|t| t.0 < e.0 && t.0 >= e.0 - 2.5)
                .filter_map(|t| t.3)
                .collect();
            assert!(
                recent.iter().all(|s| *s < SLOW_THRESHOLD),
                "queue added at {:.1}s while the slow path was contended: {recent:?}",
                e.0
            );
        }
    }
    let w = measure(&c, &d, 2.0).await;
    println!(
        "MEASURE scenario=channels kernel={k} {} | events={} ring_raises={} queue_adds={} queue_removals={} | end ring={} channels={} ring_full_share={:.4} slow_refill_share={:.4} goodput_pps={:.0}",
        knobs_line(&knobs),
        events.len(),
        events.iter().filter(|e| e.2 > e.1).count(),
        events.iter().filter(|e| e.4 > e.3).count(),
        events.iter().filter(|e| e.4 < e.3).count(),
        w.ring,
        combined(&c, &d).await,
        w.miss_share,
        w.slow_share,
        w.goodput_pps
    );
    // pptune's own account of each change, for the report (not asserted).
    for l in p.log().lines().filter(|l| {
        (l.contains("\"action\"") && !l.contains("\"action\":\"hold\""))
            || l.contains("revert")
            || l.contains("effective")
    }) {
        println!("pptune: {l}");
    }
    assert_eq!(p.term().await, Some(0));
    d.stop().unwrap();
    d.delete().unwrap();
}

/// The held-pages queue case: from 16 queues at ring 256 the ring cannot
/// help (released_refcnt, no ring_full) but fewer queues contend less.
/// pptune cuts queues as trials (`channels_shrink_trial`), each judged on
/// the kernel's rx-packets rate: kept while it rises, the first that does
/// not is put back, and then nothing changes (no flapping). It ends at 8
/// or 10 queues (the model's peak is 8; 10 is 0.97 of it: a 10 → 8 gain of
/// 3.3 % can read under the 2 % margin in 1 s windows), the ring never
/// moves, and the modelled goodput is within 5 % of the best count's.
///
/// The outcome (where it ends, how many trials, the modelled goodput) is
/// judged on a measured rate gain of a few percent, which holds only while
/// the emulated CPU keeps up with the paced model: a queue that wrote off
/// lag (`pace_behind_ns`) during the run read a trial's gain short (the
/// cold CI run of 67b5fc6: 14 → 12 read +1.2 % with 147 ms written off,
/// beside the ppsim VM). Such a run is measured again on a fresh device, up
/// to three times; one where no queue fell behind decides. The invariants
/// (the ring never moves, one revert and nothing after) hold in every run.
#[tokio::test(flavor = "current_thread")]
async fn held_pages_shed_queues_while_the_rate_rises() {
    let k = require_ppsim(
        "held_pages_shed_queues_while_the_rate_rises",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let mut tried = Vec::new();
    for attempt in 1..=3 {
        match held_shed_attempt(&k, &c).await {
            Ok(()) => return,
            Err((why, behind_ns)) => {
                println!("attempt {attempt}: {why}; lag written off {behind_ns} ns");
                tried.push(format!(
                    "attempt {attempt} (lag written off {behind_ns} ns): {why}"
                ));
                // The CPU kept up: the verdict stands.
                if behind_ns <= HELD_SHED_LAG_SLACK_NS {
                    break;
                }
            }
        }
    }
    panic!("the held-pages queue case failed:\n{}", tried.join("\n"));
}

/// Lag a queue may write off in a held-shed run before its outcome is void
/// (10 ms over a ~50 s run: scheduling noise, not a lost window).
const HELD_SHED_LAG_SLACK_NS: u64 = 10_000_000;

/// One run of the held-pages queue case on a fresh device: `Err` with the
/// outcome that failed and the most lag a queue wrote off; the invariants
/// panic.
async fn held_shed_attempt(k: &str, c: &Client) -> Result<(), (String, u64)> {
    let knobs = Knobs::queues_held();
    let d = device(16, &knobs);
    d.start().expect("start");
    let dir = tmp();
    let mut p = Daemon::new(dir.path(), "closed-loop-shed.yaml", Some(d.name()))
        .metrics_port(19883)
        .start();
    // (t, ring, channels), every 500 ms until 30 s without a change.
    let mut trace: Vec<(f64, u32, u32)> = Vec::new();
    let t0 = Instant::now();
    let mut last_change = Instant::now();
    while t0.elapsed() < Duration::from_secs(180) {
        sleep(Duration::from_millis(500)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        let now = (rx_ring(c, &d).await, combined(c, &d).await);
        if trace.last().is_some_and(|(_, r, n)| (*r, *n) != now) {
            last_change = Instant::now();
        }
        trace.push((t0.elapsed().as_secs_f64(), now.0, now.1));
        if last_change.elapsed() > Duration::from_secs(30) && trace.len() > 60 {
            break;
        }
    }
    let mut counts: Vec<u32> = vec![16];
    for t in &trace {
        if counts.last() != Some(&t.2) {
            counts.push(t.2);
        }
    }
    let g0 = d.goodput().expect("goodput");
    sleep(Duration::from_secs(2)).await;
    let g1 = d.goodput().expect("goodput");
    let modelled = g1.modelled_pps_since(&g0);
    let behind = d
        .queues()
        .expect("queues")
        .iter()
        .map(|q| q.pace_behind_ns)
        .max()
        .unwrap_or(0);
    let reverted = p.metric(
        "pptune_actions_total",
        &["knob=\"channels.combined\"", "result=\"reverted\""],
    );
    let trials = p.metric(
        "pptune_decisions_total",
        &[
            "reason=\"channels_shrink_trial\"",
            "action=\"set_channels\"",
        ],
    );
    println!(
        "MEASURE scenario=held_shed kernel={k} {} pace_scale={} | counts={counts:?} ring={} trials={trials} reverted={reverted} modelled_pps={modelled:.0} max_pace_behind_ns={behind} | secs={:.0}",
        knobs_line(&knobs),
        knobs.pace_scale,
        trace.last().map_or(0, |t| t.1),
        t0.elapsed().as_secs_f64()
    );
    for l in p.log().lines().filter(|l| {
        l.contains("channels_shrink_trial") || l.contains("revert") || l.contains("effective")
    }) {
        println!("pptune: {l}");
    }
    assert!(
        trace.iter().all(|t| t.1 == 256),
        "the ring never moves: {trace:?}"
    );
    // Down in steps of 2, then one step back up (the revert), and no more.
    let downs = counts.windows(2).filter(|w| w[1] < w[0]).count();
    let ups = counts.windows(2).filter(|w| w[1] > w[0]).count();
    assert_eq!(ups, 1, "one trial put back: {counts:?}");
    assert_eq!(counts.len(), downs + 2, "cuts, then one revert: {counts:?}");
    assert!(reverted >= 1.0, "{}", p.metrics());
    let end = *counts.last().unwrap();
    if end != 8 && end != 10 {
        return Err((
            format!("ends at {end} queues, not 8 or 10: {counts:?}"),
            behind,
        ));
    }
    if trials < 4.0 {
        return Err((
            format!("{trials} trials, not 4 or more: {counts:?}"),
            behind,
        ));
    }
    if modelled < 0.95 * 3_124_275.0 {
        return Err((
            format!("modelled {modelled:.0} below 0.95 of the best count's 3,124,275"),
            behind,
        ));
    }
    assert_eq!(p.term().await, Some(0));
    Ok(())
}

/// The closed loop on real traffic: four TCP streams over
/// ppsim's wire into B (netns `pp-rx`, 1 queue, ring 256), their receivers
/// pausing 50 ms and draining in sync, so the pages come back from socket
/// reads, GRO and TCP's queues, overlapping the refills; receive buffers
/// pinned (`DRAIN_PINNED`), so the bursts do not keep growing under the
/// measurement. pptune runs in
/// `pp-rx` on B with the suite's enforce policy. Judged from the kernel's
/// own counters: before pptune, B's pools free ≥ 5 % of returns
/// (`ring_full`); pptune raises the ring in at most three changes and
/// then holds it 15 s (three cooldowns and evaluations), over which the
/// pools free under 5 %; TCP delivers every byte intact; every page comes
/// home and the kernel log stays clean. tests/vm/test.sh boots it under
/// the iommu-strict host profile (a miss maps and unmaps through the
/// emulated IOMMU) on one vCPU and on two: there pptune must price the
/// miss, and every decision's evidence says the factor it divided its
/// thresholds by (above 1 under an IOMMU, 1 elsewhere).
#[test]
fn wire_draining_tcp_converges_and_holds() {
    let k = require_ppsim(
        "wire_draining_tcp_converges_and_holds",
        PpsimKernels::Only73,
    );
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if let Ok(want) = std::env::var("PPTUNE_VM_EXPECT_CPUS") {
        assert_eq!(cpus.to_string(), want, "vCPUs in this VM");
    }
    let priced = pptune_tests::vm::profile().is_some_and(pptune_tests::vm::Profile::iommu);
    let mark = dmesg_mark();
    let p = Ppsim::load().expect("ppsim loads");
    let w = Wire::build(&p, 1, 256);
    let args: Vec<&str> = DRAIN_PINNED
        .iter()
        .copied()
        .chain([
            "--duration-ms",
            "100000",
            "--seed",
            "29",
            "--verify",
            "--port",
            "5329",
        ])
        .collect();
    let traffic = Traffic::spawn(&pptune_tests::pptraffic!(), &args);
    std::thread::sleep(Duration::from_secs(1));
    let (before, before_d) = b_freed(&w, 3).expect("nothing changes B's ring before pptune starts");
    assert!(
        before >= MISS_THRESHOLD,
        "{k}: the streams must overflow ring 256 for the test to mean anything: {before_d:?}"
    );
    let dir = tmp();
    let mut d = in_netns(RX_NS, || async {
        Daemon::new(dir.path(), "closed-loop-enforce.yaml", Some(w.b.name()))
            .metrics_port(19872)
            .start()
    });
    let t0 = Instant::now();
    let watch = watch_until_held(&w, &mut d, t0, 256, Duration::from_secs(85));
    let (ring, changes) = (watch.ring, &watch.changes);
    let t = Traffic::wait(traffic);
    let log = d.log();
    d.kill9();
    let head: Vec<&str> = log.lines().take(60).collect();
    println!("pptune's log, first 60 lines:\n{}", head.join("\n"));
    let factors = evidence_values(&log, "miss_cost_factor");
    assert!(
        !factors.is_empty() && factors.iter().all(|&f| (f > 1.0) == priced),
        "{k}: the decisions' miss_cost_factor {factors:?}, under a profile that {} a miss",
        if priced { "prices" } else { "does not price" }
    );
    let (after, _) = watch.held(&k, &d, "");
    println!(
        "MEASURE scenario=wire_drain kernel={k} vcpus={cpus} priced={priced} miss_cost_factor={:?} streams=4 pattern=drain --sync --pause-ms 50 --rcvbuf 1048576 | \
         before ring=256 ring_full_share={before:.4} | changes (s since pptune started, ring) {changes:?} | \
         after ring={ring} ring_full_share={after:.4} held_15s=true | {} bytes, InSegs {}, RetransSegs {}",
        factors.first(),
        t.received(),
        t.snmp("Tcp.InSegs"),
        t.snmp("Tcp.RetransSegs"),
    );
    t.assert_intact("4 draining streams while pptune tuned B");
    assert!(
        ring > 256,
        "{k}: pptune never raised B's ring:\n{}",
        d.tail(40)
    );
    wire_ends_clean(w, mark, &k);
}

/// The numbers a decision's evidence gave `key` in a daemon log, in either
/// log format (`key=1.84` in text, `"key":1.84` in JSON).
fn evidence_values(log: &str, key: &str) -> Vec<f64> {
    log.match_indices(key)
        .filter_map(|(i, _)| {
            let rest = log[i + key.len()..].trim_start_matches(['=', '"', ':', ' ']);
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+')))
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}

/// A queue-count change between two ring growth steps, on the wire: B has four queues (ring 256) under [`DRAIN_PINNED_4M`]'s four
/// draining streams, spread over them by ppsim's RSS hash. Once pptune's
/// first growth lands, the operator takes B to one queue (`ethtool -L`),
/// so every stream's returns come to the one pool left, sized for a
/// quarter of them. From the kernel's counters: the pools free ≥ 5 % of
/// returns again after the cut; pptune grows the ring again (it must not
/// read the first step's outcome as "growth does not help"), and no
/// growth after the cut is calibrated on the first step's probe, which
/// saw the load over four queues (`RingProbe::applies`: the evidence's
/// `ring_probe_known` is 0; a later step's probe, taken on one queue, may
/// calibrate); the ring then holds 15 s with the pools freeing under 5 %,
/// in at most three changes after the cut; TCP delivers every byte intact, every page comes
/// home and the kernel log stays clean.
#[test]
fn wire_queue_count_change_between_ring_steps() {
    let k = require_ppsim(
        "wire_queue_count_change_between_ring_steps",
        PpsimKernels::Only73,
    );
    let FourQueues {
        w,
        traffic,
        mut d,
        dir: _dir,
        t0,
        first,
        mark,
    } = four_queues_first_growth(&k, "47", "5347", 19873);
    w.set_b_channels(1);
    let cut = t0.elapsed().as_secs_f64();
    let qs = w.b.queues().expect("queues");
    assert!(
        qs.len() == 1 && qs[0].ring == first,
        "{k}: B after the cut: {qs:?}"
    );
    // The cut must matter: one pool of `first` now takes four streams.
    // Measured on the pools B has after it, until pptune's next step
    // rebuilds them (its cooldown can end within a second or two of the
    // cut), at most 3 s, at least 1 s.
    let Some((at_cut, at_cut_d, covered)) = b_freed_while(&w, first, 3.0) else {
        panic!(
            "{k}: no reading of B's pools after the cut before its ring left {first} (now {}):\n{}",
            b_ring(&w),
            d.tail(40)
        );
    };
    assert!(
        covered >= 1.0,
        "{k}: B's pools lasted only {covered:.2} s after the cut: too little to judge the cut by"
    );
    let watch = watch_until_held(&w, &mut d, t0, first, Duration::from_secs(120));
    let (ring, changes) = (watch.ring, &watch.changes);
    let t = Traffic::wait(traffic);
    let log = d.log();
    d.kill9();
    let growths = ring_growths(&log);
    println!(
        "MEASURE scenario=wire_queue_cut kernel={k} streams=4 queues=4->1 | first growth 256 -> {first}, cut at {cut:.1} s | \
         freed after the cut {at_cut:.4} over {covered:.1} s | changes after the cut (s since pptune started, ring) {changes:?} | \
         growths (from, to, ring_probe_known) {growths:?} | after {:?} | {} bytes, RetransSegs {}",
        watch
            .after
            .as_ref()
            .map(|(s, _)| format!("ring={ring} ring_full_share={s:.4}")),
        t.received(),
        t.snmp("Tcp.RetransSegs"),
    );
    t.assert_intact("4 draining streams while B lost three queues and pptune tuned it");
    assert!(
        at_cut >= MISS_THRESHOLD,
        "{k}: the cut to one queue must overflow ring {first} for the test to mean anything: {at_cut_d:?}"
    );
    watch.held(&k, &d, &format!("growths {growths:?}"));
    assert!(
        ring > first && growths.len() >= 2,
        "{k}: pptune did not grow B again after the cut (ring {ring}, growths {growths:?}):\n{}",
        d.tail(60)
    );
    // The step from the ring the cut left: its probe was taken on four
    // queues. A later step's probe was taken on one, and may calibrate.
    let after_cut = growths.iter().find(|&&(from, _, _)| from == first);
    assert!(
        after_cut.is_some_and(|&(_, _, known)| known == 0.0),
        "{k}: the growth from {first} after the cut was calibrated on the four-queue probe, or not logged: {growths:?}"
    );
    wire_ends_clean(w, mark, &k);
}

/// One queue's returns outgrowing a ring step among busy ones, on the
/// wire (`evaluate::outgrown`): B has four queues (ring 256)
/// under [`DRAIN_PINNED_4M`]'s four draining streams. As pptune's first growth
/// lands, a fifth stream starts, landing on one of the queues (ppsim's RSS
/// hash of its ephemeral port): its receiver drains an 8 MiB buffer every
/// 300 ms, so that queue's pages out grow several times over inside the
/// step's evaluation while the others hold. The step must not be judged
/// ineffective for it (which would bar growth for the record's hour): its
/// verdict is effective, or not judged because the returns grew; pptune
/// grows on as the fifth stream needs, and the ring then holds 15 s with
/// the pools freeing under 5 %, in at most three changes after the first;
/// both runs of TCP deliver every byte intact, every page comes home and
/// the kernel log stays clean. The MEASURE line says which verdict the
/// wire gave (the unit row `one_queue_outgrowing_a_step_among_busy_ones_is_not_judged`
/// is the one that fails on a device-wide rule).
#[test]
fn wire_one_queue_outgrowing_a_step_is_not_judged_ineffective() {
    let k = require_ppsim(
        "wire_one_queue_outgrowing_a_step_is_not_judged_ineffective",
        PpsimKernels::Only73,
    );
    let FourQueues {
        w,
        traffic,
        mut d,
        dir: _dir,
        t0,
        first,
        mark,
    } = four_queues_first_growth(&k, "48", "5348", 19874);
    let fifth = Traffic::spawn(
        &pptune_tests::pptraffic!(),
        &[
            "--tcp",
            "1",
            "--pattern",
            "drain",
            "--pause-ms",
            "300",
            "--rcvbuf",
            "8388608",
            "--duration-ms",
            "110000",
            "--seed",
            "49",
            "--verify",
            "--port",
            "5349",
        ],
    );
    let watch = watch_until_held(&w, &mut d, t0, first, Duration::from_secs(120));
    let (ring, changes) = (watch.ring, &watch.changes);
    let t = Traffic::wait(traffic);
    let t5 = Traffic::wait(fifth);
    let log = d.log();
    d.kill9();
    let verdicts = change_verdicts(&log);
    let of_first = verdicts
        .iter()
        .find(|(from, to, _)| (*from, *to) == (256, first))
        .map(|v| v.2.clone());
    println!(
        "MEASURE scenario=wire_one_queue_outgrows kernel={k} streams=4+1 queues=4 | first growth 256 -> {first} | \
         its verdict {of_first:?} | changes after it (s since pptune started, ring) {changes:?} | verdicts {verdicts:?} | after {:?} | \
         {} + {} bytes, RetransSegs {} + {}",
        watch
            .after
            .as_ref()
            .map(|(s, _)| format!("ring={ring} ring_full_share={s:.4}")),
        t.received(),
        t5.received(),
        t.snmp("Tcp.RetransSegs"),
        t5.snmp("Tcp.RetransSegs"),
    );
    t.assert_intact("4 draining streams beside a fifth while pptune tuned B");
    t5.assert_intact("the fifth stream, started under pptune's first step");
    let ineffective: Vec<_> = verdicts
        .iter()
        .filter(|(from, to, v)| to > from && v.starts_with("ineffective"))
        .collect();
    assert!(
        ineffective.is_empty(),
        "{k}: a growth was judged ineffective: {ineffective:?}:\n{}",
        d.tail(60)
    );
    assert!(
        of_first.is_some(),
        "{k}: no verdict on the first step 256 -> {first}: {verdicts:?}:\n{}",
        d.tail(60)
    );
    watch.held(&k, &d, &format!("verdicts {verdicts:?}"));
    wire_ends_clean(w, mark, &k);
}

/// The verdicts pptune's log gives its changes, in order: (from, to, the
/// outcome and why), from the actuator's `change A -> B: outcome: why`
/// messages (the daemon logs JSON lines here, its output not a terminal).
fn change_verdicts(log: &str) -> Vec<(u32, u32, String)> {
    log_messages(log)
        .filter_map(|(_, m)| {
            let rest = m.strip_prefix("change ")?;
            let (from, rest) = rest.split_once(" -> ")?;
            let (to, outcome) = rest.split_once(": ")?;
            Some((from.parse().ok()?, to.parse().ok()?, outcome.to_owned()))
        })
        .collect()
}

/// Each JSON line of a daemon log, with its `message`.
fn log_messages(log: &str) -> impl Iterator<Item = (serde_json::Value, String)> + '_ {
    log.lines().filter_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        let m = v.get("message")?.as_str()?.to_owned();
        Some((v, m))
    })
}

/// The ring growths pptune's log announces, in order: (from, to, the
/// decision's `ring_probe_known`), from its decisions whose action is
/// `ring.rx A -> B` with B > A.
fn ring_growths(log: &str) -> Vec<(u32, u32, f64)> {
    log_messages(log)
        .filter_map(|(v, _)| {
            let action = v.get("action")?.as_str()?.strip_prefix("ring.rx ")?;
            let (from, to) = action.split_once(" -> ")?;
            let (from, to): (u32, u32) = (from.parse().ok()?, to.parse().ok()?);
            let known = v.get("evidence")?.get("ring_probe_known")?.as_f64()?;
            (to > from).then_some((from, to, known))
        })
        .collect()
}

/// The start of the four-queue wire scenarios: B with four queues at ring
/// 256 under [`DRAIN_PINNED_4M`] (130 s, the given seed and port), whose
/// drains must overflow it (≥ 5 % of returns freed over 3 s before pptune
/// starts, or the scenario means nothing); pptune started on B with the
/// closed-loop enforce policy; returned once its first growth landed.
struct FourQueues {
    w: Wire,
    traffic: std::process::Child,
    d: Daemon,
    dir: tempfile::TempDir,
    t0: Instant,
    first: u32,
    /// The kernel log's length before the wire was built.
    mark: usize,
}

fn four_queues_first_growth(k: &str, seed: &str, port: &str, metrics: u16) -> FourQueues {
    let mark = dmesg_mark();
    let p = Ppsim::load().expect("ppsim loads");
    let w = Wire::build(&p, 4, 256);
    let args: Vec<&str> = DRAIN_PINNED_4M
        .iter()
        .copied()
        .chain([
            "--duration-ms",
            "130000",
            "--seed",
            seed,
            "--verify",
            "--port",
            port,
        ])
        .collect();
    let traffic = Traffic::spawn(&pptune_tests::pptraffic!(), &args);
    std::thread::sleep(Duration::from_secs(2));
    let (before, before_d) = b_freed(&w, 3).expect("nothing changes B's ring before pptune starts");
    assert!(
        before >= MISS_THRESHOLD,
        "{k}: the streams must overflow ring 256 on four queues for the test to mean anything: {before_d:?}"
    );
    let dir = tmp();
    let mut d = in_netns(RX_NS, || async {
        Daemon::new(dir.path(), "closed-loop-enforce.yaml", Some(w.b.name()))
            .metrics_port(metrics)
            .start()
    });
    let t0 = Instant::now();
    let first = loop {
        assert!(d.alive(), "pptune died:\n{}", d.log());
        assert!(
            t0.elapsed() < Duration::from_secs(45),
            "{k}: no first growth inside 45 s on four queues (freed {before:.4} before):\n{}",
            d.tail(40)
        );
        std::thread::sleep(Duration::from_millis(250));
        let r = b_ring(&w);
        if r > 256 {
            break r;
        }
    };
    FourQueues {
        w,
        traffic,
        d,
        dir,
        t0,
        first,
        mark,
    }
}

/// The end every wire scenario shares: every page comes home once the
/// sockets closed, the pools go with their devices, and the kernel log
/// has stayed quiet since `mark`.
fn wire_ends_clean(w: Wire, mark: usize, k: &str) {
    let home = Duration::from_secs(15);
    w.wait_b_quiet(home)
        .unwrap_or_else(|e| panic!("{k}: pages still out after the sockets closed: {e}"));
    w.teardown(home)
        .unwrap_or_else(|pools| panic!("{k}: pools outlived their devices: {pools:#?}"));
    assert_quiet_kernel(mark, k);
}

/// The settle time of the wire scenarios: B's ring holds this long, the
/// last 6 s of it measured, before a scenario takes its figures (three
/// cooldowns and evaluations of the closed-loop policy).
const SETTLE: Duration = Duration::from_secs(15);

/// B's ring (its first queue's: ethtool sets every queue's).
fn b_ring(w: &Wire) -> u32 {
    w.b.queues().expect("queues").first().map_or(0, |q| q.ring)
}

/// The share of returns B's pools freed (`ring_full`) over `secs`, its
/// pools at the start, from page-pool-stats in pp-rx, with the counters;
/// `None` when they were rebuilt inside (a ring or queue change: the pools
/// it counted are gone).
fn b_freed(w: &Wire, secs: u64) -> Option<(f64, PoolStats)> {
    let ids = w.b_pools();
    let s0 = stats_in(RX_NS, &ids);
    std::thread::sleep(Duration::from_secs(secs));
    let d = stats_in(RX_NS, &ids).delta(&s0)?;
    Some((recycle_miss_share(&d).unwrap_or(0.0), d))
}

/// The share of returns B's pools freed from now while B's ring stays
/// `ring` (a change rebuilds them), at most `secs`: the last reading
/// taken while it held, with the counters and the seconds it covered;
/// `None` if the ring moved before one.
fn b_freed_while(w: &Wire, ring: u32, secs: f64) -> Option<(f64, PoolStats, f64)> {
    let ids = w.b_pools();
    let s0 = stats_in(RX_NS, &ids);
    let t = Instant::now();
    let mut last = None;
    while t.elapsed().as_secs_f64() < secs {
        std::thread::sleep(Duration::from_millis(250));
        let s = stats_in(RX_NS, &ids);
        if b_ring(w) != ring {
            break;
        }
        if let Some(d) = s.delta(&s0) {
            last = Some((
                recycle_miss_share(&d).unwrap_or(0.0),
                d,
                t.elapsed().as_secs_f64(),
            ));
        }
    }
    last
}

/// What [`watch_until_held`] saw: B's ring at the end, its changes (s
/// since `t0`, ring), the 6 s measurement that ended the watch (the share
/// freed under the grow threshold, and the counters), or else the last
/// measurement at or above it (ring, (share, counters)).
struct Watch {
    ring: u32,
    changes: Vec<(f64, u32)>,
    after: Option<(f64, PoolStats)>,
    last: Option<(u32, (f64, PoolStats))>,
}

impl Watch {
    /// The watch's end as every wire scenario judges it: the ring held
    /// [`SETTLE`] with its pools freeing under the grow threshold (how
    /// [`watch_until_held`] ends), in at most three changes. Panics with
    /// what was seen (and `context`, the scenario's own record) otherwise;
    /// returns the measurement's share and counters.
    fn held(&self, k: &str, d: &Daemon, context: &str) -> (f64, &PoolStats) {
        let changes = &self.changes;
        let Some((share, stats)) = &self.after else {
            match &self.last {
                Some((r, (s, st))) => panic!(
                    "{k}: at ring {r} the pools still free {s:.4} of returns at the watch's end: {st:?}; changes (s since pptune started, ring) {changes:?}; {context}:\n{}",
                    d.tail(60)
                ),
                None => panic!(
                    "{k}: the ring did not hold {} s with its pools under {MISS_THRESHOLD}: changes (s since pptune started, ring) {changes:?}; {context}:\n{}",
                    SETTLE.as_secs(),
                    d.tail(60)
                ),
            }
        };
        assert!(
            changes.len() <= 3,
            "{k}: {} changes {changes:?}; {context}:\n{}",
            changes.len(),
            d.tail(60)
        );
        println!(
            "{k}: at ring {} the pools freed {share:.4} of returns: {stats:?}",
            self.ring
        );
        (*share, stats)
    }
}

/// Watches B's ring from `ring` until `limit` after `t0`: once it changed
/// and then held [`SETTLE`] less 6 s, the last 6 s are measured on the
/// pools it kept; a change inside the measurement (the pools rebuilt)
/// goes on waiting. So does a ring whose pools still free at least the
/// grow threshold: pptune grows on two windows in a row at or above it,
/// and a share that sits at the line (a first step's ring left 5.0-5.3 %
/// per window) takes it longer than the settle time to see two; the last
/// such measurement is what the caller reports if no step comes in time.
fn watch_until_held(
    w: &Wire,
    d: &mut Daemon,
    t0: Instant,
    mut ring: u32,
    limit: Duration,
) -> Watch {
    let mut last_change = Instant::now();
    let mut changes = Vec::new();
    let (mut after, mut last) = (None, None);
    while t0.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(250));
        assert!(d.alive(), "pptune died:\n{}", d.log());
        let r = b_ring(w);
        if r != ring && r != 0 {
            changes.push((t0.elapsed().as_secs_f64(), r));
            (ring, last_change) = (r, Instant::now());
        }
        if !changes.is_empty() && last_change.elapsed() >= SETTLE - Duration::from_secs(6) {
            let measured = b_freed(w, 6);
            if b_ring(w) != ring {
                continue;
            }
            if let Some(m) = measured {
                if m.0 < MISS_THRESHOLD {
                    after = Some(m);
                    break;
                }
                println!(
                    "held {:.1} s at ring {ring} with {:.4} of returns freed: waiting for pptune's next step",
                    last_change.elapsed().as_secs_f64(),
                    m.0
                );
                last = Some((ring, m));
            }
        }
    }
    Watch {
        ring,
        changes,
        after,
        last,
    }
}
