//! THE safety gates: may this change be made now? One function,
//! [`admit`], asked by the engine when it plans and by the daemon's
//! actuator right before it acts, so the plan and the act cannot disagree.
//!
//! The gates, in order (`docs/decisions.md` §7): operator override,
//! backoff after failures, a target the kernel refused within the hour, no
//! harm signal (enforce only), cooldown, hourly change budget, change
//! windows, one bond member at a time, disruption class.
//!
//! Also here: every timing term of the gates that is not in the policy
//! ([`HOUR`], [`HISTORY_KEEP`], [`shrink_hold`]); the backoff's terms and rule
//! ([`BACKOFF_BASE`], [`MAX_BACKOFF`], [`Backoff::after_failure`]) live
//! with the backoff the daemon hands the engine (`crate::observation`).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::knobs::Knob;
use crate::observation::{ActionRecord, Observation, Outcome};
use crate::plan::{Action, Evidence, ReasonCode};
use crate::policy::{ChangeWindow, Mode, Policy};
use crate::snapshot::{Device, OperState};

/// The hourly change budget's hour; also how long a kernel refusal of a
/// target stands.
pub const HOUR: Duration = Duration::from_secs(3600);
/// How much history the daemon keeps for the engine: the gates look back
/// an hour, the "did not work before" rule two.
pub const HISTORY_KEEP: Duration = Duration::from_secs(7200);
pub use crate::observation::{BACKOFF_BASE, Backoff, MAX_BACKOFF};

/// How long give-back trials are held after `failures` in a row brought
/// recycle misses back (`crate::state::ShrinkHold`), from the failed
/// trial: 8 × `calm` after the first, doubling with each further one, at
/// most 128 × `calm`. A load that needs its ring keeps it for many calms
/// (no shrink-and-regrow cycle: on the wire a stationary drain was tried
/// again 4.2 calms after its first trial with 4 × `calm`, inside the 3
/// calms after it settled again), yet a load that changed without stopping
/// is tried again.
#[must_use]
pub fn shrink_hold(calm: Duration, failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => calm.saturating_mul(2u32.saturating_pow(n.min(5).saturating_add(2))),
    }
}

/// What changes earlier in the same plan used up (the actuator, acting on
/// them one by one, sees them in the history instead).
#[derive(Debug, Clone, Default)]
pub struct Spent {
    /// Changes proposed earlier in this plan.
    pub changes: u32,
    /// Bond/team masters with a member changed earlier in this plan.
    pub masters: BTreeSet<u32>,
}

/// A gate that held a change: the reason code and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub reason: ReasonCode,
    pub message: String,
}

impl Held {
    fn new(reason: ReasonCode, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// Whether a change touched the device: everything but a kernel refusal.
/// These count for cooldown; the hourly budget counts every attempt,
/// refusals too (a driver that refuses every set is asked no more often
/// than the budget allows).
#[must_use]
pub fn touched(r: &ActionRecord) -> bool {
    !matches!(r.outcome, Outcome::Refused { .. })
}

/// The wait after a change before the next one on that device: the
/// cooldown, and never inside the change's evaluation window.
#[must_use]
pub fn cooldown(policy: &Policy) -> Duration {
    policy.timing.cooldown.max(policy.timing.evaluation)
}

/// The wait after a change the harm rule put back: its revert is judged
/// too ([`crate::evaluate::Judged::Revert`]) and may be undone, so nothing
/// else changes on the device until then — the change's window and the
/// revert's, each from the first sample after its rebuild.
#[must_use]
pub fn revert_judged(policy: &Policy) -> Duration {
    policy
        .timing
        .evaluation
        .saturating_add(policy.timing.interval)
        .saturating_mul(2)
}

/// The evidence name a decision carries when its window closed early on
/// a severe miss (`thresholds.severe_samples` in a row): written by the
/// engine, read by [`severe`].
pub const SEVERE_EVIDENCE: &str = "severe_samples";

/// Whether a decision was made on a window that closed on a severe miss.
#[must_use]
pub fn severe(evidence: &Evidence) -> bool {
    evidence.get(SEVERE_EVIDENCE).is_some()
}

/// The wait before a further ring growth decided on a severe miss
/// (`severe`) after `last`, a growth of the same ring judged effective or
/// not judged (its window closed `inconclusive`: the returns outgrew it,
/// or it saw too few): its evaluation, not the whole cooldown. The
/// cooldown is there so that a change is judged before the next; this one
/// was, it helped or the load moved past it, and what it left still frees
/// a fifth of the returns (growing bursts: TCP opening its windows).
/// `None`: the cooldown.
#[must_use]
pub fn follow_up_wait(
    policy: &Policy,
    last: &ActionRecord,
    knob: Knob,
    target: u32,
    severe: bool,
) -> Option<Duration> {
    (severe
        && matches!(knob, Knob::Ring(_))
        && last.knob == knob
        && last.from < last.to
        && last.to < target
        && matches!(last.outcome, Outcome::Effective | Outcome::Inconclusive))
    .then_some(policy.timing.evaluation)
}

/// The one admissibility check. `Ok` = the change may be made now;
/// `Err` = held, and why. `Action::Hold` is always admitted.
///
/// # Errors
/// [`Held`] with the first gate that holds the change.
pub fn admit(
    policy: &Policy,
    obs: &Observation<'_>,
    dev: &Device,
    mode: Mode,
    action: &Action,
    evidence: &Evidence,
    spent: &Spent,
) -> Result<(), Held> {
    let Some(knob) = action.knob() else {
        return Ok(());
    };
    let target = match action {
        Action::SetRing { to, .. } | Action::SetChannels { to, .. } => *to,
        Action::Hold => return Ok(()),
    };
    let g = Gate {
        policy,
        obs,
        dev,
        knob,
        target,
        severe: severe(evidence),
        now: obs.pass.now,
        spent,
    };
    g.overridden()?;
    g.backed_off()?;
    g.refused_before()?;
    if mode == Mode::Enforce && !dev.has_harm_signal() {
        return Err(Held::new(
            ReasonCode::NoHarmSignal,
            "no qstats drop counters and no link stats: a change could not be evaluated, so observe only",
        ));
    }
    g.cooled_down()?;
    g.within_budget()?;
    g.in_window()?;
    g.bond_free()?;
    g.disruption_allowed()
}

/// One change before the gates: what they read.
#[derive(Clone, Copy)]
struct Gate<'a> {
    policy: &'a Policy,
    obs: &'a Observation<'a>,
    dev: &'a Device,
    knob: Knob,
    target: u32,
    /// The decision's window closed on a severe miss ([`severe`]).
    severe: bool,
    now: Duration,
    spent: &'a Spent,
}

impl Gate<'_> {
    /// An operator's change by hand, or another configuration, owns the knob.
    fn overridden(&self) -> Result<(), Held> {
        let Gate { obs, dev, knob, .. } = *self;
        if obs
            .overrides
            .iter()
            .any(|(d, k)| *d == dev.id && *k == knob)
        {
            return Err(Held::new(
                ReasonCode::OperatorOverride,
                format!(
                    "{knob} is owned by an operator's change by hand (until the policy is reloaded) or by another configuration (`pptune status` names it): pptune leaves it alone"
                ),
            ));
        }
        Ok(())
    }

    /// The device failed lately and is backed off.
    fn backed_off(&self) -> Result<(), Held> {
        let Gate { obs, dev, now, .. } = *self;
        if let Some(b) = obs.backoff.get(&dev.id.key()).filter(|b| b.active(now)) {
            return Err(Held::new(
                ReasonCode::BackedOff,
                format!(
                    "{} failure(s), retry in {:.0} s: {}",
                    b.failures,
                    b.until.saturating_sub(now).as_secs_f64(),
                    b.last_error
                ),
            ));
        }
        Ok(())
    }

    /// The kernel refused this very target within the hour.
    fn refused_before(&self) -> Result<(), Held> {
        let Gate {
            obs,
            dev,
            knob,
            target,
            now,
            ..
        } = *self;
        if let Some(r) = obs.history.iter().rev().find(|r| {
            r.device == dev.id
                && r.knob == knob
                && r.to == target
                && matches!(r.outcome, Outcome::Refused { .. })
                && within(r.at, HOUR, now)
        }) {
            let msg = match &r.outcome {
                Outcome::Refused { message, .. } => message.as_str(),
                _ => "",
            };
            return Err(Held::new(
                ReasonCode::KernelRefused,
                format!("the kernel refused {knob}={target} within the hour: {msg}"),
            ));
        }
        Ok(())
    }

    /// The device's last change is still judged, or within the cooldown
    /// ([`follow_up_wait`] for a severe miss that outlived a growth).
    fn cooled_down(&self) -> Result<(), Held> {
        let Gate { obs, dev, now, .. } = *self;
        if let Some((r, wait)) = obs
            .history
            .iter()
            .rev()
            .find(|r| r.device == dev.id && touched(r))
            .map(|r| (r, self.wait_after(r)))
            && (r.outcome == Outcome::Pending || within(r.at, wait, now))
        {
            return Err(Held::new(
                ReasonCode::Cooldown,
                format!(
                    "last change {} {}→{} was {:.0} s ago; cooldown {:.0} s",
                    r.knob,
                    r.from,
                    r.to,
                    now.saturating_sub(r.at).as_secs_f64(),
                    wait.as_secs_f64()
                ),
            ));
        }
        Ok(())
    }

    /// The wait after `last` before this change: [`follow_up_wait`] or
    /// the cooldown.
    fn wait_after(&self, last: &ActionRecord) -> Duration {
        let wait = follow_up_wait(self.policy, last, self.knob, self.target, self.severe)
            .unwrap_or_else(|| cooldown(self.policy));
        if last.outcome == Outcome::Reverted {
            wait.max(revert_judged(self.policy))
        } else {
            wait
        }
    }

    /// The hourly change budget, with what this plan spent already.
    fn within_budget(&self) -> Result<(), Held> {
        let Gate {
            policy,
            obs,
            now,
            spent,
            ..
        } = *self;
        let recent = obs
            .history
            .iter()
            .filter(|r| within(r.at, HOUR, now))
            .count();
        let used = u32::try_from(recent)
            .unwrap_or(u32::MAX)
            .saturating_add(spent.changes);
        if used >= policy.limits.max_changes_per_hour {
            return Err(Held::new(
                ReasonCode::ChangeBudgetExhausted,
                format!(
                    "{used} changes in the last hour; the policy allows {}",
                    policy.limits.max_changes_per_hour
                ),
            ));
        }
        Ok(())
    }

    /// Inside one of the policy's change windows, if it has any.
    fn in_window(&self) -> Result<(), Held> {
        let Gate { policy, obs, .. } = *self;
        if !policy.limits.windows.is_empty() {
            let inside = obs.local_time.is_some_and(|t| {
                policy
                    .limits
                    .windows
                    .iter()
                    .any(|w| in_window(w, t.weekday, t.minute_of_day))
            });
            if !inside {
                return Err(Held::new(
                    ReasonCode::OutsideChangeWindow,
                    "outside the policy's change windows",
                ));
            }
        }
        Ok(())
    }

    /// No other member of the same bond/team is being changed.
    fn bond_free(&self) -> Result<(), Held> {
        let Gate {
            policy,
            obs,
            dev,
            now,
            spent,
            ..
        } = *self;
        let wait = cooldown(policy);
        if policy.limits.one_bond_member_at_a_time
            && let Some(m) = dev.master
        {
            let sibling_busy = spent.masters.contains(&m)
                || obs.pass.current.devices.iter().any(|o| {
                    o.master == Some(m)
                        && o.id != dev.id
                        && obs.history.iter().any(|r| {
                            r.device == o.id
                                && touched(r)
                                && (r.outcome == Outcome::Pending || within(r.at, wait, now))
                        })
                });
            if sibling_busy {
                return Err(Held::new(
                    ReasonCode::BondSiblingBusy,
                    "another member of the same bond/team is being changed",
                ));
            }
        }
        Ok(())
    }

    /// The driver's disruption class is allowed while the link is up.
    fn disruption_allowed(&self) -> Result<(), Held> {
        let Gate { policy, dev, .. } = *self;
        let driver = dev.driver.as_deref().unwrap_or("");
        let class = policy
            .disruption
            .drivers
            .iter()
            .find(|(d, _)| d == driver)
            .map_or(
                // Unlisted: the class the driver's source shows, else the
                // policy's default (docs/drivers.md).
                crate::drivers::driver_info(dev)
                    .disruption
                    .unwrap_or(policy.disruption.default_class),
                |(_, c)| *c,
            );
        if dev.oper_state == OperState::Up && !policy.disruption.allowed_while_up.contains(&class) {
            return Err(Held::new(
                ReasonCode::DisruptionNotAllowed,
                format!(
                    "{driver}'s changes are class {class:?}, which the policy does not allow while the link is up"
                ),
            ));
        }
        Ok(())
    }
}

/// `at + span > now`: the event is still inside its span. (A daemon's
/// clock starts at 0, so history from before its start sits at 0 and
/// stays inside for at least as long as it really is.)
fn within(at: Duration, span: Duration, now: Duration) -> bool {
    at.saturating_add(span) > now
}

/// Whether local time (weekday, minute of day) is inside a change window.
#[must_use]
pub fn in_window(w: &ChangeWindow, weekday: u8, minute: u16) -> bool {
    let day_ok = |d: u8| w.days.is_empty() || w.days.contains(&d);
    if w.start_minute <= w.end_minute {
        day_ok(weekday) && minute >= w.start_minute && minute < w.end_minute
    } else {
        // Wraps past midnight: the day named is the day the window opens.
        (day_ok(weekday) && minute >= w.start_minute)
            || (day_ok((weekday + 6) % 7) && minute < w.end_minute)
    }
}
