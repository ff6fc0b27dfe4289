//! The two field reports of design.md, replayed as snapshot sequences.
//!
//! Hand-written traffic models for now; once the testbed's ppsim driver
//! exists these sequences are to be recorded from it (the `World` takes any
//! sequence of snapshots).

use std::time::Duration;

use super::support::{Traffic, World, bursty, device};
use crate::drivers::driver_info;
use crate::fixtures::policy;
use crate::plan::{Action, ReasonCode};
use crate::snapshot::MemoryProvider;

/// Report 1: AllToAll devmem TCP at 0.43 GB/s instead of 12.5 GB/s — page
/// returns came back in bursts larger than the pool ring. Here: a gve
/// device (pool = 4 × rx) with dmabuf-bound queues, rx 1024 (pool 4096),
/// bursts of 12 000 pages.
fn devmem_world(burst: u64) -> (World, impl Fn(&World, usize) -> Traffic) {
    // mlx5 striding RQ at MTU 9000: pool = 4 × ring.
    let mut dev = device(1, "mlx5_core", 1024, 4096, 4);
    dev.mtu = Some(9000);
    for q in &mut dev.rx_queues {
        q.provider = Some(MemoryProvider::Dmabuf { id: 3 });
    }
    let w = World::new(policy(), vec![dev]);
    let t = move |w: &World, i: usize| bursty(w.pool_size(i), burst, 40, true);
    (w, t)
}

#[test]
fn devmem_bursts_grow_within_two_windows_to_cover_the_burst() {
    let (mut w, t) = devmem_world(12_000);
    let mut grown_at = None;
    for tick in 0..3 {
        let plan = w.tick(&t);
        if matches!(plan.decisions[0].action, Action::SetRing { .. }) {
            assert_eq!(plan.decisions[0].reason, ReasonCode::RecycleMissHigh);
            grown_at = Some(tick);
        }
    }
    // Tick 0 is the first sample; ticks 1 and 2 are the two windows.
    assert_eq!(grown_at, Some(2));
    let pool = w.pool_size(0);
    assert!(
        pool >= 12_000,
        "pool {pool} must cover the 12000-page burst"
    );
    assert!(pool <= 16_384);
    // One change was enough: the misses stop and nothing else moves for
    // the next hour's windows (calm shrink waits for calm_before_shrink).
    for _ in 0..300 {
        let d = w.tick(&t).decisions[0].clone();
        assert_eq!(d.action, Action::Hold, "{d:?}");
    }
    assert_eq!(w.history.len(), 1);
}

#[test]
fn devmem_bursts_past_the_clamp_go_to_the_kernel_maximum_at_once() {
    // The field fix was raising the pool ring to the kernel maximum.
    let (mut w, t) = devmem_world(40_000);
    for _ in 0..3 {
        w.tick(&t);
    }
    let info = driver_info(&w.snap.devices[0]);
    assert_eq!(
        w.ring(0),
        4096,
        "4× reaches the 16384 pool clamp at rx 4096"
    );
    assert_eq!(info.pool_for_ring(w.ring(0)), Some(16_384));
    // At the clamp: further windows hold with at_limit, never another change.
    let mut last = ReasonCode::Healthy;
    for _ in 0..40 {
        let d = w.tick(&t).decisions[0].clone();
        assert_eq!(d.action, Action::Hold);
        last = d.reason;
    }
    assert_eq!(last, ReasonCode::AtLimit);
    assert_eq!(w.history.len(), 1);
}

/// Report 2: a 100 GbE mlx5 NIC stalled at 45–60 Gbit/s; adding RX queues
/// made it worse (85 % of CPU in the zone spinlock) until a large page
/// cache restored line rate, after which more queues helped.
///
/// Model: 6000-page return bursts; while they overflow the pool ring, the
/// freed pages come back through the contended slow path and drops grow
/// with the queue count. Once the pool covers the bursts, recycling is
/// healthy and the remaining drops are a queue-count problem (line rate
/// needs 12 queues).
fn nic(w: &World, i: usize) -> Traffic {
    let queues = u64::from(w.channels(i));
    let mut t = bursty(w.pool_size(i), 6_000, 50, false);
    if t.pool.recycle_ring_full > 0 {
        t.drops = 400 * queues;
    } else {
        t.drops = if queues < 12 { 2_000 } else { 0 };
    }
    t
}

#[test]
fn contention_rings_first_then_queues_once_recycling_is_healthy() {
    let mut p = policy();
    p.channels.enabled = true;
    p.channels.max = 16;
    p.timing.cooldown = Duration::from_secs(60);
    p.timing.evaluation = Duration::from_secs(60);
    // mlx5 striding RQ at MTU 3000: one page per ring entry.
    let mut dev = device(1, "mlx5_core", 1024, 8192, 8);
    dev.mtu = Some(3000);
    let mut w = World::new(p, vec![dev]);
    let mut log = vec![];
    for tick in 0..40 {
        let contended = nic(&w, 0).pool.recycle_ring_full > 0;
        let d = w.tick(nic).decisions[0].clone();
        if d.action != Action::Hold {
            log.push((tick, d.action, contended));
        }
    }
    // The ring comes first, within two windows, to a pool covering 6000.
    assert!(
        matches!(
            log[0],
            (
                2,
                Action::SetRing {
                    from: 1024,
                    to: 8192,
                    ..
                },
                true
            )
        ),
        "{log:?}"
    );
    // No queue was ever added while the slow path was contended…
    for (_, a, contended) in &log {
        if let Action::SetChannels { from, to, .. } = a {
            assert!(!(to > from && *contended), "{log:?}");
        }
    }
    // …and once recycling was healthy, queues were added up to line rate.
    assert!(
        log.iter()
            .any(|(_, a, _)| matches!(a, Action::SetChannels { to, from, .. } if to > from)),
        "{log:?}"
    );
    assert_eq!(w.channels(0), 12, "{log:?}");
}

#[test]
fn contention_with_rings_at_their_limit_sheds_queues() {
    let mut p = policy();
    p.channels.enabled = true;
    p.channels.min = 4;
    // Ring already at rx-max, bursts still larger than the pool.
    let mut w = World::new(p, vec![device(1, "mlx5_core", 8192, 8192, 8)]);
    let t = |w: &World, i: usize| {
        let mut t = bursty(w.pool_size(i), 20_000, 50, false);
        t.drops = 400 * u64::from(w.channels(i));
        t
    };
    let mut first = None;
    for tick in 0..3 {
        let d = w.tick(t).decisions[0].clone();
        if let Action::SetChannels { from, to, .. } = d.action {
            assert_eq!(d.reason, ReasonCode::ChannelsShrinkContended);
            assert!(to < from);
            first.get_or_insert(tick);
        }
        assert!(!matches!(d.action, Action::SetRing { .. }));
    }
    assert_eq!(first, Some(2), "decided within two windows");
    assert_eq!(w.channels(0), 6);
}
