//! After convergence on a stationary load (docs/decisions.md §7): a ring
//! grown for return bursts that go on is calm *because* it is big enough.
//! A calm shrink keeps what the pages held at once still need, so it does
//! not shrink the ring under bursts that go on and regrow it every
//! `calm_before_shrink` (bpftune #128's cycle); once the bursts stop, the
//! memory goes back to the original.

use std::time::Duration;

use super::support::{Traffic, World, bursty, device, only, steady};
use crate::fixtures::policy;
use crate::plan::{Action, ReasonCode};

/// Return bursts of this many pages, all run long.
const BURST: u64 = 2048;

/// The fixture policy (10 s samples and windows) with a 60 s calm.
fn world() -> World {
    let mut p = policy();
    p.timing.calm_before_shrink = Duration::from_secs(60);
    World::new(p, vec![device(1, "ice", 512, 8160, 2)])
}

/// The pages the device keeps posted at its ring now (ice: the pool is
/// the ring).
fn posted(w: &World, i: usize) -> u64 {
    u64::from(w.pool_size(i).max(w.ring(i)))
}

/// Bursts of `burst` pages into the pool the ring gives now; a sample
/// sees `seen` of a burst out at once beyond the posted ring.
fn bursts(w: &World, i: usize, burst: u64, seen: u64) -> Traffic {
    Traffic {
        inflight: Some(posted(w, i) + seen),
        ..bursty(w.pool_size(i), burst, 50, false)
    }
}

/// Ticks until the ring has held `quiet` samples in a row; the ring then.
fn converge(w: &mut World, t: impl Fn(&World, usize) -> Traffic + Copy) -> u32 {
    let (mut ring, mut held) = (w.ring(0), 0);
    for _ in 0..200 {
        w.tick(t);
        if w.ring(0) == ring {
            held += 1;
            if held >= 30 {
                return ring;
            }
        } else {
            (ring, held) = (w.ring(0), 0);
        }
    }
    panic!("the ring never held 30 samples: {}", w.ring(0));
}

/// Samples that changed something, of `n`.
fn changes(w: &mut World, n: usize, t: impl Fn(&World, usize, usize) -> Traffic) -> Vec<String> {
    (0..n)
        .filter_map(|k| {
            let d = only(&w.tick(|w, i| t(w, i, k))).clone();
            (d.action != Action::Hold).then(|| format!("sample {k}: {:?} {}", d.reason, d.message))
        })
        .collect()
}

#[test]
fn bursts_that_go_on_keep_their_ring_past_twice_the_calm() {
    let mut w = world();
    let ring = converge(&mut w, |w, i| bursts(w, i, BURST, BURST));
    assert!(u64::from(ring) >= BURST, "grown for the bursts: {ring}");
    // 2 × calm_before_shrink (60 s) is 12 samples; four times that.
    // The samples catch the bursts at any phase: the peak only now and
    // then.
    let c = changes(&mut w, 48, |w, i, k| {
        bursts(w, i, BURST, BURST * u64::try_from(k % 5).unwrap_or(0) / 4)
    });
    assert!(c.is_empty(), "a stationary load moved the ring: {c:#?}");
    assert_eq!(w.ring(0), ring);
}

#[test]
fn without_the_held_pages_the_calm_ring_shrinks() {
    // The same convergence, then the bursts stop: nothing is held beyond
    // the posted ring, the pool is calm, the ring goes back.
    let mut w = world();
    let ring = converge(&mut w, |w, i| bursts(w, i, BURST, BURST));
    assert!(ring > 512);
    // The held peak falls out within 2 × calm_before_shrink (12 samples).
    let c = changes(&mut w, 18, |w, i, _| Traffic {
        inflight: Some(posted(w, i)),
        ..steady(100_000)
    });
    assert_eq!(c.len(), 1, "{c:#?}");
    assert!(c[0].contains("(the original)"), "{c:#?}");
    assert_eq!(w.ring(0), 512);
}

#[test]
fn a_need_within_the_headroom_is_not_a_shrink() {
    // Bursts a little smaller than the ones the ring was grown for (the
    // wire's drains: 2597 → 2594 after the calm) go on: the ring stays.
    let mut w = world();
    let ring = converge(&mut w, |w, i| bursts(w, i, BURST, BURST));
    let c = changes(&mut w, 48, |w, i, _| bursts(w, i, BURST, BURST * 9 / 10));
    assert!(c.is_empty(), "a shrink inside the headroom: {c:#?}");
    assert_eq!(w.ring(0), ring);
}

#[test]
fn smaller_bursts_give_back_only_what_they_do_not_need() {
    // Grown for 2048-page bursts; they shrink to 1024 and go on: the calm
    // shrink goes to the ring 1024 pages need with headroom, not to 512.
    let mut w = world();
    let ring = converge(&mut w, |w, i| bursts(w, i, BURST, BURST));
    let mut seen = Vec::new();
    for _ in 0..24 {
        let d = only(&w.tick(|w, i| bursts(w, i, 1024, 1024))).clone();
        if d.action != Action::Hold {
            seen.push(d);
        }
    }
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].reason, ReasonCode::CalmShrink);
    let to = w.ring(0);
    assert!(to < ring && u64::from(to) >= 1024 * 5 / 4, "{ring} → {to}");
    assert!(
        seen[0].message.contains("still need"),
        "{}",
        seen[0].message
    );
    // And stays there while they go on.
    let c = changes(&mut w, 24, |w, i, _| bursts(w, i, 1024, 1024));
    assert!(c.is_empty(), "{c:#?}");
}
