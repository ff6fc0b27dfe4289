//! A severe miss (docs/decisions.md §3, "A severe miss"): at the shipped
//! timing (10 s samples, 30 s windows, 3 windows for a finding), a queue
//! freeing at least `severe_recycle_miss` of its returns in
//! `severe_samples` samples in a row grows the ring on the second of them;
//! anything less waits for its windows as before.

use std::time::Duration;

use super::support::{Traffic, World, bursty, device, held, only, steady};
use crate::fixtures::policy;
use crate::plan::{Action, ReasonCode};

/// The fixture policy at the shipped timing.
fn shipped_world() -> World {
    let mut p = policy();
    p.timing.interval = Duration::from_secs(10);
    p.timing.window = Duration::from_secs(30);
    p.timing.windows_for_finding = 3;
    World::new(p, vec![device(1, "ice", 512, 8160, 2)])
}

/// Bursts of 4 pools into the pool: three quarters of returns freed.
fn severe(w: &World, i: usize) -> Traffic {
    bursty(w.pool_size(i), u64::from(w.pool_size(i)) * 4, 50, false)
}

/// Bursts an eighth over the pool: about 11 % of returns freed, a finding
/// but not a severe one.
fn moderate(w: &World, i: usize) -> Traffic {
    let pool = u64::from(w.pool_size(i));
    bursty(w.pool_size(i), pool + pool / 8, 50, false)
}

/// The sample (1-based) of the first decision that acts, if any in `n`.
fn first_action(
    w: &mut World,
    n: usize,
    t: impl Fn(&World, usize, usize) -> Traffic,
) -> Option<usize> {
    (1..=n).find(|&k| only(&w.tick(|w, i| t(w, i, k))).action != Action::Hold)
}

#[test]
fn a_severe_miss_grows_on_its_second_sample() {
    let mut w = shipped_world();
    let first = only(&w.tick(severe)).clone();
    assert_eq!(
        first.reason,
        ReasonCode::Gathering,
        "the first sample has no rate"
    );
    let second = only(&w.tick(severe)).clone();
    assert_eq!(second.action, Action::Hold, "one severe sample waits");
    let third = only(&w.tick(severe)).clone();
    assert_eq!(third.reason, ReasonCode::RecycleMissHigh, "{third:?}");
    assert!(
        matches!(third.action, Action::SetRing { from: 512, .. }),
        "{third:?}"
    );
    assert!(
        third.message.contains("a severe miss: 2 samples in a row"),
        "{}",
        third.message
    );
    assert_eq!(third.evidence.get("severe_samples"), Some(2.0));
    // Judged on the 20 s the early window had.
    assert_eq!(third.evidence.get("window_seconds"), Some(20.0));
}

#[test]
fn a_moderate_miss_waits_for_its_windows() {
    let mut w = shipped_world();
    // One sample to start from, then three windows of three samples.
    assert_eq!(first_action(&mut w, 12, |w, i, _| moderate(w, i)), Some(10));
}

#[test]
fn one_severe_sample_alone_waits() {
    let mut w = shipped_world();
    // A spike on sample 3 (an incast, a backup), steady before and after.
    let t = |w: &World, i: usize, k: usize| {
        if k == 3 {
            severe(w, i)
        } else {
            steady(100_000)
        }
    };
    assert_eq!(first_action(&mut w, 15, t), None);
    // Spikes every other sample never make two in a row, but they are
    // still a finding in every window: the windows grow the ring.
    let mut w = shipped_world();
    let t = |w: &World, i: usize, k: usize| {
        if k.is_multiple_of(2) {
            severe(w, i)
        } else {
            steady(100_000)
        }
    };
    assert_eq!(first_action(&mut w, 12, t), Some(10));
}

#[test]
fn held_pages_are_never_a_severe_miss() {
    // Every returned page still referenced, the slow path taken for all
    // of them, no ring_full: no ring fixes it, however bad it is.
    let held = |w: &World, i: usize, _: usize| held(w, i);
    let mut w = shipped_world();
    assert_eq!(first_action(&mut w, 15, held), None);
}

#[test]
fn severe_samples_zero_turns_the_early_path_off() {
    let mut w = shipped_world();
    w.policy.thresholds.severe_samples = 0;
    assert_eq!(first_action(&mut w, 12, |w, i, _| severe(w, i)), Some(10));
}

/// The shipped timing with the shipped cooldown (10 min) and evaluation
/// (2 min).
fn shipped_cooldown_world() -> World {
    let mut w = shipped_world();
    w.policy.timing.cooldown = Duration::from_secs(600);
    w.policy.timing.evaluation = Duration::from_secs(120);
    w
}

/// Samples (1-based) of the changes in `n`, with the ring after each.
fn changes(
    w: &mut World,
    n: usize,
    t: impl Fn(&World, usize) -> Traffic + Copy,
) -> Vec<(usize, u32)> {
    (1..=n)
        .filter_map(|k| {
            let d = only(&w.tick(t)).clone();
            (d.action != Action::Hold).then(|| (k, w.ring(0)))
        })
        .collect()
}

#[test]
fn a_severe_miss_that_outlives_an_effective_growth_grows_again_after_its_evaluation() {
    // Bursts of four pools whatever the ring (TCP opening its windows as
    // the ring grows): every growth leaves three quarters freed.
    let mut w = shipped_cooldown_world();
    let c = changes(&mut w, 40, severe);
    assert!(c.len() >= 2, "{c:?}");
    let (k1, k2) = (c[0].0, c[1].0);
    assert_eq!(k1, 3, "{c:?}");
    // Not before the evaluation (12 samples) closed; then two severe
    // samples: not the cooldown's 60.
    assert!((k1 + 12..=k1 + 15).contains(&k2), "{c:?}");
}

#[test]
fn a_moderate_miss_after_a_growth_waits_for_the_cooldown() {
    // A severe miss grows the ring; what is left is moderate (an eighth
    // over the pool): the next step waits for the whole cooldown.
    let mut w = shipped_cooldown_world();
    let c = changes(&mut w, 75, |w, i| {
        if w.ring(i) == 512 {
            severe(w, i)
        } else {
            moderate(w, i)
        }
    });
    assert!(c.len() >= 2, "{c:?}");
    assert!(c[1].0 >= c[0].0 + 60, "{c:?}");
}

#[test]
fn the_follow_up_wait_needs_a_growth_of_the_same_ring_not_judged_a_failure() {
    use crate::gates::follow_up_wait;
    use crate::knobs::{ChannelField, Knob, RingField};
    use crate::observation::{ActionRecord, Outcome};
    let p = shipped_cooldown_world().policy;
    let ring = Knob::Ring(RingField::Rx);
    let last = |knob, from, to, outcome| ActionRecord {
        device: device(1, "ice", 512, 8160, 2).id,
        knob,
        from,
        to,
        at: Duration::ZERO,
        outcome,
    };
    let grown = last(ring, 512, 2560, Outcome::Effective);
    // Effective, or not judged (the returns outgrew it, a window too thin
    // to read, a restart inside it).
    for outcome in [Outcome::Effective, Outcome::Inconclusive] {
        assert_eq!(
            follow_up_wait(&p, &last(ring, 512, 2560, outcome), ring, 5120, true),
            Some(Duration::from_secs(120))
        );
    }
    // Not a severe window, a step that does not grow past the last one,
    // the channels: the cooldown.
    assert_eq!(follow_up_wait(&p, &grown, ring, 5120, false), None);
    assert_eq!(follow_up_wait(&p, &grown, ring, 2560, true), None);
    let chans = Knob::Channels(ChannelField::Combined);
    assert_eq!(follow_up_wait(&p, &grown, chans, 5120, true), None);
    // The last change was not a growth of this ring, was judged a
    // failure, or is still judged.
    for (knob, from, to, outcome) in [
        (ring, 512, 2560, Outcome::Pending),
        (ring, 512, 2560, Outcome::Ineffective),
        (ring, 512, 2560, Outcome::Reverted),
        (ring, 2560, 512, Outcome::Effective),
        (chans, 4, 8, Outcome::Effective),
    ] {
        let r = last(knob, from, to, outcome.clone());
        assert_eq!(
            follow_up_wait(&p, &r, ring, 5120, true),
            None,
            "{knob} {from}→{to} {outcome:?}"
        );
    }
}
