//! Giving memory back: the step a calm ring takes toward what its pools
//! still need, and what right-sizing could reclaim from one sample. A
//! pool's `inflight` is a high-water mark while the pool lives, so the step
//! reads it as an upper bound and each step's rebuild measures afresh.

use super::memory::{held_beyond, ring_for_burst};
use super::{DeviceState, Proposal};
use crate::drivers::{self, DriverInfo, Learned};
use crate::plan::{Action, Evidence, ReasonCode};
use crate::policy::Policy;
use crate::signals::n64;

/// The give-back rule of a ring (docs/decisions.md §7): when a calm ring
/// steps down, and what a trial put back holds.
impl super::ring::Ring<'_, '_> {
    /// A calm pool gives memory back (docs/decisions.md §7), one step at
    /// a time ([`give_back_step`]), each judged under the load and put
    /// back once when recycle misses come back (`evaluate::judge`), then
    /// held for a span that grows with each failure in a row, unless the
    /// load is gone ([`crate::state::ShrinkHold`]). The
    /// pools' mark is read only when it was taken at the ring the device
    /// has now and the kernel reports `inflight`.
    pub(super) fn give_back(&self, ds: &DeviceState, ev: &mut Evidence) -> Option<Proposal> {
        let since = ds.calm_since?;
        if !self.policy.rings.enabled || !self.policy.rings.shrink_when_calm {
            return None;
        }
        let now = self.obs.pass.now;
        let calm = self.policy.timing.calm_before_shrink;
        let calm_for = now.saturating_sub(since);
        if calm_for < calm || ds.shrink_hold.holds(now, calm, ds.idle_since) {
            return None;
        }
        let knob = self.ring_knob();
        let original = self
            .obs
            .originals
            .iter()
            .find(|o| o.device == self.dev.id && o.knob == knob)
            .map(|o| o.value);
        let cur = self.current();
        // No queue has had traffic to judge for a whole calm: the load is
        // gone and holds nothing (the pools' mark is of bursts that ended).
        let idle = crate::state::load_gone_since(ds.idle_since, now, calm).is_some();
        let known = self.dev.pools().any(|p| p.inflight.is_some());
        let held = if idle {
            Some(0)
        } else {
            (known && ds.pool_held.ring == cur && ds.pool_held.windows > 0)
                .then_some(ds.pool_held.pages)
        };
        let step = give_back_step(
            self.policy,
            self.policy.rings.right_size,
            &self.info,
            &self.learned(),
            (cur, original),
            (held, true),
        )?;
        ev.insert("ring_current", f64::from(cur));
        ev.insert("ring_target", f64::from(step.to));
        ev.insert("give_back_floor", f64::from(step.floor));
        ev.insert("calm_seconds", calm_for.as_secs_f64());
        if let Some(h) = held {
            ev.insert("pool_held_pages", n64(h));
        }
        ev.insert(
            "give_back_trial",
            if step.basis == GiveBackBasis::Trial {
                1.0
            } else {
                0.0
            },
        );
        let below = original.is_none_or(|o| step.to < o);
        Some(Proposal {
            probe: None,
            action: Action::SetRing {
                field: self.info.field,
                from: cur,
                to: step.to,
            },
            reason: ReasonCode::CalmShrink,
            knob: Some(knob),
            message: self.text(format_args!(
                "the pool has been calm for {:.0} min (recycle-miss share below {:.2} %): give memory back, {knob} {cur} → {} ({}{}; judged under the load and put back if misses return)",
                calm_for.as_secs_f64() / 60.0,
                self.th.shrink_recycle_miss * 100.0,
                step.to,
                if idle {
                    "no queue has had traffic enough to judge for a whole calm: the load is gone, and holds nothing".to_owned()
                } else {
                    step.why()
                },
                if below {
                    format!(", right-sizing below the original, floor {}", step.floor)
                } else {
                    String::new()
                },
            )),
        })
    }

    /// Notes in `ds.shrink_hold` the outcome of the ring's last shrink in
    /// the history, once it is known (the hold outlives the two hours of
    /// history: each outcome is noted by the window that first sees it).
    /// A step that failed ends the calm it was made in.
    pub(super) fn note_shrink_outcome(&self, ds: &mut DeviceState) {
        let knob = self.ring_knob();
        if let Some(r) = self
            .obs
            .history
            .iter()
            .rev()
            .find(|r| r.device == self.dev.id && r.knob == knob && r.to < r.from)
            && ds.shrink_hold.note(r.at, &r.outcome)
        {
            ds.end_calm();
        }
    }

    /// Whether the ring's last change is a give-back step still judged
    /// (its evaluation has not ended). The step is judged on its whole
    /// evaluation window against the shrink threshold (`evaluate::judge`):
    /// until that verdict, a window at the new ring that is not calm but
    /// finds no growth does not end the calm counted from the step's
    /// rebuild (the rebuild's own first returns free a few pages: on the
    /// wire, 0.5-0.7 % in the first window of two runs of three).
    pub(super) fn judging_shrink(&self) -> bool {
        let knob = self.ring_knob();
        self.obs
            .history
            .iter()
            .rev()
            .find(|r| r.device == self.dev.id && r.knob == knob)
            .is_some_and(|r| r.to < r.from && r.outcome == crate::observation::Outcome::Pending)
    }
}

/// One give-back step of a calm ring: where it goes, the floor, and on
/// what basis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GiveBack {
    pub(super) to: u32,
    pub(super) floor: u32,
    pub(super) basis: GiveBackBasis,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GiveBackBasis {
    /// The ring that covers, with headroom, the most pages out at once
    /// since the pools were built (`held`).
    Mark { held: u64 },
    /// Halfway down (the geometric mean of the floor and the ring): the
    /// pools' mark says nothing below it.
    Trial,
    /// The floor itself: halfway is within the headroom of the ring.
    Floor,
}

impl GiveBack {
    /// Why this step, in words.
    pub(super) fn why(&self) -> String {
        match self.basis {
            GiveBackBasis::Mark { held } => format!(
                "since the pools were built they never had more than {held} pages out beyond the posted ring; this ring covers that with headroom"
            ),
            GiveBackBasis::Trial => format!(
                "a trial halfway toward {}: the pools' inflight is a high-water mark (pages parked in the pool count until a rebuild), so it cannot say what the load needs below this ring; the rebuild starts it afresh",
                self.floor
            ),
            GiveBackBasis::Floor => "a trial at the floor".to_owned(),
        }
    }
}

/// The smallest ring a calm shrink goes to: the recorded original
/// (`None`: pptune never changed the ring, which is the operator's), or
/// with right-sizing `rings.right_size_floor`, never above the original;
/// `rings.min`, the driver's minimum and what the kernel refused apply.
fn give_back_floor(
    policy: &Policy,
    right_size: bool,
    info: &DriverInfo,
    learned: &Learned,
    (cur, original): (u32, Option<u32>),
) -> Option<u32> {
    let base = if right_size {
        policy.rings.right_size_floor.min(original.unwrap_or(cur))
    } else {
        original?
    };
    Some(
        base.max(policy.rings.min)
            .max(info.driver_min)
            .max(learned.min.unwrap_or(0)),
    )
}

/// The give-back step of a calm ring `cur` (docs/decisions.md §7; `None`:
/// none worth a rebuild). `held`: the most pages out at once beyond the
/// posted ring since the pools were built ([`crate::state::PoolHeld`];
/// `None` when unknown). A pool's `inflight` is a high-water mark while
/// the pool lives, so it bounds what the load needed since the pools
/// were built, not what it needs now: the ring it calls for is a step that
/// loses nothing the pools saw. When that is no step (the mark fills the
/// ring: the ring was grown for bursts that may have stopped), the step is
/// a trial halfway down (or to the floor, when halfway is within the
/// headroom), which rebuilds the pools so the next calm reads a fresh
/// mark. Pages a reader keeps out all the time (a deep receive queue)
/// fill a mark too without being a burst the pool must park, so trials go
/// on below a fresh mark as well, until one brings misses back (put back,
/// then held) or the floor is reached: a descent in halves toward the
/// need. `trial`: whether a trial may be proposed (`false`: the mark step
/// alone, what [`reclaimable`] counts). A step within the headroom of the
/// ring is no step: the need measured again, not worth a rebuild.
/// `right_size`: whether the step may go below the original
/// (`rings.right_size`, or `plan`'s advice).
pub(super) fn give_back_step(
    policy: &Policy,
    right_size: bool,
    info: &DriverInfo,
    learned: &Learned,
    (cur, original): (u32, Option<u32>),
    (held, trial): (Option<u64>, bool),
) -> Option<GiveBack> {
    let floor = give_back_floor(policy, right_size, info, learned, (cur, original))?;
    let rounding = learned.rounding(info.rounding.with_policy(policy.rings.rounding));
    let floor = rounding.up(floor);
    if cur <= floor {
        return None;
    }
    let worth = |to: u32| to < cur && beyond_headroom(cur, to, policy);
    if let Some(h) = held {
        let need = if h == 0 {
            Some(floor)
        } else {
            ring_for_burst(info, policy, n64(h))
        };
        if let Some(need) = need {
            let to = rounding.up(need.max(floor));
            if worth(to) {
                return Some(GiveBack {
                    to,
                    floor,
                    basis: GiveBackBasis::Mark { held: h },
                });
            }
        }
    }
    if !trial {
        return None;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let mid = (f64::from(floor) * f64::from(cur)).sqrt().ceil() as u32;
    let mid = rounding.up(mid.max(floor));
    if worth(mid) && mid > floor {
        return Some(GiveBack {
            to: mid,
            floor,
            basis: GiveBackBasis::Trial,
        });
    }
    worth(floor).then_some(GiveBack {
        to: floor,
        floor,
        basis: GiveBackBasis::Floor,
    })
}

/// Whether a calm ring `cur` holds more than the policy's headroom over
/// the ring `need` the pages held at once still call for. Within it, the
/// need is the same one measured again (bursts vary that much between
/// windows: that is what the headroom is for), and a rebuild for it buys
/// nothing: the wire's stationary drains shrank 2597 → 2594 after their
/// calm.
fn beyond_headroom(cur: u32, need: u32, policy: &Policy) -> bool {
    f64::from(need) * policy.rings.headroom <= f64::from(cur)
}

/// Memory a ring could give back, from one sample of the device
/// ([`reclaimable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reclaim {
    /// The ring now, and the ring that covers what the pools saw.
    pub ring: u32,
    pub to: u32,
    /// Estimated bytes freed ([`crate::engine::device_bytes`] at both rings).
    pub bytes: u64,
    /// The most pages a queue has out beyond its posted ring: its pools'
    /// high-water mark since they were built.
    pub held: u64,
    /// The floor the step stops at.
    pub floor: u32,
}

/// What right-sizing could reclaim on `dev` now, without a trial: the
/// step to the ring that covers, with headroom, the most pages any queue
/// has had out at once since its pools were built (`inflight` is a
/// high-water mark while a pool lives), never below the right-size floor
/// ([`give_back_step`]'s mark step, with `rings.right_size` on whatever
/// the policy says: `pptune plan`'s advice). `None` when the kernel
/// reports no `inflight`, the ring is not known or managed, or no step
/// is worth a rebuild. A pure function of one sample: what a metric of
/// reclaimable bytes per device calls.
#[must_use]
pub fn reclaimable(policy: &Policy, dev: &crate::snapshot::Device) -> Option<Reclaim> {
    if !policy.rings.enabled {
        return None;
    }
    let info = drivers::driver_info(dev);
    info.ring_does_not_resize_pool().is_none().then_some(())?;
    let cur = drivers::ring_value(dev.rings.available()?, info.field).0?;
    let mut held: Option<u64> = None;
    for q in &dev.rx_queues {
        let mut inflight: Option<u64> = None;
        for p in &q.pools {
            if let Some(n) = p.inflight {
                inflight = Some(inflight.unwrap_or(0).saturating_add(n));
            }
        }
        if let Some(n) = inflight {
            let h = held_beyond(&info, cur, n).unwrap_or(0);
            held = Some(held.map_or(h, |x| x.max(h)));
        }
    }
    let held = held?;
    let step = give_back_step(
        policy,
        true,
        &info,
        &Learned::default(),
        (cur, None),
        (Some(held), false),
    )?;
    if !matches!(step.basis, GiveBackBasis::Mark { .. }) {
        return None;
    }
    let bytes = super::memory::device_bytes(dev, &info, cur)
        .saturating_sub(super::memory::device_bytes(dev, &info, step.to));
    Some(Reclaim {
        ring: cur,
        to: step.to,
        bytes,
        held,
        floor: step.floor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::policy;

    fn ice() -> DriverInfo {
        let d = crate::fixtures::nic("ice", 512, 8160, 2);
        drivers::driver_info(&d)
    }

    fn step(
        p: &Policy,
        cur: u32,
        original: Option<u32>,
        held: Option<u64>,
        trial: bool,
    ) -> Option<GiveBack> {
        give_back_step(
            p,
            p.rings.right_size,
            &ice(),
            &Learned::default(),
            (cur, original),
            (held, trial),
        )
    }

    /// One row per rule of the give-back step.
    #[test]
    fn give_back_steps() {
        let p = policy();
        let mark = |held| GiveBackBasis::Mark { held };
        // The pools' mark is far below the ring: the ring that covers it
        // (600 × 1.25, up to ice's 32), trial or not.
        for trial in [true, false] {
            let s = step(&p, 2560, Some(512), Some(600), trial).unwrap();
            assert_eq!((s.to, s.basis), (768, mark(600)), "{trial}");
        }
        // Nothing held beyond the posted ring: the floor (the original).
        let s = step(&p, 2560, Some(512), Some(0), false).unwrap();
        assert_eq!((s.to, s.floor, s.basis), (512, 512, mark(0)));
        // The mark fills the ring (a ring grown for bursts that may have
        // stopped): a trial halfway, √(512 × 2560) up to 32; none when
        // only the mark step is asked for (what `reclaimable` counts).
        let s = step(&p, 2560, Some(512), Some(2048), true).unwrap();
        assert_eq!((s.to, s.basis), (1152, GiveBackBasis::Trial));
        assert_eq!(step(&p, 2560, Some(512), Some(2048), false), None);
        // Unknown mark (no inflight): only the trial.
        let s = step(&p, 2560, Some(512), None, true).unwrap();
        assert_eq!(s.basis, GiveBackBasis::Trial);
        // Halfway within the headroom: the floor, if that is beyond it.
        let s = step(&p, 780, Some(512), Some(1000), true).unwrap();
        assert_eq!((s.to, s.basis), (512, GiveBackBasis::Floor));
        assert_eq!(step(&p, 600, Some(512), Some(1000), true), None);
        // A need within the headroom of the ring is no step.
        assert_eq!(step(&p, 2560, Some(512), Some(1800), false), None);
        // Never below the original without right-sizing; nothing at all
        // without an original (the ring is the operator's).
        assert_eq!(step(&p, 8160, None, Some(100), true), None);
        let s = step(&p, 2560, Some(1024), Some(0), true).unwrap();
        assert_eq!(s.to, 1024);
        // Right-sizing: below the original, down to right_size_floor (or
        // the original, when that is lower), rings.min on top.
        let mut rs = policy();
        rs.rings.right_size = true;
        let s = step(&rs, 8160, None, Some(100), true).unwrap();
        assert_eq!((s.to, s.floor), (512, 512));
        let s = step(&rs, 2560, Some(256), Some(0), true).unwrap();
        assert_eq!(s.to, 256);
        rs.rings.min = 1024;
        let s = step(&rs, 8160, None, Some(100), true).unwrap();
        assert_eq!(s.to, 1024);
    }

    /// What `plan` reports: the mark step on one sample, right-sizing on
    /// whatever the policy says; nothing without inflight or a step.
    #[test]
    fn reclaimable_reads_the_pools_mark_on_one_sample() {
        let p = policy();
        let mut d = crate::fixtures::nic("ice", 8160, 8160, 2);
        for q in &mut d.rx_queues {
            q.pools[0].inflight = Some(8160 + 600);
            q.pools[0].inflight_mem = Some((8160 + 600) * 4096);
        }
        let r = reclaimable(&p, &d).unwrap();
        assert_eq!((r.ring, r.to, r.held, r.floor), (8160, 768, 600, 512));
        let info = drivers::driver_info(&d);
        assert_eq!(
            r.bytes,
            crate::engine::device_bytes(&d, &info, 8160)
                - crate::engine::device_bytes(&d, &info, 768)
        );
        // Two queues of (8160 posted + 8160 pool + 128 cache) 4 KiB pages,
        // against 768: 115 MiB and more.
        assert_eq!(r.bytes >> 20, 115);
        // The mark fills the ring: nothing without a trial.
        for q in &mut d.rx_queues {
            q.pools[0].inflight = Some(2 * 8160);
        }
        assert_eq!(reclaimable(&p, &d), None);
        for q in &mut d.rx_queues {
            q.pools[0].inflight = None;
        }
        assert_eq!(reclaimable(&p, &d), None);
    }
}
