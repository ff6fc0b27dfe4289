//! Judging a change: the window after it against the baseline before it,
//! with the one harm definition. Pure: the daemon samples, this decides
//! effective, ineffective, revert — or no data.
//!
//! A ring or channel change rebuilds every pool, so pool deltas are taken
//! per pool id ([`crate::accounting`]); the harm counters (qstats, link
//! stats64) belong to the device and survive the rebuild. A counter that
//! went backwards makes the window **no data** ([`Verdict::NoData`]), never
//! "no harm".

use crate::drivers::POOL_CACHE_PAGES;
use crate::observation::Outcome;
use crate::plan::ReasonCode;
use crate::policy::Policy;
use crate::price::MissCost;
use crate::signals::n64;
use crate::window::Rates;

mod window;
pub use window::{Applied, Closed, Evaluation, Judged, OpenWindows, VANISHED};

/// The verdict on a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Harm got worse: put the old value back.
    Harmful(String),
    /// The signal the change was made for did not move.
    Ineffective(String),
    Effective(String),
    /// A counter went backwards in the baseline or the window: nothing to
    /// judge (not "no harm").
    NoData(String),
}

impl Verdict {
    /// The outcome recorded for the change.
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        match self {
            Self::Harmful(_) => Outcome::Reverted,
            Self::Ineffective(_) => Outcome::Ineffective,
            Self::Effective(_) => Outcome::Effective,
            Self::NoData(_) => Outcome::Inconclusive,
        }
    }

    /// Why, in words (the evidence behind the verdict).
    #[must_use]
    pub fn why(&self) -> &str {
        match self {
            Self::Harmful(w) | Self::Ineffective(w) | Self::Effective(w) | Self::NoData(w) => w,
        }
    }
}

/// Harm is "worse" when it grew by half and by a floor that keeps noise on
/// an idle link from counting (1 drop per 10⁴ packets, or 1 per second).
const HARM_FACTOR: f64 = 1.5;
const HARM_FLOOR_PER_PACKET: f64 = 1e-4;
const HARM_FLOOR_PER_SEC: f64 = 1.0;
/// The signal "moved" when it fell by at least a tenth, or below the
/// threshold that would have triggered the change. A first ring step is
/// deliberately partial (the burst estimate from ring_full is a lower
/// bound), so a 0.52 → 0.40 recycle-miss share is progress, not a failure:
/// with a quarter as the bar, that step was judged ineffective in the VM and
/// growth stopped halfway.
const MOVE_FACTOR: f64 = 0.9;

/// Compares the window after a change with the baseline before it
/// (`None`: no baseline, judged against zero harm). A ring change is judged
/// on the signal it was made for, with `policy.thresholds.grow_recycle_miss`
/// at the device's miss `cost` ([`crate::policy::Thresholds::priced`]) as the bar; a trial queue cut ([`ReasonCode::ChannelsShrinkTrial`]) on
/// the delivered rate, which must rise by more than
/// `policy.channels.trial_gain` or the cut is put back.
#[must_use]
pub fn judge(
    reason: ReasonCode,
    values: (u32, u32),
    before: Option<&Rates>,
    after: Option<&Rates>,
    policy: &Policy,
    cost: MissCost,
) -> Verdict {
    judge_within(reason, values, before, after, None, policy, cost)
}

/// [`judge`], with the window's two halves when it has them: a ring
/// growth whose share did not move, but rose from the first half to the
/// second at the one ring, was judged under a load that grew
/// ([`outgrown`]).
fn judge_within(
    reason: ReasonCode,
    (from, to): (u32, u32),
    before: Option<&Rates>,
    after: Option<&Rates>,
    halves: Option<&(Rates, Rates)>,
    policy: &Policy,
    cost: MissCost,
) -> Verdict {
    let th = policy.thresholds.priced(cost);
    let grow_threshold = th.grow_recycle_miss;
    let Some(after) = after else {
        return Verdict::Ineffective("empty evaluation window".into());
    };
    let zero = Rates {
        secs: after.secs,
        ..Rates::default()
    };
    let before = before.unwrap_or(&zero);
    if before.reset || after.reset {
        return Verdict::NoData(format!(
            "a counter went backwards in the {}: no data",
            if before.reset {
                "baseline"
            } else {
                "evaluation window"
            }
        ));
    }
    if let Some(why) = harm_rose(before, after) {
        // A ring growth the returns outgrew compares the harm of two loads,
        // as it does their shares: putting it back would judge the old
        // ring on a baseline the load has left (on the wire the drain's
        // bursts grew under a 256 → 928 step, and the ring put back
        // dropped 5 to 9 times what the grown ring had).
        let outgrew = (reason == ReasonCode::RecycleMissHigh)
            .then(|| outgrown(before, after, (from, to), th.min_pages_per_window))
            .flatten();
        return match outgrew {
            Some(load) => Verdict::NoData(format!("{why}, {load}")),
            None => Verdict::Harmful(why),
        };
    }
    // A share read from fewer returns than a window needs to be judged
    // says nothing: an evaluation that fell into a load's off phase (or
    // saw a handful of returns) is no verdict, not a failure, or an on/off
    // load would bar growth for as long as the record lasts.
    let min_pages = th.min_pages_per_window;
    let judged = crate::window::judged(&after.pools, min_pages);
    let moved = |b: Option<f64>, a: Option<f64>, name: &str, below: Option<f64>| match (b, a) {
        (_, _) if !judged => Verdict::NoData(format!(
            "too little traffic after the change to judge its {name} ({} pages returned, under thresholds.min_pages_per_window {min_pages})",
            crate::window::pages_moved(&after.pools)
        )),
        (_, None) => Verdict::Ineffective(format!("no {name} data after the change (no traffic)")),
        (Some(b), Some(a)) if a <= b * MOVE_FACTOR || below.is_some_and(|t| a < t) => {
            Verdict::Effective(format!("{name} {b:.4} -> {a:.4}"))
        }
        (b, Some(a)) => Verdict::Ineffective(format!(
            "{name} did not move: {} -> {a:.4}",
            b.map_or_else(|| "n/a".to_owned(), |b| format!("{b:.4}"))
        )),
    };
    match reason {
        ReasonCode::RecycleMissHigh => match moved(
            before.recycle_miss(),
            after.recycle_miss(),
            "recycle-miss share",
            Some(grow_threshold),
        ) {
            Verdict::Ineffective(why) if after.recycle_miss().is_some() => {
                match outgrown(before, after, (from, to), th.min_pages_per_window)
                    .or_else(|| grew_within(halves, to, th.min_pages_per_window))
                {
                    Some(load) => Verdict::NoData(format!("{why}, {load}")),
                    None => Verdict::Ineffective(why),
                }
            }
            v => v,
        },
        ReasonCode::ChannelsShrinkContended => moved(
            before.slow_refill(),
            after.slow_refill(),
            "slow-refill share",
            None,
        ),
        // A cut the slow-path share cannot judge (held pages keep it at
        // 100 % whatever the queue count): the rate decides. Flat or lower
        // is put back: the cut cost a rebuild and bought nothing.
        ReasonCode::ChannelsShrinkTrial => {
            let gain = policy.channels.trial_gain;
            let (b, a) = (before.delivered_rate(), after.delivered_rate());
            if before.packets == 0 || after.packets == 0 {
                return Verdict::Harmful(format!(
                    "no delivered rate to compare ({b:.0} -> {a:.0} packets/s): the trial cut is put back"
                ));
            }
            let rise = a / b - 1.0;
            if rise > gain {
                Verdict::Effective(format!(
                    "delivered rate {b:.0} -> {a:.0} packets/s ({:+.1} %)",
                    rise * 100.0
                ))
            } else {
                Verdict::Harmful(format!(
                    "delivered rate {b:.0} -> {a:.0} packets/s ({:+.1} %, not above the {:.1} % trial margin): the trial cut is put back",
                    rise * 100.0,
                    gain * 100.0
                ))
            }
        }
        ReasonCode::ChannelsGrowHealthy => moved(
            Some(before.harm_level()),
            Some(after.harm_level()),
            "harm",
            None,
        ),
        // A calm ring giving memory back: the pools were rebuilt at the
        // smaller ring, so what they free now is what the load frees at
        // it. Misses back at or above the shrink threshold (the level the
        // ring was calm below) mean the load needs the ring: put back, and
        // not tried again while the record lasts (docs/decisions.md §7).
        ReasonCode::CalmShrink => match after
            .recycle_miss()
            .filter(|_| crate::window::judged(&after.pools, th.min_pages_per_window))
        {
            Some(a) if a >= th.shrink_recycle_miss => Verdict::Harmful(format!(
                "recycle-miss share {a:.4} came back at or above the shrink threshold {:.4}: the load needs the ring, put back",
                th.shrink_recycle_miss
            )),
            Some(a) => Verdict::Effective(format!("recycle-miss share {a:.4}, no harm")),
            None => Verdict::Effective("too little traffic to free pages, no harm".to_owned()),
        },
        // Any other change judged on misses: it worked if they stayed
        // below the level that would grow the ring again.
        _ => match after.recycle_miss() {
            Some(a) if a >= grow_threshold => Verdict::Ineffective(format!(
                "recycle-miss share {a:.4} is back at the grow threshold"
            )),
            _ => Verdict::Effective("no harm".to_owned()),
        },
    }
}

/// The one harm rule: `Some` (in words) when harm in `after` rose by half
/// over `before` and by a floor that keeps noise on an idle link from
/// counting. A change is put back by it, and its revert is judged by it
/// ([`Judged::Revert`]).
fn harm_rose(before: &Rates, after: &Rates) -> Option<String> {
    let floor = if after.packets > 0 {
        HARM_FLOOR_PER_PACKET
    } else {
        HARM_FLOOR_PER_SEC
    };
    let (hb, ha) = (before.harm_level(), after.harm_level());
    (ha > hb * HARM_FACTOR + floor).then(|| format!("harm rose from {hb:.6} to {ha:.6}"))
}

/// The window after a revert, against the window that put the change back
/// (`before`: harm at the change's value, `from`; `after`: at the value
/// the revert restored, `to`). Harm that rose by the same rule means the
/// change was not what hurt: the load was (on the wire, a drain whose
/// bursts grew under a growth whose share still fell; the ring put back
/// then dropped 1.0-1.8 % of packets against the grown ring's 0.13 %), and
/// the revert is undone ([`Verdict::Harmful`]). Otherwise, or with nothing
/// to compare, the revert stands.
fn judge_revert((from, to): (u32, u32), before: Option<&Rates>, after: Option<&Rates>) -> Verdict {
    let (Some(before), Some(after)) = (before, after) else {
        return Verdict::NoData("nothing to compare the revert with: it stands".into());
    };
    if before.reset || after.reset {
        return Verdict::NoData("a counter went backwards: no data, the revert stands".into());
    }
    match harm_rose(before, after) {
        Some(why) => Verdict::Harmful(format!(
            "{why} going back from {from} to {to}: the harm was the load's, the change is put back in place"
        )),
        None => Verdict::Effective(format!(
            "the revert held: harm {:.6} at {from}, {:.6} at {to}",
            before.harm_level(),
            after.harm_level()
        )),
    }
}

/// Whether the returns outgrew a ring growth `from` → `to` while it was
/// judged (`Some`: what grew). With the load held, each part of a queue's
/// pages in flight follows the ring (the buffers posted, the pages a bigger
/// pool ring parks), does not depend on it (the pages the stack holds) or
/// is bounded by the pool's cache ([`POOL_CACHE_PAGES`], full at one
/// sample and empty at the next), so together they grow by at most the
/// ring's ratio and a cache. More, on any queue, means the traffic grew
/// under the step — TCP autotuning deepening a receive queue, a new flow —
/// and the recycle-miss shares before and after do not compare: the
/// wire's steady stream went from 0.11 to 0.15 across 256 → 361 while the
/// pages out went ×2 to ×7. Queue by queue, because on a device of several
/// busy queues the others' held pages dilute one queue's growth in the
/// device's sum. The share itself says so too: one that rose under a
/// growth was not the ring's doing. Such a step is judged neither
/// ineffective (which would end growth) nor harmful (its harm, like its
/// share, compares two loads), and the next window decides afresh
/// (docs/decisions.md §6b).
fn outgrown(
    before: &Rates,
    after: &Rates,
    (from, to): (u32, u32),
    min_pages: u64,
) -> Option<String> {
    if from == 0 || to <= from {
        return None;
    }
    let ring = f64::from(to) / f64::from(from);
    let cache = n64(POOL_CACHE_PAGES);
    let pages = after
        .load
        .0
        .iter()
        .filter_map(|&(key, a)| {
            let b = before.load.of(key).filter(|b| *b > 0.0)?;
            (a > b * ring + cache).then_some((key, b, a))
        })
        .max_by(|x, y| (x.2 / x.1).total_cmp(&(y.2 / y.1)))
        .map(|(key, b, a)| {
            format!(
                "but the returns grew under the step: {key}'s pages in flight went {b:.0} -> {a:.0} (x{:.2}), more than the ring's x{ring:.2} and a pool cache account for; not judged",
                a / b
            )
        });
    if pages.is_some() {
        return pages;
    }
    // A bigger pool ring parks more of each burst and frees no more of the
    // same returns: a recycle-miss share that rose under the step (by as
    // much as an effective step must lower it) came with the load. On the
    // wire the drain's share went 0.15 → 0.23-0.29 across 256 → 870 as TCP
    // autotuning grew its bursts, while the pages out grew by less than
    // the ring. Only shares read from a window's worth of returns on both
    // sides: a handful of returns after the step says nothing of the load.
    share_rose(before, after, min_pages).map(|(b, a)| {
        format!(
            "but the returns grew under the step: the recycle-miss share rose {b:.4} -> {a:.4}, which a bigger pool ring cannot do to the same returns; not judged"
        )
    })
}

/// The recycle-miss shares `earlier` and `later` when the share rose by as
/// much as an effective step must lower it (a ninth), both read from at
/// least `min_pages` returns: the one "the load grew" reading of two
/// windows, across a step ([`outgrown`]) or within one ([`grew_within`]).
fn share_rose(earlier: &Rates, later: &Rates, min_pages: u64) -> Option<(f64, f64)> {
    let enough = |r: &Rates| crate::window::judged(&r.pools, min_pages);
    if !(enough(earlier) && enough(later)) {
        return None;
    }
    let (a, b) = (earlier.recycle_miss()?, later.recycle_miss()?);
    (a <= b * MOVE_FACTOR).then_some((a, b))
}

/// Whether the returns grew while a ring growth was judged (`Some`: in
/// words), read from the evaluation window's halves: at one ring a held
/// load frees a steady share, so a share that rose from the first half to
/// the second by as much as an effective step must lower it (a ninth),
/// each half holding a window's worth of returns, came with the load. On
/// the wire a drain's bursts grew under 256 → 1393 (TCP autotuning): the
/// share went 0.49 → 0.24 in the first window after the step, then 0.44
/// and 0.51, 0.46 over the whole window, and the step read as one that
/// did not move it, barring growth for two hours. Only for a share that
/// did not move: harm keeps its own check (its revert is judged).
fn grew_within(halves: Option<&(Rates, Rates)>, ring: u32, min_pages: u64) -> Option<String> {
    let (first, second) = halves?;
    share_rose(first, second, min_pages).map(|(a, b)| {
        format!(
            "but the returns grew while the step was judged: the recycle-miss share rose {a:.4} -> {b:.4} from the window's first half to its second, at ring {ring}; not judged"
        )
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::accounting::QueueKey;
    use crate::plan::Knob;
    use crate::snapshot::Device;
    use crate::snapshot::PoolStats;
    use crate::window::Load;

    fn r(miss: (u64, u64), harm: u64, packets: u64) -> Rates {
        Rates {
            secs: 10.0,
            pools: PoolStats {
                recycle_ring_full: miss.0,
                recycle_ring: miss.1,
                ..PoolStats::default()
            },
            provider: false,
            harm,
            packets,
            reset: false,
            load: Load::default(),
        }
    }

    /// One queue (rx-0) with `pages` out on average.
    fn one(pages: f64) -> Load {
        Load(vec![(QueueKey::Id(0), pages)])
    }

    /// A ring growth 512 → 1024 for recycle misses.
    const GROWTH: Applied = Applied {
        knob: Knob::Ring(crate::plan::RingField::Rx),
        from: 512,
        to: 1024,
        reason: ReasonCode::RecycleMissHigh,
    };

    /// `dev` with its first pool at `inflight` pages out, having counted
    /// `miss` (ring_full, ring).
    fn pooled(dev: &Device, inflight: u64, miss: (u64, u64)) -> Device {
        let mut d = dev.clone();
        let p = &mut d.rx_queues[0].pools[0];
        p.inflight = Some(inflight);
        p.stats = Some(PoolStats {
            recycle_ring_full: miss.0,
            recycle_ring: miss.1,
            ..PoolStats::default()
        });
        d
    }

    #[test]
    fn verdicts() {
        let before = r((500, 500), 10, 1_000_000);
        let policy = crate::fixtures::policy();
        let j = |after: &Rates| {
            judge(
                ReasonCode::RecycleMissHigh,
                (512, 1024),
                Some(&before),
                Some(after),
                &policy,
                MissCost::Unknown,
            )
        };
        assert!(matches!(
            j(&r((10, 990), 10, 1_000_000)),
            Verdict::Effective(_)
        ));
        assert!(matches!(
            j(&r((480, 520), 10, 1_000_000)),
            Verdict::Ineffective(_)
        ));
        assert!(matches!(
            j(&r((10, 990), 5000, 1_000_000)),
            Verdict::Harmful(_)
        ));
        // A reset is no data, not "no harm".
        let reset = Rates {
            reset: true,
            ..r((10, 990), 0, 1_000_000)
        };
        assert!(matches!(j(&reset), Verdict::NoData(_)));
        assert_eq!(j(&reset).outcome(), Outcome::Inconclusive);
    }

    #[test]
    fn harm_counts_drops_and_alloc_fail_once() {
        use crate::snapshot::{LinkStats, QueueStats};
        let dev = |drops: u64, fail: u64, link: u64| Device {
            qstats: Some(QueueStats {
                rx_packets: Some(1000 + drops),
                rx_hw_drops: Some(drops),
                rx_alloc_fail: Some(fail),
                ..QueueStats::default()
            }),
            link_stats: Some(LinkStats {
                rx_dropped: link,
                ..LinkStats::default()
            }),
            ..Device::default()
        };
        let r = Rates::between(&dev(0, 0, 0), &dev(5, 2, 7), Duration::from_secs(1));
        let r = r.unwrap_or_default();
        // qstats drops are the harm source; the link counters are not added
        // on top (they count the same packets).
        assert_eq!((r.harm, r.packets, r.reset), (7, 5, false));
        let back = Rates::between(&dev(5, 2, 7), &dev(0, 0, 0), Duration::from_secs(1));
        assert!(back.is_some_and(|r| r.reset));
    }

    /// A trial queue cut is judged on the delivered rate alone: kept when
    /// it rose by more than `channels.trial_gain`, put back (the daemon
    /// reverts what is harmful) when it rose less, stayed flat or fell, or
    /// when there is no rate to compare. Harm still comes first.
    #[test]
    fn a_trial_cut_is_judged_on_the_delivered_rate() {
        let policy = crate::fixtures::policy();
        assert!((policy.channels.trial_gain - 0.05).abs() < 1e-12);
        let rate = |packets: u64, harm: u64| Rates {
            // held pages: the slow path is 100 % whatever the queue count
            pools: PoolStats {
                alloc_slow: 1000,
                recycle_released_refcnt: 64_000,
                ..PoolStats::default()
            },
            ..r((0, 0), harm, packets)
        };
        let before = rate(2_494_154, 0);
        let j = |after: &Rates| {
            judge(
                ReasonCode::ChannelsShrinkTrial,
                (16, 14),
                Some(&before),
                Some(after),
                &policy,
                MissCost::Unknown,
            )
        };
        // 16 → 14 queues in ppsim's model: +7.3 %.
        let kept = j(&rate(2_675_000, 0));
        assert!(matches!(kept, Verdict::Effective(_)), "{kept:?}");
        assert!(kept.why().contains("+7.3 %"), "{kept:?}");
        for (after, why) in [
            (2_580_000, "+3.4 %"), // a rise inside the margin
            (2_494_154, "+0.0 %"), // flat
            (2_450_000, "-1.8 %"), // fell
        ] {
            let v = j(&rate(after, 0));
            assert!(matches!(v, Verdict::Harmful(_)), "{after}: {v:?}");
            assert_eq!(v.outcome(), Outcome::Reverted);
            assert!(
                v.why().contains(why) && v.why().contains("put back"),
                "{v:?}"
            );
        }
        // More delivered, but drops rose: harm decides first.
        let v = j(&rate(3_000_000, 50_000));
        assert!(v.why().starts_with("harm rose"), "{v:?}");
        // No baseline: nothing shows a gain, the cut is put back.
        let v = judge(
            ReasonCode::ChannelsShrinkTrial,
            (16, 14),
            None,
            Some(&rate(3_000_000, 0)),
            &policy,
            MissCost::Unknown,
        );
        assert!(matches!(v, Verdict::Harmful(_)), "{v:?}");
    }

    /// A calm ring's give-back step: put back when the rebuilt pools free
    /// pages at or above the shrink threshold (the load needs the ring),
    /// kept otherwise, and kept with too little traffic to judge.
    #[test]
    fn a_give_back_that_brings_misses_back_is_put_back() {
        let policy = crate::fixtures::policy();
        let j = |after: &Rates| {
            judge(
                ReasonCode::CalmShrink,
                (2560, 1152),
                Some(&r((0, 100_000), 0, 1_000_000)),
                Some(after),
                &policy,
                MissCost::Unknown,
            )
        };
        // 1 % freed: under the grow threshold (5 %), above the shrink
        // threshold (0.5 %) the ring was calm below.
        let v = j(&r((1_000, 99_000), 0, 1_000_000));
        assert!(matches!(v, Verdict::Harmful(_)), "{v:?}");
        assert_eq!(v.outcome(), Outcome::Reverted);
        assert!(v.why().contains("put back"), "{v:?}");
        let v = j(&r((100, 99_900), 0, 1_000_000));
        assert!(matches!(v, Verdict::Effective(_)), "{v:?}");
        // Too few pages returned for a share: no harm.
        let v = j(&r((10, 90), 0, 100));
        assert!(matches!(v, Verdict::Effective(_)), "{v:?}");
        // Harm first.
        let v = j(&r((0, 100_000), 5_000, 1_000_000));
        assert!(v.why().starts_with("harm rose"), "{v:?}");
    }

    /// A ring growth whose recycle-miss share did not fall is ineffective
    /// when the load held, and not judged when the returns outgrew the step
    /// (the pages out grew by more than the ring did): the wire's steady
    /// stream, where TCP autotuning deepened the receive queue under a
    /// 256 → 361 step and the share rose 0.11 → 0.15.
    #[test]
    fn a_growth_outgrown_by_its_returns_is_not_judged() {
        let policy = crate::fixtures::policy();
        let load = |miss, inflight| Rates {
            load: one(inflight),
            ..r(miss, 0, 1_000_000)
        };
        let before = load((113, 887), 512.0);
        let j = |before: &Rates, after: Rates| {
            judge(
                ReasonCode::RecycleMissHigh,
                (256, 361),
                Some(before),
                Some(&after),
                &policy,
                MissCost::Unknown,
            )
        };
        let v = j(&before, load((152, 848), 1063.0));
        assert!(matches!(v, Verdict::NoData(_)), "{v:?}");
        assert_eq!(v.outcome(), Outcome::Inconclusive);
        assert!(
            v.why().contains("x2.08") && v.why().contains("x1.41"),
            "{v:?}"
        );
        // Pages out grown no more than the ring and the share flat: the
        // step did not work.
        for inflight in [400.0, 512.0, 700.0, 512.0 * 361.0 / 256.0] {
            let v = j(&before, load((120, 880), inflight));
            assert!(matches!(v, Verdict::Ineffective(_)), "{inflight}: {v:?}");
        }
        // The share rose by more than an effective step lowers it, the pages
        // out held: a bigger pool ring frees no more of the same returns,
        // so the returns changed. Not judged.
        for inflight in [400.0, 512.0, 700.0] {
            let v = j(&before, load((152, 848), inflight));
            assert!(matches!(v, Verdict::NoData(_)), "{inflight}: {v:?}");
            assert!(v.why().contains("share rose 0.1130 -> 0.1520"), "{v:?}");
        }
        // The share fell: effective, whatever the load did.
        assert!(matches!(
            j(&before, load((50, 950), 3000.0)),
            Verdict::Effective(_)
        ));
        // Harm first: a growth that made harm worse is reverted, unless the
        // returns outgrew it, when the harm too compares two loads (the
        // wire's remedy runs: the drain's bursts grew under 256 → 870, the
        // share rose 0.15 → 0.25 and drops from none to 0.13 % of packets;
        // the ring put back then dropped 1.1 % of them).
        let harmed = |miss, inflight| Rates {
            load: one(inflight),
            ..r(miss, 5000, 1_000_000)
        };
        // A handful of returns after the step (a share of 0.25 from 20
        // pages) says nothing of the load: the harm is judged.
        for (miss, inflight) in [((50, 950), 512.0), ((120, 880), 512.0), ((5, 15), 512.0)] {
            let v = j(&before, harmed(miss, inflight));
            assert!(
                matches!(v, Verdict::Harmful(_)),
                "{miss:?} {inflight}: {v:?}"
            );
        }
        for (miss, inflight) in [
            ((152, 848), 512.0),
            ((120, 880), 3000.0),
            ((50, 950), 3000.0),
        ] {
            let v = j(&before, harmed(miss, inflight));
            assert!(
                matches!(v, Verdict::NoData(_)),
                "{miss:?} {inflight}: {v:?}"
            );
            assert!(
                v.why().starts_with("harm rose") && v.why().contains("returns grew"),
                "{v:?}"
            );
        }
        // No load measured before (a kernel without inflight): judged on the
        // share alone, which says whether the returns changed.
        assert!(matches!(
            j(&load((113, 887), 0.0), load((120, 880), 3000.0)),
            Verdict::Ineffective(_)
        ));
        assert!(matches!(
            j(&load((113, 887), 0.0), load((152, 848), 3000.0)),
            Verdict::NoData(_)
        ));
        // No traffic after, or too little to judge (a load's off phase):
        // no verdict, neither "outgrown" nor a failure that bars growth.
        for (ret, n) in [((0, 0), 0), ((3, 40), 10)] {
            let idle = Rates {
                load: one(3000.0),
                ..r(ret, 0, n)
            };
            let v = j(&before, idle);
            assert!(matches!(v, Verdict::NoData(_)), "{ret:?}: {v:?}");
            assert!(v.why().contains("too little traffic"), "{v:?}");
        }
    }

    /// Several busy queues with different loads: one queue's returns grow
    /// under a 256 → 361 step while three hold their own. The device's
    /// pages in flight grow by less than the ring (×1.34: the three
    /// queues' held pages dilute the one that grew); that queue's grow ×7,
    /// so the step is not judged, as on a one-queue device. Held loads,
    /// and an idle queue whose pool cache filled, leave the step judged.
    #[test]
    fn one_queue_outgrowing_a_step_among_busy_ones_is_not_judged() {
        use crate::fixtures::{Nic, QueueCounters};
        let policy = crate::fixtures::policy();
        let w = policy.timing.evaluation;
        // Queue q's pages out, and its counters since the pools were made:
        // 11.3 % of returns freed before the step, 15.2 % after it.
        let at = |ring: u32, pages: [u64; 4], miss: (u64, u64)| {
            let mut n = Nic::pci(1, "ice", 4);
            n.rings.rx = Some(ring);
            n.device(|q| QueueCounters {
                pool: PoolStats {
                    recycle_ring_full: miss.0,
                    recycle_ring: miss.1,
                    ..PoolStats::default()
                },
                inflight: pages[q as usize],
                ..QueueCounters::default()
            })
        };
        let before_pages = [300, 3000, 3000, 256];
        let baseline = Rates::between(
            &at(256, before_pages, (0, 0)),
            &at(256, before_pages, (1130, 8870)),
            Duration::from_secs(10),
        );
        let change = Applied {
            knob: Knob::Ring(crate::plan::RingField::Rx),
            from: 256,
            to: 361,
            reason: ReasonCode::RecycleMissHigh,
        };
        let judged = |after: [u64; 4], miss: (u64, u64)| {
            let t0 = Duration::from_secs(100);
            let start = at(361, after, (0, 0));
            let mut ev = Evaluation::open(change, baseline.clone(), start.clone(), t0, &policy);
            let t1 = t0 + Duration::from_secs(2);
            assert_eq!(ev.advance(&start, t1, &policy), None);
            ev.advance(&at(361, after, miss), t1 + w, &policy)
                .expect("closed")
                .verdict
        };
        // Queue 0 grew x7; queues 1 and 2 hold (their posted part follows
        // the ring), queue 3 is idle. The device: 6556 -> 8057, x1.23.
        let grown = [2100, 3105, 3105, 361 + 128 - 1];
        let v = judged(grown, (1520, 8480));
        assert!(matches!(v, Verdict::NoData(_)), "{v:?}");
        assert!(
            v.why()
                .contains("rx-0's pages in flight went 300 -> 2100 (x7.00)"),
            "{v:?}"
        );
        assert!(
            grown.iter().sum::<u64>() * 256 < before_pages.iter().sum::<u64>() * 361,
            "the device's sum grew by less than the ring"
        );
        // Every queue's load held: the step did not move the share.
        let held = [423, 3105, 3105, 361 + 128 - 1];
        let v = judged(held, (1180, 8820));
        assert!(matches!(v, Verdict::Ineffective(_)), "{v:?}");
        // The loads held by the pages out, but the share rose by more than
        // a ninth: the returns changed, which no ring does. Not judged.
        let v = judged(held, (1520, 8480));
        assert!(matches!(v, Verdict::NoData(_)), "{v:?}");
        assert!(v.why().contains("share rose"), "{v:?}");
    }

    /// A change the harm rule put back has its revert judged by the same
    /// rule against the window that put it back: undone when the old value
    /// did worse, standing otherwise (or with nothing to compare). An undo
    /// is final, and a change put back for anything but harm (a trial cut
    /// for its rate, a give-back for its misses) has no revert window.
    /// A window whose device a sample lacks (it vanished), or whose
    /// device or knob is forgotten, ends unjudged: a change closes
    /// `inconclusive` (a `pending` record would hold its device for good),
    /// a revert stands, and nothing is set back.
    #[test]
    fn a_window_whose_device_left_ends_unjudged() {
        let policy = crate::fixtures::policy();
        let nic = crate::fixtures::nic("mlx5_core", 1024, 8192, 1);
        let other = crate::fixtures::Nic::netdevsim(1, 1).device(|_| Default::default());
        let t0 = Duration::from_secs(100);
        let change = Evaluation::open(GROWTH, None, nic.clone(), t0, &policy);
        let revert = Evaluation {
            judged: Judged::Revert,
            ..change.clone()
        };
        let mut open = OpenWindows::default();
        open.open(change.clone());
        open.open(revert);
        open.open(Evaluation::open(GROWTH, None, other.clone(), t0, &policy));
        let host = |devices| crate::fixtures::snapshot(0, "7.3.0", devices);
        // Both devices sampled: nothing closes.
        let t1 = t0 + Duration::from_secs(2);
        assert!(
            open.advance(&host(vec![nic.clone(), other.clone()]), t1, &policy)
                .is_empty()
        );
        // `nic` left the sample: its two windows end, the other stays.
        let ended = open.advance(&host(vec![other.clone()]), t1, &policy);
        let got: Vec<_> = ended
            .iter()
            .map(|(c, d)| (c.ev.judged, c.outcome.clone(), c.set, d.id.key()))
            .collect();
        assert_eq!(
            got,
            [
                (Judged::Change, Outcome::Inconclusive, None, nic.id.key()),
                (Judged::Revert, Outcome::Reverted, None, nic.id.key()),
            ]
        );
        assert!(
            ended
                .iter()
                .all(|(c, _)| matches!(c.verdict, Verdict::NoData(_)))
        );
        assert_eq!(open.list().len(), 1);
        // Forgotten: by knob (another knob keeps its window), then whole.
        let key = other.id.key();
        let channels = Knob::Channels(crate::plan::ChannelField::Combined);
        assert!(open.forget(&key, Some(channels), "override").is_empty());
        let gone = open.forget(&key, None, "override");
        assert_eq!(gone.len(), 1);
        assert_eq!(
            (gone[0].outcome.clone(), gone[0].set),
            (Outcome::Inconclusive, None)
        );
        assert_eq!(gone[0].verdict, Verdict::NoData("override".into()));
        assert!(open.list().is_empty());
    }

    #[test]
    fn a_revert_is_judged_by_the_harm_rule() {
        use crate::snapshot::QueueStats;
        let policy = crate::fixtures::policy();
        let w = policy.timing.evaluation;
        let nic = crate::fixtures::nic("mlx5_core", 1024, 8192, 1);
        // The device having counted `drops` of `packets` and `miss`.
        let at = |drops: u64, packets: u64, miss: (u64, u64)| {
            let mut d = pooled(&nic, 0, miss);
            d.qstats = Some(QueueStats {
                rx_packets: Some(packets),
                rx_hw_drops: Some(drops),
                ..QueueStats::default()
            });
            d.rx_queues[0].qstats = None;
            d
        };
        let t0 = Duration::from_secs(100);
        // A window from its settling sample (counters at zero) to `end`.
        let close = |mut ev: Evaluation, end: &Device| {
            let t1 = ev.start_at + Duration::from_secs(2);
            assert_eq!(ev.advance(&at(0, 0, (0, 0)), t1, &policy), None);
            ev.advance(end, t1 + w, &policy).expect("closed")
        };
        let growth = GROWTH;
        let base = r((500, 500), 10, 1_000_000);
        let open = |change: Applied, base: &Rates| {
            Evaluation::open(change, Some(base.clone()), at(0, 0, (0, 0)), t0, &policy)
        };
        // Harm ×100 with the share falling: put back, its revert judged.
        let put_back = close(open(growth, &base), &at(1000, 1_000_000, (10, 990)));
        assert!(
            matches!(put_back.verdict, Verdict::Harmful(_)),
            "{put_back:?}"
        );
        assert_eq!(
            (put_back.outcome.clone(), put_back.set),
            (Outcome::Reverted, Some(512))
        );
        let revert = |drops: u64| {
            let ev = put_back
                .revert_window(at(0, 0, (0, 0)), t0 + w, &policy)
                .expect("a revert window");
            assert_eq!((ev.judged, ev.from, ev.to), (Judged::Revert, 1024, 512));
            close(ev, &at(drops, 1_000_000, (500, 500)))
        };
        // The old ring did worse by the rule (2e-3 > 1.5 × 1e-3 + 1e-4):
        // undone, the change not judged, and no further window.
        let undone = revert(2000);
        assert!(matches!(undone.verdict, Verdict::Harmful(_)), "{undone:?}");
        assert_eq!(
            (undone.outcome.clone(), undone.set),
            (Outcome::Inconclusive, Some(1024))
        );
        assert_eq!(undone.revert_window(nic.clone(), t0, &policy), None);
        // As bad, or better: the revert stands.
        for drops in [1000, 1500, 10] {
            let held = revert(drops);
            assert!(matches!(held.verdict, Verdict::Effective(_)), "{held:?}");
            assert_eq!((held.outcome, held.set), (Outcome::Reverted, None));
        }
        // Nothing to compare: it stands.
        let mut reset = put_back
            .revert_window(at(0, 0, (0, 0)), t0 + w, &policy)
            .expect("a revert window");
        let t1 = t0 + w + Duration::from_secs(2);
        assert_eq!(reset.advance(&at(5, 5, (0, 0)), t1, &policy), None);
        let reset = reset
            .advance(&at(0, 1_000_000, (0, 0)), t1 + w, &policy)
            .expect("closed");
        assert!(matches!(reset.verdict, Verdict::NoData(_)), "{reset:?}");
        assert_eq!((reset.outcome, reset.set), (Outcome::Reverted, None));
        // Put back for the rate (a trial cut) or the misses (a give-back),
        // harm flat: no revert window.
        let trial = Applied {
            knob: Knob::Channels(crate::plan::ChannelField::Combined),
            from: 4,
            to: 3,
            reason: ReasonCode::ChannelsShrinkTrial,
        };
        let give_back = Applied {
            from: 1024,
            to: 512,
            reason: ReasonCode::CalmShrink,
            ..growth
        };
        for (change, end) in [
            (trial, at(10, 900_000, (0, 0))),
            (give_back, at(10, 1_000_000, (400, 600))),
        ] {
            let c = close(open(change, &base), &end);
            assert_eq!(
                (c.outcome.clone(), c.set),
                (Outcome::Reverted, Some(change.from))
            );
            assert_eq!(c.revert_window(nic.clone(), t0, &policy), None, "{c:?}");
        }
    }

    /// A ring growth whose share did not move over its window, but rose
    /// from the window's first half to its second at the one ring, was
    /// judged under a load that grew: no verdict. Halves that agree: the
    /// step did not move the share (ineffective).
    #[test]
    fn a_share_that_rose_within_the_window_is_not_judged() {
        let policy = crate::fixtures::policy();
        let w = policy.timing.evaluation;
        let nic = crate::fixtures::nic("mlx5_core", 1024, 8192, 1);
        let at = |miss: (u64, u64)| pooled(&nic, 1000, miss);
        let change = GROWTH;
        let before = Rates {
            load: one(1000.0),
            ..r((4900, 5100), 0, 0)
        };
        let t0 = Duration::from_secs(100);
        let run = |mid: (u64, u64), end: (u64, u64)| {
            let mut ev = Evaluation::open(change, Some(before.clone()), at((0, 0)), t0, &policy);
            let t1 = t0 + Duration::from_secs(2);
            assert_eq!(ev.advance(&at((0, 0)), t1, &policy), None);
            assert_eq!(ev.advance(&at(mid), t1 + w / 2, &policy), None);
            ev.advance(&at(end), t1 + w, &policy)
                .expect("closed")
                .verdict
        };
        // 0.30, then 0.60: 0.45 over the window against 0.49 before.
        let v = run((6000, 14_000), (18_000, 22_000));
        assert!(matches!(v, Verdict::NoData(_)), "{v:?}");
        assert!(
            v.why()
                .contains("0.3000 -> 0.6000 from the window's first half"),
            "{v:?}"
        );
        // 0.45 in both halves.
        let v = run((9000, 11_000), (18_000, 22_000));
        assert!(matches!(v, Verdict::Ineffective(_)), "{v:?}");
        // A handful of returns in a half says nothing of the load.
        let v = run((30, 70), (18_000, 22_000));
        assert!(matches!(v, Verdict::Ineffective(_)), "{v:?}");
    }

    /// The load a change is judged under is the pages out at the settled
    /// window's samples, on average: not the sample taken at the change,
    /// which still shows the old pools.
    #[test]
    fn the_load_is_averaged_over_the_settled_window() {
        let policy = crate::fixtures::policy();
        let w = policy.timing.evaluation;
        let mut dev = crate::fixtures::nic("mlx5_core", 1024, 8192, 1);
        let at = pooled;
        let change = GROWTH;
        let before = Rates {
            load: one(1000.0),
            ..r((500, 500), 0, 0)
        };
        let t0 = Duration::from_secs(100);
        dev = at(&dev, 99_999, (0, 0));
        let mut ev = Evaluation::open(change, Some(before), dev.clone(), t0, &policy);
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(ev.advance(&at(&dev, 1000, (0, 0)), t1, &policy), None);
        assert_eq!(
            ev.advance(&at(&dev, 2000, (250, 250)), t1 + w / 2, &policy),
            None
        );
        let v = ev.advance(&at(&dev, 6000, (500, 500)), t1 + w, &policy);
        // Mean of 1000, 2000 and 6000: x3.00 against the ring's x2.00.
        let v = v.expect("closed").verdict;
        assert!(matches!(v, Verdict::NoData(_)), "{v:?}");
        assert!(v.why().contains("1000 -> 3000 (x3.00)"), "{v:?}");
    }

    /// A trial cut's window is as long as its baseline (equal windows
    /// before and after), from the first sample after the rebuild; other
    /// changes keep `timing.evaluation`.
    #[test]
    fn a_trial_window_is_as_long_as_its_baseline() {
        let policy = crate::fixtures::policy();
        let dev = crate::fixtures::nic("ice", 256, 8160, 16);
        let change = Applied {
            knob: Knob::Channels(crate::plan::ChannelField::Combined),
            from: 16,
            to: 14,
            reason: ReasonCode::ChannelsShrinkTrial,
        };
        let base = Rates {
            secs: 10.3,
            ..r((0, 0), 0, 1_000_000)
        };
        let t0 = Duration::from_secs(100);
        let mut ev = Evaluation::open(change, Some(base), dev.clone(), t0, &policy);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(ev.advance(&dev, t1, &policy), None);
        // Closes on the sample nearest the baseline's length (within half
        // an interval): the next 10 s sample, 10 s against 10.3 s.
        assert_eq!(ev.ends, t1 + Duration::from_millis(5300));
        assert_eq!(ev.advance(&dev, t1 + Duration::from_secs(5), &policy), None);
        assert!(
            ev.advance(&dev, t1 + Duration::from_secs(10), &policy)
                .is_some()
        );
        assert!(policy.timing.evaluation > Duration::from_secs(20));
    }

    /// The window opens at the change, restarts at the first sample after
    /// it (the rebuild transient), stays open for `timing.evaluation` from
    /// there and then gives one verdict.
    #[test]
    fn a_window_settles_on_its_first_sample_and_closes_after_the_evaluation() {
        let policy = crate::fixtures::policy();
        let w = policy.timing.evaluation;
        let dev = crate::fixtures::nic("mlx5_core", 1024, 8192, 2);
        let change = GROWTH;
        let t0 = Duration::from_secs(100);
        let mut ev = Evaluation::open(change, None, dev.clone(), t0, &policy);
        assert_eq!((ev.key.as_str(), ev.ends), (dev.id.key().as_str(), t0 + w));
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(ev.advance(&dev, t1, &policy), None);
        assert!(ev.settled);
        assert_eq!((ev.start_at, ev.ends), (t1, t1 + w));
        // Still open where the unsettled window would have closed.
        assert_eq!(ev.advance(&dev, t0 + w, &policy), None);
        assert!(ev.advance(&dev, t1 + w, &policy).is_some());
    }
}
