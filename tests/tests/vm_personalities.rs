//! Driver knowledge against the kernel: the bursty scenario under each ppsim
//! personality (`tests/ppsim/ppsim_personality.h`), in the test VM
//! (`tests/vm/test.sh 7.3`). A personality makes a ppsim device behave like a
//! driver family — the driver name pptune reads, pool = f(ring), how a ring
//! is rounded or refused, gve's stale pool — so pptune's rows in
//! `policy/src/drivers.rs` (docs/drivers.md) are tested against a real
//! kernel's answers rather than against themselves.
//!
//! Every figure is read from the kernel: rings over ethtool netlink, the
//! pool's real ring size from ppsim's `queues` file (the `ptr_ring` size
//! `page_pool_create()` made), page-pool stats for the misses. From pptune
//! only its log is read, for "kernel refused" lines.
//!
//! What each scenario checks: no EINVAL retry loop, no change
//! that cannot resize the pool, every target rounded as the driver rounds
//! it, and the final pool within one power of two of the burst where the
//! personality allows it.

// Helpers outside #[test] fns fail the test the same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use netlink::Client;
use policy::drivers::{DriverMode, driver_row};
use policy::signals::recycle_miss_share;
use pptune_tests::pools::{attached_pools, rx_ring, stats_of};
use pptune_tests::ppsim::{CostPreset, Knobs, Personality, Ppsim, PpsimDev};
use pptune_tests::vm::{PpsimKernels, require_ppsim};
use pptune_tests::vm_daemon::Daemon;
use tokio::time::{Instant, sleep};

/// `thresholds.grow_recycle_miss` of closed-loop-enforce.yaml.
const MISS_THRESHOLD: f64 = 0.05;

/// A ppsim device with a personality, stopped and deleted on drop.
struct Dev(Option<PpsimDev>);

impl std::ops::Deref for Dev {
    type Target = PpsimDev;
    fn deref(&self) -> &PpsimDev {
        self.0.as_ref().unwrap()
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

/// One queue, `p`'s behaviour, RX ring `ring` set while down (so no stale
/// pool), up, `burst`-page return bursts with the devmem cost.
fn device(p: Personality, ring: Option<u32>, burst: u32) -> Dev {
    let m = Ppsim::load().expect("ppsim loads");
    let d = Dev(Some(m.new_device(1).expect("ppsim device")));
    d.set_personality(p).expect("personality");
    assert_eq!(d.personality().unwrap(), p.name());
    if let Some(r) = ring {
        d.ethtool_set_rx_ring(r).expect("ring while down");
    }
    d.set_up(true).expect("up");
    d.set_knobs(
        &Knobs {
            burst_pages: burst,
            ..Knobs::default()
        }
        .with_preset(CostPreset::Devmem),
    )
    .expect("knobs");
    d
}

/// The pool's real ring size on queue 0.
fn pool_size(d: &PpsimDev) -> u32 {
    d.queues().unwrap()[0].pool_size
}

/// The share of returned pages freed past a full pool ring over `secs`.
async fn miss_share(c: &Client, d: &PpsimDev, secs: f64) -> f64 {
    let ifx = d.ifindex().unwrap();
    let ids = attached_pools(c, ifx).await.unwrap();
    let s0 = stats_of(c, &ids).await.unwrap();
    sleep(Duration::from_secs_f64(secs)).await;
    let s1 = stats_of(c, &ids).await.unwrap();
    recycle_miss_share(&s1.delta(&s0).expect("same pools")).unwrap_or(0.0)
}

/// Ring changes the kernel refused: the actuator's one warning per refusal
/// (the line with the errno) in the daemon's log.
fn refusals(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("kernel refused") && l.contains("errno"))
        .count()
}

/// What the kernel showed while pptune ran: (seconds, ring, pool) at the
/// start and after each ring change.
struct Run {
    seen: Vec<(f64, u32, u32)>,
    refusals: usize,
    log: String,
}

impl Run {
    fn last(&self) -> (u32, u32) {
        let (_, r, p) = *self.seen.last().unwrap();
        (r, p)
    }

    fn changes(&self) -> usize {
        self.seen.len() - 1
    }
}

/// Runs pptune on `d` until the ring has been still for `settle` after its
/// last change (or for `settle` with no change at all) or `limit` passes.
async fn run_pptune(c: &Client, d: &PpsimDev, settle: Duration, limit: Duration) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Daemon::new(dir.path(), "closed-loop-enforce.yaml", Some(d.name())).start();
    let t0 = Instant::now();
    let mut last = rx_ring(c, d).await;
    let mut seen = vec![(0.0, last, pool_size(d))];
    let mut last_change = Instant::now();
    while t0.elapsed() < limit && last_change.elapsed() < settle {
        sleep(Duration::from_millis(250)).await;
        assert!(p.alive(), "pptune died:\n{}", p.log());
        let r = rx_ring(c, d).await;
        if r != last {
            seen.push((t0.elapsed().as_secs_f64(), r, pool_size(d)));
            last = r;
            last_change = Instant::now();
        }
    }
    println!("{}: (s, ring, pool) {seen:?}", d.name());
    Run {
        seen,
        refusals: refusals(&p.log()),
        log: p.log(),
    }
}

/// Every change the kernel saw kept the driver's rounding and grew the
/// pool; pptune's row for the personality says the same.
fn assert_changes_follow_the_driver(p: Personality, run: &Run) {
    let row = driver_row(p.driver(), &DriverMode::default(), 0);
    for w in run.seen.windows(2) {
        let ((_, r0, p0), (_, r1, p1)) = (w[0], w[1]);
        assert!(
            row.rounding.keeps(r1),
            "{p:?}: ring {r0} → {r1} is not a value the driver keeps ({:?})\n{}",
            row.rounding,
            run.log
        );
        assert!(
            p1 > p0,
            "{p:?}: ring {r0} → {r1} did not grow the pool ({p0} → {p1})\n{}",
            run.log
        );
    }
}

/// Kernel-level check of the personalities themselves (no pptune): the
/// driver name, pool = f(ring), rounding and refusals, and gve's stale pool.
#[tokio::test(flavor = "current_thread")]
async fn personalities_behave_like_their_drivers() {
    let _ = require_ppsim(
        "personalities_behave_like_their_drivers",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    // (personality, default ring, pool at that ring)
    let cases = [
        (Personality::Ppsim, 256, 256),
        (Personality::Gve, 1024, 4096),
        (Personality::Bnxt, 511, 2044),
        (Personality::BnxtNoAgg, 511, 1024),
        (Personality::Mlx5Striding, 1024, 512),
        (Personality::Octeontx2, 1024, 1024),
        (Personality::Pow2, 256, 256),
    ];
    for (p, ring, pool) in cases {
        let d = device(p, None, 64);
        assert_eq!(
            c.driver_name(d.name()).as_deref(),
            Some(p.driver()),
            "{p:?}"
        );
        assert_eq!(rx_ring(&c, &d).await, ring, "{p:?} default ring");
        assert_eq!(pool_size(&d), pool, "{p:?} pool at ring {ring}");
    }

    // bnxt with agg rings shows the agg ring as rx-jumbo = 4 × rx.
    let d = device(Personality::Bnxt, None, 64);
    let r = c.rings(d.ifindex().unwrap(), Some(d.name())).await.unwrap();
    assert_eq!(
        (r.rx_max, r.rx_jumbo, r.rx_jumbo_max),
        (Some(2047), Some(2044), Some(8191))
    );
    d.ethtool_set_rx_ring(1000).unwrap();
    assert_eq!(pool_size(&d), 4000);
    let d = device(Personality::BnxtNoAgg, None, 64);
    d.ethtool_set_rx_ring(4000).unwrap();
    assert_eq!(
        pool_size(&d),
        1024,
        "bnxt without agg: the pool ignores the ring"
    );

    // mlx5 rounds up to a power of two.
    let d = device(Personality::Mlx5Striding, None, 64);
    d.ethtool_set_rx_ring(1100).unwrap();
    assert_eq!(rx_ring(&c, &d).await, 2048);
    assert_eq!(pool_size(&d), 1024);
    assert!(
        d.ethtool_set_rx_ring(8).is_err(),
        "mlx5: below 16 is EINVAL"
    );

    // octeontx2: 1024 → 1500 is a no-op, 2048 becomes 4096, pool ≤ 2048.
    let d = device(Personality::Octeontx2, None, 64);
    let pool0 = d.queues().unwrap()[0].pool_id;
    d.ethtool_set_rx_ring(1500).unwrap();
    assert_eq!(rx_ring(&c, &d).await, 1024);
    assert_eq!(
        d.queues().unwrap()[0].pool_id,
        pool0,
        "no rebuild for a no-op"
    );
    d.ethtool_set_rx_ring(2048).unwrap();
    assert_eq!(rx_ring(&c, &d).await, 4096);
    assert_eq!(pool_size(&d), 2048);

    // gve: EINVAL for a ring that is not a power of two; a live change
    // sizes the new pool from the old ring until the next reconfiguration.
    let d = device(Personality::Gve, Some(512), 64);
    assert_eq!(pool_size(&d), 2048);
    assert!(d.ethtool_set_rx_ring(1000).is_err(), "gve: 1000 is EINVAL");
    d.ethtool_set_rx_ring(1024).unwrap();
    assert_eq!(rx_ring(&c, &d).await, 1024);
    assert_eq!(
        pool_size(&d),
        2048,
        "gve: the new pool follows the old ring"
    );
    d.ethtool_set_channels(2).unwrap();
    assert_eq!(
        pool_size(&d),
        4096,
        "gve: the next reconfiguration applies it"
    );
}

/// gve: the pool would only follow a ring change at the next
/// reconfiguration, so pptune leaves the ring alone although the bursts
/// overflow the pool.
#[tokio::test(flavor = "current_thread")]
async fn gve_ring_is_not_changed_for_the_pool() {
    let _ = require_ppsim("gve_ring_is_not_changed_for_the_pool", PpsimKernels::Only73);
    hands_off(Personality::Gve, Some(512), 8192).await;
}

/// bnxt without aggregation rings: the pool is 1024 whatever the ring.
#[tokio::test(flavor = "current_thread")]
async fn bnxt_without_agg_ring_is_not_changed_for_the_pool() {
    let _ = require_ppsim(
        "bnxt_without_agg_ring_is_not_changed_for_the_pool",
        PpsimKernels::Only73,
    );
    hands_off(Personality::BnxtNoAgg, None, 4096).await;
}

async fn hands_off(p: Personality, ring: Option<u32>, burst: u32) {
    let c = Client::connect().await.expect("client");
    let d = device(p, ring, burst);
    d.start().unwrap();
    sleep(Duration::from_secs(1)).await;
    let miss = miss_share(&c, &d, 3.0).await;
    assert!(
        miss >= MISS_THRESHOLD,
        "{p:?}: the bursts must overflow the pool for the test to mean anything ({miss:.3})"
    );
    let run = run_pptune(&c, &d, Duration::from_secs(30), Duration::from_secs(30)).await;
    println!(
        "MEASURE scenario=personality_{} burst={burst} ring={} pool={} miss_share={miss:.4} changes={} refusals={}",
        p.name(),
        run.seen[0].1,
        run.seen[0].2,
        run.changes(),
        run.refusals
    );
    assert_eq!(
        run.changes(),
        0,
        "{p:?}: a ring change cannot resize the pool\n{}",
        run.log
    );
    assert_eq!(run.refusals, 0, "{}", run.log);
}

/// The burst-covering scenarios: pptune grows the ring, each change keeps
/// the driver's rounding and grows the pool, nothing is refused, and the
/// final pool is within one power of two of the burst (or at the pool's
/// cap, where the driver allows no more).
///
/// `settle`: how long the ring must stay still to call it converged (longer
/// than the actuator's 60 s back-off after a refusal where one is expected).
async fn grows_to_the_burst(p: Personality, burst: u32, max_refusals: usize, settle: Duration) {
    let c = Client::connect().await.expect("client");
    let d = device(p, None, burst);
    d.start().unwrap();
    sleep(Duration::from_secs(1)).await;
    let before = miss_share(&c, &d, 3.0).await;
    assert!(
        before >= MISS_THRESHOLD,
        "{p:?}: the bursts must overflow the pool for the test to mean anything ({before:.3})"
    );
    let run = run_pptune(&c, &d, settle, Duration::from_secs(200)).await;
    let (ring, pool) = run.last();
    let after = miss_share(&c, &d, 3.0).await;
    println!(
        "MEASURE scenario=personality_{} burst={burst} start_ring={} start_pool={} final_ring={ring} final_pool={pool} miss_share_before={before:.4} miss_share_after={after:.4} changes={} refusals={}",
        p.name(),
        run.seen[0].1,
        run.seen[0].2,
        run.changes(),
        run.refusals
    );
    assert!(
        run.changes() >= 1,
        "{p:?}: pptune never grew the ring\n{}",
        run.log
    );
    assert!(run.refusals <= max_refusals, "{p:?}: refusals\n{}", run.log);
    if p != Personality::Pow2 {
        assert_changes_follow_the_driver(p, &run);
    } else {
        for (_, r, _) in &run.seen[1..] {
            assert!(
                r.is_power_of_two(),
                "learned: powers of two only\n{}",
                run.log
            );
        }
    }
    if p == Personality::Pow2 {
        // The learning scenario: no row, so the engine's step rule (a
        // second step with nothing to calibrate goes to the limit) decides
        // how far; what matters here is the one refusal and the rule kept.
        assert!(pool >= burst / 2, "{p:?}: pool {pool}\n{}", run.log);
        return;
    }
    // The driver's own cap (octeontx2's 2048), not the page_pool clamp.
    let cap = driver_row(p.driver(), &DriverMode::default(), 0)
        .max_pool()
        .filter(|&c| c < policy::drivers::POOL_RING_CLAMP);
    let at_cap = cap.is_some_and(|c| pool >= c);
    assert!(
        at_cap || (pool >= burst / 2 && pool <= burst * 2),
        "{p:?}: final pool {pool} not within one power of two of the {burst}-page burst\n{}",
        run.log
    );
}

/// bnxt with aggregation rings: rx grows until the agg ring (the pool, read
/// as rx-jumbo) covers the burst; rx ≤ 2047.
#[tokio::test(flavor = "current_thread")]
async fn bnxt_with_agg_grows_rx_until_the_pool_covers_the_burst() {
    let _ = require_ppsim(
        "bnxt_with_agg_grows_rx_until_the_pool_covers_the_burst",
        PpsimKernels::Only73,
    );
    grows_to_the_burst(Personality::Bnxt, 4096, 0, Duration::from_secs(20)).await;
}

/// mlx5 striding RQ at MTU 1500: the pool is half the ring, the ring a power
/// of two.
#[tokio::test(flavor = "current_thread")]
async fn mlx5_striding_grows_in_powers_of_two_with_half_a_page_per_entry() {
    let _ = require_ppsim(
        "mlx5_striding_grows_in_powers_of_two_with_half_a_page_per_entry",
        PpsimKernels::Only73,
    );
    grows_to_the_burst(Personality::Mlx5Striding, 2048, 0, Duration::from_secs(20)).await;
}

/// octeontx2: from 1024 the only ring that grows the pool is 4096 (pool
/// 2048, its cap); nothing beyond.
#[tokio::test(flavor = "current_thread")]
async fn octeontx2_asks_only_for_rings_that_grow_the_pool() {
    let _ = require_ppsim(
        "octeontx2_asks_only_for_rings_that_grow_the_pool",
        PpsimKernels::Only73,
    );
    grows_to_the_burst(Personality::Octeontx2, 4096, 0, Duration::from_secs(20)).await;
}

/// A driver pptune has no row for refuses rings that are not powers of
/// two, without words: one refusal teaches the rule.
#[tokio::test(flavor = "current_thread")]
async fn an_unknown_driver_refusing_non_powers_of_two_is_refused_once() {
    let _ = require_ppsim(
        "an_unknown_driver_refusing_non_powers_of_two_is_refused_once",
        PpsimKernels::Only73,
    );
    // The refusal backs the device off for 60 s (the actuator), then the
    // learned power of two is asked.
    grows_to_the_burst(Personality::Pow2, 2048, 1, Duration::from_secs(80)).await;
}
