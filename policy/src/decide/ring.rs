//! The ring rules of one device's run: how far the ring may go (the
//! policy, the driver, what the kernel refused, the pool clamp, the memory
//! budget), how far a growth step goes (the burst estimate and its
//! calibration, `docs/decisions.md` §4), and giving memory back when calm.

use std::fmt::Write as _;

mod burst;

pub(super) use burst::held_pages;
use burst::{Burst, BurstBasis, burst_estimate, calibrate, grow_steps};

use super::memory::{device_bytes, ring_for_burst, to_u32};
use super::{DeviceRun, Direction, Findings, PlanCtx, Proposal};
use crate::drivers::{self, DriverRounding, Learned, POOL_RING_CLAMP, PoolMapping};
use crate::observation::Outcome;
use crate::plan::{Action, Evidence, Knob, ReasonCode};
use crate::signals::{self, n64};
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
    pub(super) fn learned(&self) -> Learned {
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
        self.burst_evidence(q, &l, &b, ev);
        let pool_now = b.pool_now;
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
                excess_before: b.excess,
                freed_before: b.freed,
                bracketed: b.basis == BurstBasis::Bracketed,
                queues: super::memory::queue_count(self.dev),
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
                let _ = write!(
                    msg,
                    " (step {step}: burst fitted from how far the last step lowered what the pool frees"
                );
                if let Some((_, Some(k))) = calibrated {
                    let _ = write!(msg, "; the counters see about 1 in {k:.1} freed pages");
                }
                msg.push(')');
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
        let queues = super::memory::queue_count(self.dev);
        let probe = ds
            .ring_probe
            .filter(|p| steps >= 1 && p.applies(l.cur, queues));
        let freed = signals::freed_per_page_handed_out(&s, q.provider);
        let calibrated = probe.and_then(|p| calibrate(&p, pool_now, excess, freed));
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
            step,
            max_steps,
            probe_known: probe.is_some(),
            freed,
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
    fn burst_evidence(&self, q: &QueueFacts, l: &RingLimits, b: &Burst, ev: &mut Evidence) {
        let Burst {
            pool_now,
            excess,
            step,
            freed,
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
        if let Some(m) = freed {
            ev.insert("freed_per_page_handed_out", m);
        }
        if let Some((_, Some(k))) = calibrated {
            ev.insert("undercount_factor", k);
        }
        ev.insert("ring_probe_known", if b.probe_known { 1.0 } else { 0.0 });
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

#[derive(Debug, Clone, Copy)]
struct RingLimits {
    cur: u32,
    lo: u32,
    hi: u32,
    bind: Limit,
    rounding: DriverRounding,
}
