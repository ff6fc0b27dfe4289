//! The ring rules of one device's run: how far the ring may go (the
//! policy, the driver, what the kernel refused, the pool clamp, the memory
//! budget), how far a growth step goes (the burst estimate and its
//! calibration, `docs/decisions.md` §4), and giving memory back when calm.

use std::fmt::Write as _;

use super::memory::{device_bytes, posted_pages};
use super::{DeviceRun, Direction, Findings, PlanCtx, Proposal};
use crate::drivers::{self, DriverInfo, DriverRounding, Learned, POOL_RING_CLAMP, PoolMapping};
use crate::gates;
use crate::observation::{ActionRecord, Outcome};
use crate::plan::{Action, Evidence, Knob, ReasonCode};
use crate::policy::Policy;
use crate::signals::n64;
use crate::state::{DeviceState, RingProbe};
use crate::window::QueueFacts;

/// The ring half of a device's run: the run's facts, the ring's rules.
pub(super) struct Ring<'r, 'a>(pub(super) &'r DeviceRun<'a>);

impl<'a> std::ops::Deref for Ring<'_, 'a> {
    type Target = DeviceRun<'a>;
    fn deref(&self) -> &DeviceRun<'a> {
        self.0
    }
}

impl Ring<'_, '_> {
    /// Limits on the ring: (current, lowest, highest allowed, what binds the
    /// highest). `Err` = a hold saying why the ring cannot be managed.
    fn limits(&self, ctx: &PlanCtx) -> Result<RingLimits, Proposal> {
        let knob = Some(self.ring_knob());
        if !self.policy.rings.enabled {
            return Err(self.hold(
                ReasonCode::NotManaged,
                knob,
                "ring management is disabled by the policy",
            ));
        }
        let Some(rings) = self.dev.rings.available() else {
            let why = match &self.dev.rings {
                crate::snapshot::Availability::Unavailable(s) => s.clone(),
                _ => "not sampled".to_owned(),
            };
            return Err(self.hold(
                ReasonCode::RingsUnavailable,
                knob,
                format_args!("ring sizes unavailable: {why}"),
            ));
        };
        if let Some(why) = self.info.ring_does_not_resize_pool() {
            return Err(self.hold(
                ReasonCode::RingDoesNotSizePool,
                knob,
                format_args!("{}: {why}", self.info.note),
            ));
        }
        let (cur, max) = drivers::ring_value(rings, self.info.field);
        let Some(cur) = cur else {
            return Err(self.hold(
                ReasonCode::RingsUnavailable,
                knob,
                format_args!("the driver does not report ring {}", self.ring_knob()),
            ));
        };
        let learned = self.learned();
        if learned.not_settable {
            return Err(self.hold(
                ReasonCode::AtLimit,
                knob,
                format_args!(
                    "the kernel refused to change {}: not settable on this device",
                    self.ring_knob()
                ),
            ));
        }
        let rounding = learned.rounding(self.info.rounding.with_policy(self.policy.rings.rounding));
        let mut hi = self.policy.rings.max;
        let mut bind = Limit::Policy;
        if let Some(m) = max.filter(|&m| m < hi) {
            hi = m;
            bind = Limit::Driver;
        }
        if let Some(m) = learned.max.filter(|&m| m < hi) {
            hi = m;
            bind = Limit::Refused;
        }
        hi = rounding.down(hi);
        // Past the ring whose pool reaches the driver's cap or the page_pool
        // clamp, a bigger ring does not resize the pool.
        if let Some(c) = self
            .info
            .max_pool()
            .and_then(|p| self.info.ring_for_pool(p))
            .map(|c| rounding.up(c))
            .filter(|&c| c < hi)
        {
            hi = c;
            bind = Limit::PoolClamp;
        }
        let lo = self
            .policy
            .rings
            .min
            .max(self.info.driver_min)
            .max(learned.min.unwrap_or(0));
        let budget_hi = self.budget_max(ctx, cur, lo, hi);
        if budget_hi < hi {
            hi = rounding.down(budget_hi);
            bind = Limit::Budget;
        }
        Ok(RingLimits {
            cur,
            lo,
            hi,
            bind,
            rounding,
        })
    }

    /// What the kernel's refusals of this ring taught (docs/drivers.md).
    fn learned(&self) -> Learned {
        let knob = self.ring_knob();
        Learned::from_refusals(self.obs.history.iter().filter_map(|r| match &r.outcome {
            Outcome::Refused { errno, message } if r.device == self.dev.id && r.knob == knob => {
                Some((*errno, message.as_str(), r.from, r.to))
            }
            _ => None,
        }))
    }

    pub(super) fn at_limit(&self, ctx: &PlanCtx) -> Option<String> {
        match self.limits(ctx) {
            Ok(l) if l.cur >= l.hi => Some(format!(
                "ring {} is at its limit ({}, {})",
                self.ring_knob(),
                l.hi,
                l.bind.as_str()
            )),
            Ok(_) => None,
            Err(p) => Some(p.message),
        }
    }

    /// The largest ring (≤ `hi`) that keeps the device and host budgets.
    fn budget_max(&self, ctx: &PlanCtx, cur: u32, lo: u32, hi: u32) -> u32 {
        let b = &self.policy.budget;
        let now = device_bytes(self.dev, &self.info, cur);
        let mut cap = u64::MAX;
        if let Some(d) = b.per_device_bytes {
            cap = cap.min(d);
        }
        if let Some(h) = b.per_host_bytes {
            let others = ctx
                .host_bytes
                .saturating_add(ctx.host_added)
                .saturating_sub(now);
            cap = cap.min(h.saturating_sub(others));
        }
        if device_bytes(self.dev, &self.info, hi) <= cap {
            return hi;
        }
        // Bytes grow monotonically with the ring: binary search.
        let (mut a, mut z) = (lo.min(cur), hi);
        if device_bytes(self.dev, &self.info, a) > cap {
            return a.saturating_sub(1).min(cur);
        }
        while a < z {
            let mid = a + (z - a).div_ceil(2);
            if device_bytes(self.dev, &self.info, mid) <= cap {
                a = mid;
            } else {
                z = mid - 1;
            }
        }
        a
    }

    /// The fleet's starting ring (the policy's `priors`) on a device whose
    /// ring pptune has never changed (no original, no history): the first
    /// matching class's ring, within the limits, when above the current
    /// one. Only for drivers whose pool follows `ring.rx`, the knob the
    /// priors name.
    pub(super) fn prior(&self, ctx: &PlanCtx) -> Option<Proposal> {
        let knob = self.ring_knob();
        if knob != Knob::Ring(crate::knobs::RingField::Rx) {
            return None;
        }
        let prior = self.policy.priors.iter().find(|p| p.matches(self.dev))?;
        let ours = |d: &crate::snapshot::DeviceId, k: Knob| *d == self.dev.id && k == knob;
        if self.obs.originals.iter().any(|o| ours(&o.device, o.knob))
            || self.obs.history.iter().any(|r| ours(&r.device, r.knob))
        {
            return None;
        }
        let l = self.limits(ctx).ok()?;
        let target = l
            .rounding
            .down(prior.ring_rx.clamp(l.lo, l.hi.max(l.lo)))
            .min(l.hi);
        if target <= l.cur {
            return None;
        }
        Some(Proposal {
            action: Action::SetRing {
                field: self.info.field,
                from: l.cur,
                to: target,
            },
            reason: ReasonCode::FleetPrior,
            knob: Some(knob),
            message: self.text(format_args!(
                "{knob} {} → {target}: the starting ring of its class (driver {}{}) in the policy's priors, what the fleet converged to",
                l.cur,
                prior.driver,
                prior.mtu.map_or_else(String::new, |m| format!(", MTU {m}")),
            )),
            probe: None,
        })
    }

    pub(super) fn grow(
        &self,
        ds: &DeviceState,
        f: &Findings,
        ctx: &PlanCtx,
        ev: &mut Evidence,
    ) -> Proposal {
        let knob = self.ring_knob();
        let l = match self.limits(ctx) {
            Ok(l) => l,
            Err(p) => return p,
        };
        if let Some(hold) = self.failed_before(knob, Direction::Grow) {
            return hold;
        }
        let Some(q) = &f.worst_miss else {
            return self.hold(ReasonCode::Healthy, Some(knob), "no queue to judge");
        };
        let b = self.burst(ds, q, &l);
        let target = self.target(&l, &b);
        self.burst_evidence(q, &l, &b, ds, ev);
        let Burst {
            pool_now, excess, ..
        } = b;
        let miss = q.recycle_miss.unwrap_or(0.0) * 100.0;
        if target <= l.cur {
            let reason = if l.bind == Limit::Budget {
                ReasonCode::BudgetExhausted
            } else {
                ReasonCode::AtLimit
            };
            return self.hold(
                reason,
                Some(knob),
                format_args!(
                    "{knob} {} is too small for return bursts ({miss:.1} % of returned pages freed on {}), but it is at its limit ({})",
                    l.cur,
                    q.key,
                    l.bind.as_str()
                ),
            );
        }
        ev.insert("ring_target", f64::from(target));
        let msg = self.growth_message(q, &l, &b, target);
        Proposal {
            action: Action::SetRing {
                field: self.info.field,
                from: l.cur,
                to: target,
            },
            reason: ReasonCode::RecycleMissHigh,
            knob: Some(knob),
            message: msg,
            probe: Some(RingProbe {
                ring: target,
                pool_before: pool_now,
                excess_before: excess,
                bracketed: b.basis == BurstBasis::Bracketed,
            }),
        }
    }

    /// What a growth step says: why, by how much, and on what basis.
    fn growth_message(&self, q: &QueueFacts, l: &RingLimits, b: &Burst, target: u32) -> String {
        let knob = self.ring_knob();
        let Burst {
            calibrated,
            max_steps,
            step,
            pages: burst,
            basis,
            ..
        } = *b;
        let miss = q.recycle_miss.unwrap_or(0.0) * 100.0;
        let mut msg = format!(
            "{knob} {} is too small for return bursts: {miss:.1} % of returned pages on {} were freed because the pool ring was full (bursts ≈ {:.0} pages); set {knob} {} → {}",
            l.cur, q.key, burst, l.cur, target
        );
        match basis {
            BurstBasis::Limit => {
                let _ = write!(
                    msg,
                    " (step {step} of {max_steps}: straight to the limit, {})",
                    l.bind.as_str()
                );
            }
            BurstBasis::Held => {
                let _ = write!(
                    msg,
                    " (step {step}: burst from the pages out at once beyond the posted ring (inflight peak {}), which ring_full undercounts)",
                    q.inflight_peak
                );
            }
            BurstBasis::Bracketed => {
                let _ = write!(
                    msg,
                    " (step {step}: between ring_full's lower bound and the pages out at once beyond the posted ring (inflight peak {}), which may stay out rather than come back together; the next step calibrates)",
                    q.inflight_peak
                );
            }
            BurstBasis::Confirmed => {
                let _ = write!(
                    msg,
                    " (step {step}: the pages out at once beyond the posted ring (inflight peak {}) confirm ring_full's figure)",
                    q.inflight_peak
                );
            }
            BurstBasis::Calibrated => {
                if let Some((_, k)) = calibrated {
                    let _ = write!(
                        msg,
                        " (step {step}: from how far the last step moved the excess, the counters see about 1 in {k:.1} freed pages; burst calibrated)"
                    );
                }
            }
            BurstBasis::Lower => {}
        }
        if let Some(p) = self.info.pool_for_ring(target) {
            let _ = write!(
                msg,
                "; pool ≈ {} entries ({})",
                p.min(POOL_RING_CLAMP),
                self.info.note
            );
        }
        msg
    }

    /// How big the return bursts are, from what the window and the last
    /// growth step show (`docs/decisions.md` §4): the estimate a growth
    /// step sizes the ring for.
    fn burst(&self, ds: &DeviceState, q: &QueueFacts, l: &RingLimits) -> Burst {
        let knob = self.ring_knob();
        let pool_now = self
            .info
            .pool_for_ring(l.cur)
            .unwrap_or(l.cur)
            .clamp(1, POOL_RING_CLAMP);
        // In a burst larger than the pool ring R, R pages land in the ring and
        // the rest is freed: ring_full / recycle_ring ≈ (B − R) / R, so the
        // excess per ring fill is E = R × ring_full / recycle_ring and the
        // burst B ≈ R + E. The counters undercount E (ring_full counts once
        // per bulk on bulk-return paths; pages the driver takes back while
        // a burst returns never meet a full ring), so R + E is a lower bound.
        let s = q.stats;
        #[allow(clippy::cast_precision_loss)]
        let excess =
            f64::from(pool_now) * s.recycle_ring_full as f64 / s.recycle_ring.max(1) as f64;
        let steps = grow_steps(self.obs.history, &self.dev.id, knob, l.cur);
        let max_steps = self.policy.rings.max_steps_to_target.max(1);
        let step = steps.saturating_add(1);
        // After a growth step the engine knows how much that step moved the
        // excess, which calibrates the undercount (`calibrate`).
        let probe = ds.ring_probe.filter(|p| steps >= 1 && p.ring == l.cur);
        let calibrated = probe.and_then(|p| calibrate(&p, pool_now, excess));
        let held = held_pages(q, &self.info, l.cur).map(n64);
        let (burst, basis) = burst_estimate(
            f64::from(pool_now) + excess,
            calibrated.filter(|_| step <= max_steps).map(|(b, _)| b),
            held,
            step >= max_steps,
            probe.is_some_and(|p| p.bracketed),
        );
        Burst {
            pool_now,
            excess,
            steps,
            step,
            max_steps,
            calibrated,
            held,
            pages: burst,
            basis,
        }
    }

    /// The ring a growth step asks for: the burst with headroom, rounded
    /// as the driver rounds, within the limits; the current ring when the
    /// request would land on it or not grow the pool.
    fn target(&self, l: &RingLimits, b: &Burst) -> u32 {
        let Burst {
            pages: burst,
            basis,
            ..
        } = *b;
        let estimate = self.ring_for_burst(burst).unwrap_or(l.cur);
        let target = if basis == BurstBasis::Limit {
            l.hi
        } else {
            let needed = self.info.ring_for_pool(to_u32(burst)).unwrap_or(estimate);
            l.rounding
                .target(estimate, needed, l.cur)
                .clamp(l.lo, l.hi.max(l.lo))
        };
        let target = if l.hi < l.lo { l.cur } else { target.min(l.hi) };
        // The driver may round the request onto the current ring, or the
        // pool may not grow with it (a cap): then it is no change at all.
        let lands = l.rounding.applied(target).unwrap_or(l.cur);
        if self.info.pool_for_ring(lands) > self.info.pool_for_ring(l.cur) {
            target
        } else {
            l.cur
        }
    }

    /// The evidence a growth step was decided on.
    fn burst_evidence(
        &self,
        q: &QueueFacts,
        l: &RingLimits,
        b: &Burst,
        ds: &DeviceState,
        ev: &mut Evidence,
    ) {
        let Burst {
            pool_now,
            excess,
            steps,
            step,
            calibrated,
            held,
            pages: burst,
            ..
        } = *b;
        ev.insert("ring_current", f64::from(l.cur));
        ev.insert("ring_limit", f64::from(l.hi));
        ev.insert("pool_now", f64::from(pool_now));
        ev.insert("burst_estimate_pages", burst);
        ev.insert("excess_pages", excess);
        if let Some((_, k)) = calibrated {
            ev.insert("undercount_factor", k);
        }
        // 1 = the engine remembers what the last growth step saw (the probe
        // for the ring the device has now): the step can be calibrated, if
        // that step shrank the excess.
        let probe_known = ds.ring_probe.is_some_and(|p| steps >= 1 && p.ring == l.cur);
        ev.insert("ring_probe_known", if probe_known { 1.0 } else { 0.0 });
        ev.insert("pool_factor", self.info.factor());
        // 0 = the driver's ring-to-pool mapping is unknown (1x assumed).
        let known = !matches!(self.info.mapping, PoolMapping::Unknown) && self.info.mode_known;
        ev.insert("pool_mapping_known", if known { 1.0 } else { 0.0 });
        ev.insert("inflight_peak", n64(q.inflight_peak));
        if let Some(h) = held {
            ev.insert("held_pages_estimate", h);
        }
        ev.insert("grow_step", f64::from(step));
    }

    /// [`ring_for_burst`] on this device.
    fn ring_for_burst(&self, burst: f64) -> Option<u32> {
        ring_for_burst(&self.info, self.policy, burst)
    }

    /// A calm pool gives memory back (docs/decisions.md §7), one step at
    /// a time ([`give_back_step`]), each judged under the load and put
    /// back once when recycle misses come back (`evaluate::judge`), then
    /// not retried while its record lasts ([`Self::failed_before`]). The
    /// pools' mark is read only when it was taken at the ring the device
    /// has now and the kernel reports `inflight`.
    pub(super) fn give_back(&self, ds: &DeviceState, ev: &mut Evidence) -> Option<Proposal> {
        let since = ds.calm_since?;
        if !self.policy.rings.enabled || !self.policy.rings.shrink_when_calm {
            return None;
        }
        let calm_for = self.obs.now.saturating_sub(since);
        if calm_for < self.policy.timing.calm_before_shrink {
            return None;
        }
        let knob = self.ring_knob();
        if self.failed_before(knob, Direction::Shrink).is_some() {
            return None;
        }
        let original = self
            .obs
            .originals
            .iter()
            .find(|o| o.device == self.dev.id && o.knob == knob)
            .map(|o| o.value);
        let cur = self.current();
        let known = self.dev.pools().any(|p| p.inflight.is_some());
        let held = (known && ds.pool_held.ring == cur && ds.pool_held.windows > 0)
            .then_some(ds.pool_held.pages);
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
                self.policy.thresholds.shrink_recycle_miss * 100.0,
                step.to,
                step.why(),
                if below {
                    format!(", right-sizing below the original, floor {}", step.floor)
                } else {
                    String::new()
                },
            )),
        })
    }

    pub(super) fn current(&self) -> u32 {
        self.dev
            .rings
            .available()
            .and_then(|r| drivers::ring_value(r, self.info.field).0)
            .unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    Policy,
    Driver,
    PoolClamp,
    Budget,
    Refused,
}

impl Limit {
    fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "the policy's rings.max",
            Self::Driver => "the driver's maximum",
            Self::PoolClamp => {
                "the largest pool the driver creates (its cap or the page_pool clamp of 16384)"
            }
            Self::Budget => "the memory budget",
            Self::Refused => "what the kernel refused before",
        }
    }
}

/// A growth step's burst estimate and what it came from.
#[derive(Debug, Clone, Copy)]
struct Burst {
    /// Pool entries the ring gives now.
    pool_now: u32,
    /// Excess pages per ring fill, from ring_full.
    excess: f64,
    /// Growth steps that led to the current ring.
    steps: u32,
    /// This step's number (`steps + 1`) and the policy's last.
    step: u32,
    max_steps: u32,
    /// (burst, undercount factor) calibrated from the last step.
    calibrated: Option<(f64, f64)>,
    /// Pages out at once beyond the posted ring.
    held: Option<f64>,
    /// The burst the step sizes for, in pages, and where it comes from.
    pages: f64,
    basis: BurstBasis,
}

#[derive(Debug, Clone, Copy)]
struct RingLimits {
    cur: u32,
    lo: u32,
    hi: u32,
    bind: Limit,
    rounding: DriverRounding,
}

/// The ring whose pool takes a return burst of `burst` pages with the
/// policy's headroom (`None`: the driver's mapping cannot say): what a
/// growth step asks for, and what a calm pool's mark keeps.
fn ring_for_burst(info: &DriverInfo, policy: &Policy, burst: f64) -> Option<u32> {
    info.ring_for_pool(to_u32(burst * policy.rings.headroom))
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
    fn why(&self) -> String {
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

/// Consecutive growth changes of `knob` at the end of the history that led
/// to the value the device has now (`current`).
///
/// The chain must be anchored on the live value and unbroken: each counted
/// change must have left the knob where the next one started. A device id
/// without bus or permanent MAC falls back to its name, and a virtual
/// device deleted and re-created under the same name (`ppsim0`, `veth0`)
/// inherits the old incarnation's records; so does a device whose ring was
/// changed by someone else since. Counting those made the first change on
/// a fresh device the "last step" and sent it straight to the limit
/// (bursty-1k-100kpps: 256 → 16384 after a bursty-8k run on the same name).
fn grow_steps(
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
        if r.to <= r.from || landed(r) != expect {
            break;
        }
        n = n.saturating_add(1);
        expect = r.from;
    }
    n
}

/// Calibrates the burst estimate after a growth step from pool P0 (excess
/// E0 per ring fill) to P1 (excess E1 now). If the counters see 1/k of the
/// freed pages, E = (B − P) / k on both sides, so k = (P1 − P0) / (E0 − E1)
/// and B = P1 + k × E1: the burst where the excess line reaches zero. `None`
/// when the step did not shrink the excess (nothing to fit). k is at least
/// 1: the counters never see more pages freed than were.
/// Returns (burst, k).
fn calibrate(p: &RingProbe, pool_now: u32, excess_now: f64) -> Option<(f64, f64)> {
    let grown = f64::from(pool_now) - f64::from(p.pool_before);
    let shrunk = p.excess_before - excess_now;
    if grown <= 0.0 || shrunk <= 0.0 || !shrunk.is_finite() {
        return None;
    }
    let k = (grown / shrunk).max(1.0);
    Some((f64::from(pool_now) + k * excess_now, k))
}

/// Where a growth step's burst figure comes from ([`burst_estimate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BurstBasis {
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
fn burst_estimate(
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
pub(super) fn held_pages(q: &QueueFacts, info: &DriverInfo, ring: u32) -> Option<u64> {
    held_beyond(info, ring, q.inflight_peak)
}

/// A queue's pages out (`inflight`, summed over its pools) beyond what it
/// keeps posted at `ring`; `None` when nothing is.
fn held_beyond(info: &DriverInfo, ring: u32, inflight: u64) -> Option<u64> {
    let posted =
        u64::from(posted_pages(info, ring)).saturating_mul(u64::from(info.pools_per_queue.max(1)));
    inflight.checked_sub(posted).filter(|h| *h > 0)
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

/// The value a change left the knob at: its target, unless it failed or was
/// put back.
fn landed(r: &ActionRecord) -> u32 {
    match r.outcome {
        Outcome::Failed { .. } | Outcome::Reverted => r.from,
        _ => r.to,
    }
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn to_u32(v: f64) -> u32 {
    v.ceil().clamp(0.0, f64::from(u32::MAX)) as u32
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
