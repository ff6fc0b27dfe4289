//! The burst a growth step sizes the ring for: ring_full's lower bound,
//! its calibration from the last step, and the pages out at once beyond
//! the posted ring (`docs/decisions.md` §4).

use crate::decide::memory::held_beyond;
use crate::drivers::DriverInfo;
use crate::gates;
use crate::observation::{ActionRecord, Outcome};
use crate::plan::Knob;
use crate::state::RingProbe;
use crate::window::QueueFacts;

/// A growth step's burst estimate and what it came from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Burst {
    /// Pool entries the ring gives now.
    pub pool_now: u32,
    /// Excess pages per ring fill, from ring_full.
    pub excess: f64,
    /// This step's number (the growth steps that led to the current
    /// ring, plus one) and the policy's last.
    pub step: u32,
    pub max_steps: u32,
    /// The engine remembers what the last growth step saw, at this ring
    /// and queue count ([`RingProbe::applies`]): the step can be
    /// calibrated, if that step lowered what the pool frees.
    pub probe_known: bool,
    /// ring_full per page handed out in the window
    /// ([`crate::signals::freed_per_page_handed_out`]), which the next step fits.
    pub freed: Option<f64>,
    /// (burst, undercount factor when the excess gave it) calibrated from
    /// the last step.
    pub calibrated: Option<(f64, Option<f64>)>,
    /// Pages out at once beyond the posted ring.
    pub held: Option<f64>,
    /// The burst the step sizes for, in pages, and where it comes from.
    pub pages: f64,
    pub basis: BurstBasis,
}

/// Consecutive growth changes of `knob` at the end of the history that led
/// to the value the device has now (`current`), back to the newest that
/// was never judged ([`Outcome::Inconclusive`]: the daemon restarted inside
/// its evaluation, a counter went back, or the returns outgrew it). What
/// such a step did to the pool's signals is not known: a fit from its
/// probe would compare two loads, not two rings, and it is not known to
/// have fallen short, so the next step is a first step, not the last.
/// Bursts that grew from 1024 to 4096 pages while the daemon was down,
/// across a step 256 → 1280, give the same counters as 12,549-page bursts
/// beside small returns ([`calibrate`]); the fit took them for those
/// (1280 → 15687).
///
/// The chain must be anchored on the live value and unbroken: each counted
/// change must have left the knob where the next one started. A device id
/// without bus or permanent MAC falls back to its name, and a virtual
/// device deleted and re-created under the same name (`ppsim0`, `veth0`)
/// inherits the old incarnation's records; so does a device whose ring was
/// changed by someone else since. Counting those made the first change on
/// a fresh device the "last step" and sent it straight to the limit
/// (bursty-1k-100kpps: 256 → 16384 after a bursty-8k run on the same name).
pub(super) fn grow_steps(
    history: &[ActionRecord],
    dev: &crate::snapshot::DeviceId,
    knob: Knob,
    current: u32,
) -> u32 {
    let mut expect = current;
    let mut n: u32 = 0;
    for r in history
        .iter()
        .rev()
        .filter(|r| &r.device == dev && r.knob == knob && gates::touched(r))
    {
        if r.to <= r.from || landed(r) != expect || r.outcome == Outcome::Inconclusive {
            break;
        }
        n = n.saturating_add(1);
        expect = r.from;
    }
    n
}

/// Calibrates the burst after a growth step from pool P0 to P1 (the pool
/// now), from how far the step moved two lines whose zero is the burst,
/// and takes the larger where both give one:
///
/// - **The excess per ring fill**, E = pool × ring_full / recycle_ring. If
///   the counters see 1/k of the freed pages, E = (B − P) / k, so
///   k = (P1 − P0) / (E0 − E1) (at least 1: the counters never see more
///   pages freed than were) and B = P1 + k × E1. Bursts of many sizes
///   bend it past the largest (the ring returns of the bursts smaller than
///   the pool fall with it), which covers a tail in two steps. Small
///   returns beside the bursts bend it the other way: they land in the
///   ring without filling it, and beside many of them E grows with the
///   pool, leaving nothing to fit.
/// - **ring_full per page handed out**, m
///   ([`crate::signals::freed_per_page_handed_out`]):
///   B = P1 + m1 × (P1 − P0) / (m0 − m1). Exact for one burst size
///   whatever k and whatever small returns the pool also hands out (they
///   add to the pages on both sides of the step, not to the zero); for
///   many sizes the freed pages are convex in the pool and the fit falls
///   short of the largest.
///
/// Fitted on E alone, a rare burst among many small returns climbed a
/// staircase of ×1.5 steps with nothing to fit. Returns (burst, k), k when
/// the excess gave a fit; `None` when neither line fell (nothing to fit).
pub(super) fn calibrate(
    p: &RingProbe,
    pool_now: u32,
    excess_now: f64,
    freed_now: Option<f64>,
) -> Option<(f64, Option<f64>)> {
    let grown = f64::from(pool_now) - f64::from(p.pool_before);
    if grown <= 0.0 {
        return None;
    }
    let fell = |before: f64, now: f64| {
        let shrunk = before - now;
        (shrunk > 0.0 && shrunk.is_finite()).then_some(grown / shrunk)
    };
    let k = fell(p.excess_before, excess_now).map(|k| k.max(1.0));
    let by_excess = k.map(|k| f64::from(pool_now) + k * excess_now);
    let by_pages = p
        .freed_before
        .zip(freed_now)
        .and_then(|(m0, m1)| fell(m0, m1).map(|slope| f64::from(pool_now) + m1 * slope));
    let burst = match (by_excess, by_pages) {
        (Some(a), Some(b)) => a.max(b),
        (a, b) => a.or(b)?,
    };
    Some((burst, k))
}

/// Where a growth step's burst figure comes from ([`burst_estimate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BurstBasis {
    /// ring_full's lower bound, with nothing to say more.
    Lower,
    /// The lower bound, which the pages out beyond the posted ring confirm
    /// (they never exceeded it).
    Confirmed,
    /// The pages out at once beyond the posted ring ([`held_pages`]).
    Held,
    /// Between the lower bound and the pages out at once, which may hold
    /// more than comes back together: their geometric mean.
    Bracketed,
    /// The burst calibrated from the last step ([`calibrate`]).
    Calibrated,
    /// The last step with nothing but the lower bound: the limit.
    Limit,
}

/// The burst estimate a growth step sizes the ring for, and where it comes
/// from. `lower`: pool + excess from ring_full, a lower bound (ring_full
/// undercounts on bulk return paths); `fit`: the calibrated burst, when this
/// step may use it; `held`: pages out at once beyond the posted ring
/// ([`held_pages`]). The pages out at once bound the burst from above
/// (nothing comes back that was not out) but are not the burst: a reader
/// behind a deep receive queue keeps thousands of pages out all the time
/// and returns them one read at a time (the wire's steady stream: lower
/// bound 293, 2,392 out, 724 enough). At or below the lower bound they
/// confirm it. Above it, with nothing calibrated, a step goes to their
/// geometric mean with the lower bound: the minimax guess on a ratio scale
/// (off by at most √(held / lower) either way), and the next step
/// calibrates from what it moved (docs/decisions.md §4). Only the last
/// step after such a guess (`bracketed`: the step that led to the ring now
/// was one) takes the pages out: the guess fell short and nothing fits, so
/// covering them beats the limit. A last step whose bracket was never
/// tried guesses first: the wire's mice took one step on ring_full's
/// figure (the pages out confirmed it then), saw 3,267 pages out behind
/// the elephant's receive queue at the next, and went 353 → 4084 where
/// 724 took every return. With
/// a fit, the tighter of the fit and the pages out wins, never below the
/// lower bound; the limit only on the last step when the lower bound is
/// all there is (it already failed to cover the burst, and nothing the
/// kernel shows says by how much).
pub(super) fn burst_estimate(
    lower: f64,
    fit: Option<f64>,
    held: Option<f64>,
    last: bool,
    bracketed: bool,
) -> (f64, BurstBasis) {
    let above = held.filter(|h| *h > lower);
    match (fit, above) {
        (Some(a), Some(h)) if h < a => (h, BurstBasis::Held),
        (Some(a), _) => (a.max(lower), BurstBasis::Calibrated),
        (None, Some(h)) if last && bracketed => (h, BurstBasis::Held),
        (None, Some(h)) => ((lower * h).sqrt(), BurstBasis::Bracketed),
        (None, None) if held.is_some() => (lower, BurstBasis::Confirmed),
        (None, None) if last => (lower, BurstBasis::Limit),
        (None, None) => (lower, BurstBasis::Lower),
    }
}

/// A second, kernel-visible view of the return burst: the peak of the
/// queue's `inflight` over the window (page-pool-get) minus the buffers the
/// device keeps posted at `ring`. The pages out beyond the posted ring
/// include every page of a burst before it returns, whatever path it takes
/// back, so this does not share ring_full's undercount (though a sample
/// can miss the peak). `None` when nothing is out beyond the posted ring.
///
/// `inflight` also counts the pages parked in the pool's ring and cache,
/// and a pool frees pages only when its ring is full: once a burst came
/// back, its pages stay counted (up to the pool ring) until the pool is
/// rebuilt. So this is at least what the pool's ring could park of the
/// most pages out since the pool was built — an upper bound on the bursts
/// since then, never what the load needs now (docs/decisions.md §7).
pub(crate) fn held_pages(q: &QueueFacts, info: &DriverInfo, ring: u32) -> Option<u64> {
    held_beyond(info, ring, q.inflight_peak)
}

/// The value a change left the knob at: its target, unless it failed or was
/// put back.
fn landed(r: &ActionRecord) -> u32 {
    match r.outcome {
        Outcome::Failed { .. } | Outcome::Reverted => r.from,
        _ => r.to,
    }
}
