//! The channel rules of one device's run: fewer queues while the slow
//! path stays contended and no ring can help (at its limit, or held pages:
//! then as a trial), more queues for drops while recycling is healthy.

use super::memory::{device_bytes, queue_count};
use super::{DeviceRun, Direction, Findings, PlanCtx, Proposal, last_record};
use crate::observation::Outcome;
use crate::plan::{Action, ChannelField, Evidence, Knob, ReasonCode};

/// The channel half of a device's run.
pub(super) struct Channels<'r, 'a>(pub(super) &'r DeviceRun<'a>);

impl<'a> std::ops::Deref for Channels<'_, 'a> {
    type Target = DeviceRun<'a>;
    fn deref(&self) -> &DeviceRun<'a> {
        self.0
    }
}

impl Channels<'_, '_> {
    fn field(&self) -> Option<(ChannelField, u32, Option<u32>)> {
        let c = self.dev.channels.available()?;
        match (c.combined, c.rx) {
            (Some(n), _) if n > 0 => Some((ChannelField::Combined, n, c.combined_max)),
            (_, Some(n)) if n > 0 => Some((ChannelField::Rx, n, c.rx_max)),
            _ => None,
        }
    }

    /// Fewer queues, `channels.step` at a time, while the slow path stays
    /// contended and the ring cannot help: with the ring at its limit
    /// (judged on the slow-refill share), or, for held pages, as a trial
    /// judged on the delivered rate (`evaluate::judge`), kept while the
    /// rate rises by more than `channels.trial_gain` and put back, for
    /// good, when it does not. `None`: the rule does not apply.
    pub(super) fn shrink(
        &self,
        f: &Findings,
        ev: &mut Evidence,
        why: Shed<'_>,
    ) -> Option<Proposal> {
        let cp = &self.policy.channels;
        if !cp.enabled || !cp.shrink_when_contended {
            return None;
        }
        let (field, cur, _) = self.field()?;
        let knob = Knob::Channels(field);
        if let Some(hold) = self.failed_before(knob, Direction::Shrink) {
            return Some(hold);
        }
        if let Shed::Held(_) = why {
            // One trial at a time, and never while a ring change is judged.
            for k in [knob, self.ring_knob()] {
                if last_record(self.obs.history, &self.dev.id, k)
                    .is_some_and(|r| r.outcome == Outcome::Pending)
                {
                    return Some(self.hold(
                        ReasonCode::Cooldown,
                        Some(knob),
                        format_args!("the last {k} change is still being evaluated"),
                    ));
                }
            }
        }
        let to = cur.saturating_sub(cp.step.max(1)).max(cp.min.max(1));
        let slow = f
            .worst_slow
            .as_ref()
            .and_then(|q| q.slow_refill)
            .unwrap_or(0.0)
            * 100.0;
        if to >= cur {
            return match why {
                Shed::RingAtLimit(_) => Some(self.hold(
                    ReasonCode::AtLimit,
                    Some(knob),
                    format_args!(
                        "slow path contended ({slow:.1} % of refills) with the ring at its limit, and {knob} is already at the policy minimum {cur}"
                    ),
                )),
                Shed::Held(_) => None,
            };
        }
        ev.insert("channels_current", f64::from(cur));
        ev.insert("channels_target", f64::from(to));
        let (reason, message) = match why {
            Shed::RingAtLimit(hold) => (
                ReasonCode::ChannelsShrinkContended,
                self.text(format_args!(
                    "{slow:.1} % of refills reach the page allocator and the ring cannot help ({}): fewer queues contend less, {knob} {cur} → {to}",
                    hold.message
                )),
            ),
            Shed::Held(cause) => (
                ReasonCode::ChannelsShrinkTrial,
                self.text(format_args!(
                    "{slow:.1} % of refills reach the page allocator and no ring can fix it ({cause}): try fewer queues, {knob} {cur} → {to}, kept only if the delivered rate rises by more than {:.1} %",
                    cp.trial_gain * 100.0
                )),
            ),
        };
        Some(Proposal {
            probe: None,
            action: Action::SetChannels {
                field,
                from: cur,
                to,
            },
            reason,
            knob: Some(knob),
            message,
        })
    }

    pub(super) fn grow(&self, ev: &mut Evidence, ctx: &PlanCtx) -> Proposal {
        let cp = &self.policy.channels;
        let Some((field, cur, max)) = self.field() else {
            return self.hold(
                ReasonCode::NotManaged,
                None,
                "channel counts unavailable for this device",
            );
        };
        let knob = Knob::Channels(field);
        if let Some(hold) = self.failed_before(knob, Direction::Grow) {
            return hold;
        }
        if let Some(r) = last_record(self.obs.history, &self.dev.id, self.ring_knob())
            && r.outcome == Outcome::Pending
        {
            return self.hold(
                ReasonCode::Cooldown,
                Some(knob),
                "rings first: the last ring change is still being evaluated",
            );
        }
        let hi = max.map_or(cp.max, |m| m.min(cp.max));
        let mut to = cur.saturating_add(cp.step.max(1)).min(hi);
        // Budget: more queues means more pools of the current size.
        let per_queue = device_bytes(self.dev, &self.info, self.ring().current())
            / u64::from(queue_count(self.dev).max(1));
        let fits = |n: u32| {
            let bytes = per_queue.saturating_mul(u64::from(n));
            let dev_ok = self
                .policy
                .budget
                .per_device_bytes
                .is_none_or(|b| bytes <= b);
            let now = per_queue.saturating_mul(u64::from(queue_count(self.dev)));
            let host_ok = self.policy.budget.per_host_bytes.is_none_or(|h| {
                ctx.host_bytes
                    .saturating_add(ctx.host_added)
                    .saturating_sub(now)
                    .saturating_add(bytes)
                    <= h
            });
            dev_ok && host_ok
        };
        while to > cur && !fits(to) {
            to -= 1;
        }
        if to <= cur {
            return self.hold(
                if to < hi {
                    ReasonCode::BudgetExhausted
                } else {
                    ReasonCode::AtLimit
                },
                Some(knob),
                format_args!(
                    "drops persist with healthy recycling, but {knob} {cur} cannot grow (limit {hi} or memory budget)"
                ),
            );
        }
        ev.insert("channels_current", f64::from(cur));
        ev.insert("channels_target", f64::from(to));
        Proposal {
            probe: None,
            action: Action::SetChannels {
                field,
                from: cur,
                to,
            },
            reason: ReasonCode::ChannelsGrowHealthy,
            knob: Some(knob),
            message: self.text(format_args!(
                "packets are dropped while recycling is healthy and rings are settled: more queues spread the load, {knob} {cur} → {to}"
            )),
        }
    }
}

/// Why fewer queues are considered ([`Channels::shrink`]).
#[derive(Clone, Copy)]
pub(super) enum Shed<'a> {
    /// The ring is at its limit: the hold that says why.
    RingAtLimit(&'a Proposal),
    /// Held pages, which no ring fixes: the cause, in words.
    Held(&'a str),
}
