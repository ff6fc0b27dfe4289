//! ppsim's wire mode in the test VM (`tests/vm/test.sh`, kernel 7.3): two
//! ppsim devices joined as a wire across netns `pp-tx` and `pp-rx`, real
//! TCP between them (`pptraffic`), B's pages traced through the real
//! stack by the pools' own counters.
//!
//! What is judged: every byte arrives intact (`--verify`); once the
//! sockets close, B's pools hold exactly their posted rings again and
//! vanish after the devices are deleted, with nothing in the kernel log;
//! ring and channel rebuilds of B under traffic lose frames that TCP
//! recovers. The measurement test prints one `MEASURE` line per ring.
// Helpers outside #[test] fns fail the test the same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use pptune_tests::ppsim::{Ppsim, PpsimDev};
use pptune_tests::vm::{PpsimKernels, require_ppsim};
use pptune_tests::wire::{
    DRAIN, RX_NS, TX_NS, Traffic, Wire, assert_quiet_kernel, dmesg_mark, qstats_in, stats_in,
    wait_pools,
};

const HOME: Duration = Duration::from_secs(15);

fn pptraffic() -> std::path::PathBuf {
    pptune_tests::pptraffic!()
}

fn packets(d: &PpsimDev) -> u64 {
    d.queues().expect("queues").iter().map(|q| q.packets).sum()
}

#[test]
fn tcp_over_the_wire_is_intact_and_every_page_comes_home() {
    let k = require_ppsim(
        "tcp_over_the_wire_is_intact_and_every_page_comes_home",
        PpsimKernels::Only73,
    );
    let mark = dmesg_mark();
    let p = Ppsim::load().expect("ppsim loads");
    let w = Wire::build(&p, 1, 256);
    let rx0 = packets(&w.b);

    let one = Traffic::run(
        &pptraffic(),
        &[
            "--tcp",
            "1",
            "--verify",
            "--seed",
            "7",
            "--duration-ms",
            "2000",
            "--port",
            "5301",
        ],
    );
    one.assert_intact("1 steady stream");
    let eight = Traffic::run(
        &pptraffic(),
        &[
            "--tcp",
            "8",
            "--verify",
            "--seed",
            "8",
            "--duration-ms",
            "2000",
            "--pattern",
            "drain",
            "--sync",
            "--pause-ms",
            "50",
            "--port",
            "5302",
        ],
    );
    eight.assert_intact("8 draining streams");
    let bytes = one.received() + eight.received();
    assert!(
        bytes > 1 << 20,
        "{k}: under 1 MiB crossed the wire in 4 s: {bytes}"
    );
    // Every frame went through B's ring: at least one per 1514 bytes
    // (payload plus headers; fewer would mean frames were not B's pages).
    let rx = packets(&w.b) - rx0;
    assert!(
        rx >= bytes / 1514,
        "{k}: B received {rx} frames for {bytes} bytes"
    );
    assert!(
        one.snmp("Tcp.InSegs") > 0,
        "rx netns counters move: {:?}",
        one.summary()
    );

    // Sockets closed: B's pool holds its posted ring and what it keeps
    // itself; destroyed by a rebuild, it gives every page back at once.
    let ids = w.b_pools();
    assert_eq!(ids.len(), 1, "one pool per B queue: {ids:?}");
    w.wait_b_quiet(HOME)
        .unwrap_or_else(|e| panic!("{k}: pages still out after the sockets closed: {e}"));
    w.rebuild_b_and_drain(512, HOME)
        .unwrap_or_else(|e| panic!("{k}: a rebuild after the traffic left a pool behind: {e}"));
    // The new pool: its 512 posted buffers, plus a slow-path bulk (64)
    // once a frame arrives (IPv6 router solicitations keep coming).
    w.wait_b_quiet(HOME)
        .unwrap_or_else(|e| panic!("{k}: the new pool is not just its posted ring: {e}"));
    println!(
        "{k}: {bytes} bytes in {rx} frames over the wire, intact; every page back in the pool"
    );
    if let Err(pools) = w.teardown(HOME) {
        panic!("{k}: pools outlived their devices: {pools:#?}");
    }
    assert_quiet_kernel(mark, k.as_str());
}

#[test]
fn rebuilds_of_b_under_traffic_keep_tcp_whole_and_old_pools_drain() {
    let k = require_ppsim(
        "rebuilds_of_b_under_traffic_keep_tcp_whole_and_old_pools_drain",
        PpsimKernels::Only73,
    );
    let mark = dmesg_mark();
    let p = Ppsim::load().expect("ppsim loads");
    let w = Wire::build(&p, 2, 256);
    let first = w.b_pools();
    let child = Traffic::spawn(
        &pptraffic(),
        &[
            "--tcp",
            "4",
            "--verify",
            "--seed",
            "9",
            "--duration-ms",
            "5000",
            "--port",
            "5303",
        ],
    );
    std::thread::sleep(Duration::from_millis(1000));
    w.set_b_ring(1024);
    std::thread::sleep(Duration::from_millis(700));
    w.set_b_channels(1);
    std::thread::sleep(Duration::from_millis(700));
    w.set_b_ring(64);
    std::thread::sleep(Duration::from_millis(700));
    w.set_b_channels(2);
    let t = Traffic::wait(child);
    t.assert_intact("4 streams across four rebuilds of B");
    let q = w.b.queues().expect("queues");
    // The kernel's qstats of B carry ppsim's frame and overrun counts (a
    // stray frame, an IPv6 router solicitation, may land between reads).
    let before = packets(&w.b);
    let qs = qstats_in(RX_NS, w.b_ifindex());
    let after = packets(&w.b);
    let overruns: u64 = q.iter().map(|q| q.overruns).sum();
    assert_eq!(qs.rx_hw_drop_overruns, Some(overruns), "{k}: qstats {qs:?}");
    assert!(qs.rx_hw_drops >= Some(overruns), "{k}: qstats {qs:?}");
    assert!(
        qs.rx_packets.is_some_and(|n| (before..=after).contains(&n)),
        "{k}: qstats {qs:?}, ppsim's frames {before}..{after}"
    );
    let now = w.b_pools();
    assert!(
        now.is_disjoint(&first),
        "{k}: rebuilds made new pools: {first:?} → {now:?}"
    );
    // The old pools drain once the sockets that held their pages close,
    // and so do the ones in use now when a last rebuild destroys them.
    let (left, ok) = wait_pools(RX_NS, HOME, |p| p.iter().all(|p| p.detach_time.is_none()));
    assert!(ok, "{k}: detached pools outlived the traffic: {left:#?}");
    w.wait_b_quiet(HOME)
        .unwrap_or_else(|e| panic!("{k}: pages still out after the sockets closed: {e}"));
    w.rebuild_b_and_drain(256, HOME)
        .unwrap_or_else(|e| panic!("{k}: the last rebuild left a pool behind: {e}"));
    println!(
        "{k}: 4 streams, {} bytes intact across ring 256→1024, 2→1 queues, ring 64, 1→2 queues; \
         rx netns: InSegs {} OFO {} ; B overruns {:?}",
        t.received(),
        t.snmp("Tcp.InSegs"),
        t.snmp("TcpExt.TCPOFOQueue"),
        q.iter().map(|q| q.overruns).collect::<Vec<_>>()
    );
    if let Err(pools) = w.teardown(HOME) {
        panic!("{k}: pools outlived their devices: {pools:#?}");
    }
    assert_quiet_kernel(mark, k.as_str());
}

/// Deletes `first` (one end) while 4 streams run, stops the traffic (its
/// connections can no longer finish), then checks that the netns of that
/// end lists no pool, deletes the other end and checks the same there.
fn delete_under_traffic(p: &Ppsim, receiver_first: bool, port: &str) {
    let w = Wire::build(p, 2, 512);
    let mut child = Traffic::spawn(
        &pptraffic(),
        &["--tcp", "4", "--duration-ms", "4000", "--port", port],
    );
    std::thread::sleep(Duration::from_millis(1200));
    let Wire { a, b } = w;
    let (first, first_ns, second, second_ns) = if receiver_first {
        (b, RX_NS, a, TX_NS)
    } else {
        (a, TX_NS, b, RX_NS)
    };
    first.delete().expect("delete under traffic");
    std::thread::sleep(Duration::from_millis(300));
    child.kill().expect("stop pptraffic");
    let _ = child.wait();
    let (left, gone) = wait_pools(first_ns, HOME, <[_]>::is_empty);
    assert!(
        gone,
        "pools of the device deleted under traffic stayed: {left:#?}"
    );
    second.delete().expect("delete the other end");
    let (left, gone) = wait_pools(second_ns, HOME, <[_]>::is_empty);
    assert!(gone, "pools of the other end stayed: {left:#?}");
    for ns in [TX_NS, RX_NS] {
        pptune_tests::wire::sh("ip", &["netns", "del", ns]);
    }
}

#[test]
fn deleting_either_end_under_traffic_then_rmmod_leaks_nothing() {
    let k = require_ppsim(
        "deleting_either_end_under_traffic_then_rmmod_leaks_nothing",
        PpsimKernels::Only73,
    );
    let mark = dmesg_mark();
    let p = Ppsim::load().expect("ppsim loads");
    delete_under_traffic(&p, true, "5304");
    delete_under_traffic(&p, false, "5305");
    pptune_tests::wire::sh("rmmod", &["ppsim"]);
    assert_quiet_kernel(mark, k.as_str());
}

/// One ring's point of the first measurement: a fresh wire with B at
/// `ring`, 4 streams draining in sync every 50 ms for 3 s; B's pool
/// counters over the run (after every page came home), per 1,000 frames.
#[allow(clippy::cast_precision_loss)] // counters far below 2^52
fn recycle_split(p: &Ppsim, ring: u32, port: &str) -> [f64; 5] {
    let w = Wire::build(p, 1, ring);
    let ids = w.b_pools();
    let s0 = stats_in(RX_NS, &ids);
    let rx0 = packets(&w.b);
    let args: Vec<&str> = DRAIN
        .iter()
        .copied()
        .chain([
            "--duration-ms",
            "3000",
            "--seed",
            "11",
            "--verify",
            "--port",
            port,
        ])
        .collect();
    let t = Traffic::run(&pptraffic(), &args);
    t.assert_intact("the measured run");
    w.wait_b_quiet(HOME)
        .unwrap_or_else(|e| panic!("ring {ring}: pages still out after the sockets closed: {e}"));
    let d = stats_in(RX_NS, &ids)
        .delta(&s0)
        .expect("monotonic pool counters");
    let q = w.b.queues().expect("queues");
    let rx = packets(&w.b) - rx0;
    let per_k = |n: u64| n as f64 * 1000.0 / rx.max(1) as f64;
    let returns =
        d.recycle_cached + d.recycle_ring + d.recycle_ring_full + d.recycle_released_refcnt;
    println!(
        "MEASURE wire recycle split: ring={ring} rx_frames={rx} bytes={} per_1000_frames: cached={:.1} ring={:.1} \
         ring_full={:.1} released={:.1} alloc_slow={:.2} alloc_fast={:.1} overruns={} InSegs={} pattern=drain \
         --sync --pause-ms 50 --tcp 4 3 s, 1 vCPU={}",
        t.received(),
        per_k(d.recycle_cached),
        per_k(d.recycle_ring),
        per_k(d.recycle_ring_full),
        per_k(d.recycle_released_refcnt),
        per_k(d.alloc_slow),
        per_k(d.alloc_fast),
        q.iter().map(|q| q.overruns).sum::<u64>(),
        t.snmp("Tcp.InSegs"),
        std::thread::available_parallelism().map_or(0, usize::from) == 1,
    );
    // Every frame's page went back to the pool one way or another: the
    // counters account for the wire's pages (none lost, none twice).
    assert!(
        returns.abs_diff(rx) <= rx / 50 + 64,
        "ring {ring}: {returns} returns counted for {rx} frames: {d:?}"
    );
    w.teardown(HOME)
        .unwrap_or_else(|pools| panic!("ring {ring}: pools outlived the devices: {pools:#?}"));
    [
        per_k(d.recycle_cached),
        per_k(d.recycle_ring),
        per_k(d.recycle_ring_full),
        per_k(d.alloc_slow),
        rx as f64,
    ]
}

#[test]
fn recycle_split_of_draining_tcp_at_ring_256_and_4096() {
    let k = require_ppsim(
        "recycle_split_of_draining_tcp_at_ring_256_and_4096",
        PpsimKernels::Only73,
    );
    let mark = dmesg_mark();
    let p = Ppsim::load().expect("ppsim loads");
    let small = recycle_split(&p, 256, "5306");
    let large = recycle_split(&p, 4096, "5307");
    println!(
        "{k}: ring 256 {small:?}, ring 4096 {large:?} (cached, ring, ring_full, alloc_slow per 1000 frames; frames)"
    );
    assert_quiet_kernel(mark, k.as_str());
}
