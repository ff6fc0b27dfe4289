//! The rules: one closed window of signals → one decision per device.
//! The decision table is written out in `docs/decisions.md`; the order of
//! the checks below follows it.
//!
//! This module is the frame: one device's run from its window to its
//! findings and the table's choice, and the gates at the end; the entry
//! points and the pass over the devices are [`engine`]. The subjects the
//! table chooses between are apart: [`ring`] (how far the ring may and
//! should go), [`channels`] (fewer or more queues) and [`memory`] (what a
//! ring costs, for the budget).

mod channels;
mod engine;
mod findings;
mod give_back;
mod memory;
mod ring;

use channels::Shed;
pub use engine::{Engine, decide, findings_needed};
use findings::Findings;
pub use give_back::{Reclaim, reclaimable};
pub use memory::{current_device_bytes, device_bytes, inflight_at_ring};

use std::fmt::{self, Write as _};

use crate::accounting::{QueueDelta, QueueKey};
use crate::drivers::DriverInfo;
use crate::gates::{self, Held, Spent};
use crate::observation::{ActionRecord, Observation, Outcome};
use crate::plan::{Action, Decision, Evidence, Knob, ReasonCode};
use crate::policy::{Mode, Policy};
use crate::snapshot::Device;
use crate::state::{DeviceState, RingProbe};
use crate::window::Rates;

/// What earlier devices in the same plan used up.
#[derive(Debug, Default)]
struct PlanCtx {
    /// Changes and bond masters (the gates' hourly budget and bond rule).
    spent: Spent,
    /// Estimated bytes of all selected devices at their current sizes…
    host_bytes: u64,
    /// …plus what earlier decisions in this plan add.
    host_added: u64,
}

struct DeviceRun<'a> {
    policy: &'a Policy,
    /// The policy's thresholds at what a miss costs on this device
    /// ([`crate::price`]): every share this run compares is one of these.
    th: crate::policy::Thresholds,
    /// What a miss costs on this device.
    cost: crate::price::MissCost,
    obs: &'a Observation<'a>,
    dev: &'a Device,
    info: DriverInfo,
    /// The device's queue deltas of this pass (`obs.pass.deltas`).
    queues: &'a [(QueueKey, QueueDelta)],
    /// Where the proposal's message is written: the message buffer of the
    /// decision this run overwrites, so a steady pass allocates none.
    scratch: std::cell::Cell<String>,
    /// The finding window that closed in this pass, as rates: the baseline
    /// of a change decided on it ([`Decision::baseline`]).
    window: std::cell::RefCell<Option<Rates>>,
}

/// A decision before the safety gates.
struct Proposal {
    action: Action,
    reason: ReasonCode,
    knob: Option<Knob>,
    message: String,
    /// For a ring growth: what to calibrate the next step against.
    probe: Option<RingProbe>,
}

impl<'a> DeviceRun<'a> {
    /// Decides for the device into `out`, the decision it overwrites.
    fn run_into(&self, mode: Mode, ds: &mut DeviceState, ctx: &mut PlanCtx, out: &mut Decision) {
        let mut evidence = std::mem::take(&mut out.evidence);
        evidence.clear();
        let proposal = self.propose(ds, ctx, &mut evidence);
        self.finish(mode, proposal, evidence, ds, ctx, out);
    }

    /// A hold proposal saying `message`.
    fn hold(&self, reason: ReasonCode, knob: Option<Knob>, message: impl fmt::Display) -> Proposal {
        Proposal {
            action: Action::Hold,
            reason,
            knob,
            message: self.text(message),
            probe: None,
        }
    }

    /// `message` as text, in the scratch buffer if it is still free.
    fn text(&self, message: impl fmt::Display) -> String {
        let mut s = self.scratch.take();
        s.clear();
        // Writing to a String cannot fail.
        let _ = write!(s, "{message}");
        s
    }

    fn ring_knob(&self) -> Knob {
        Knob::Ring(self.info.field)
    }

    /// The ring rules, on this run.
    fn ring(&self) -> ring::Ring<'_, 'a> {
        ring::Ring(self)
    }

    /// The channel rules, on this run.
    fn channels(&self) -> channels::Channels<'_, 'a> {
        channels::Channels(self)
    }

    fn propose(&self, ds: &mut DeviceState, ctx: &PlanCtx, ev: &mut Evidence) -> Proposal {
        let (policy, obs, dev) = (self.policy, self.obs, self.dev);
        if dev.pools().next().is_none() {
            ds.window.clear();
            return self.hold(
                ReasonCode::NoPools,
                None,
                format_args!(
                    "{} exposes no page pools to netlink: nothing to observe",
                    dev.name
                ),
            );
        }
        if !obs.pass.current.capabilities.page_pool_stats && dev.pools().all(|p| p.stats.is_none())
        {
            return self.hold(
                ReasonCode::NoStats,
                None,
                "the kernel reports no page_pool stats (CONFIG_PAGE_POOL_STATS off): no signal",
            );
        }
        if let Some(p) = self.ring().prior(ctx) {
            return p;
        }
        let Some(prev) = obs.pass.previous else {
            return self.hold(
                ReasonCode::Gathering,
                None,
                "first sample: counters need a second sample to become rates",
            );
        };
        let prev_dev = prev.devices.iter().find(|d| d.id == dev.id);
        ds.window
            .add_tick(self.queues, prev_dev, dev, obs.pass.elapsed);
        let t = &policy.timing;
        let th = &self.th;
        ds.severe_samples = if self.severe_sample() {
            ds.severe_samples.saturating_add(1)
        } else {
            0
        };
        // A severe miss closes the window early: it is judged on what it
        // has, its page floor in proportion.
        let severe = th.severe_samples > 0 && ds.severe_samples >= th.severe_samples;
        let full = ds.window.elapsed.saturating_add(t.interval / 2) >= t.window;
        if !full && !severe {
            return self.hold(
                ReasonCode::Gathering,
                None,
                format_args!(
                    "window {:.0} s of {:.0} s collected",
                    ds.window.elapsed.as_secs_f64(),
                    t.window.as_secs_f64()
                ),
            );
        }
        // The window closes: judged here, then emptied for the next one
        // (its storage kept).
        ds.windows_closed = ds.windows_closed.saturating_add(1);
        ev.insert("window_seconds", ds.window.elapsed.as_secs_f64());
        if ds.window.reset {
            ds.window.clear();
            // No data: neither extend nor break a streak.
            return self.hold(
                ReasonCode::CounterReset,
                None,
                "a counter went backwards inside the window: no data, no action",
            );
        }
        let min_pages = if full {
            th.min_pages_per_window
        } else {
            self.pages_over(ds.window.elapsed)
        };
        let mut f = self.findings(&ds.window, min_pages);
        if severe {
            ds.severe_samples = 0;
            f.severe = f.grow;
            ev.insert(gates::SEVERE_EVIDENCE, f64::from(th.severe_samples));
        }
        self.evidence(&f, &ds.window, ev);
        *self.window.borrow_mut() = Some(Rates::of_window(&ds.window));
        self.update_streaks(ds, &f, min_pages);
        ds.window.clear();
        self.choose(ds, &f, ctx, ev)
    }

    fn choose(
        &self,
        ds: &mut DeviceState,
        f: &Findings,
        ctx: &PlanCtx,
        ev: &mut Evidence,
    ) -> Proposal {
        let n = self.policy.timing.windows_for_finding.max(1);
        let ring = self.ring_knob();
        if f.pressure && (f.grow || ds.grow_windows > 0) {
            return self.hold(
                ReasonCode::MemoryPressure,
                Some(ring),
                "rx-alloc-fail rose: memory is short, a bigger ring would make it worse",
            );
        }
        if ds.grow_windows >= n || f.severe {
            let mut p = self.ring().grow(ds, f, ctx, ev);
            if f.severe && ds.grow_windows < n && p.action != Action::Hold {
                let _ = write!(
                    p.message,
                    "; a severe miss: {} samples in a row at or above {:.0} %, not waiting for {n} windows",
                    self.th.severe_samples,
                    self.th.severe_recycle_miss * 100.0
                );
            }
            if p.action == Action::Hold
                && ds.contended_windows >= n
                && let Some(c) = self.channels().shrink(f, ev, Shed::RingAtLimit(&p))
            {
                return c;
            }
            return p;
        }
        if ds.contended_windows >= n {
            let at_limit = self.ring().at_limit(ctx);
            if let Some(why) = at_limit {
                let hold = self.hold(ReasonCode::AtLimit, Some(ring), why);
                if let Some(c) = self.channels().shrink(f, ev, Shed::RingAtLimit(&hold)) {
                    return c;
                }
            }
            if let Some(u) = &f.untunable {
                // Rings first: no grow finding in this window or building.
                if f.held
                    && !f.grow
                    && ds.grow_windows == 0
                    && let Some(c) = self.channels().shrink(f, ev, Shed::Held(u))
                {
                    return c;
                }
                return self.hold(ReasonCode::UntunableCause, Some(ring), u);
            }
        }
        if self.policy.channels.enabled
            && self.policy.channels.grow_on_drops_when_healthy
            && ds.drop_windows >= n
            && ds.grow_windows == 0
            && ds.contended_windows == 0
        {
            return self.channels().grow(ev, ctx);
        }
        // Never in a window that freed at least the shrink threshold: the
        // calm it ends may be long enough, the moment is not.
        if f.calm
            && let Some(p) = self.ring().give_back(ds, ev)
        {
            return p;
        }
        self.settled(ds, f)
    }

    /// No rule acts: the hold that says where the device stands (an
    /// untunable cause, a finding still building, memory pressure, too
    /// little traffic, or healthy).
    fn settled(&self, ds: &DeviceState, f: &Findings) -> Proposal {
        let n = self.policy.timing.windows_for_finding.max(1);
        let ring = self.ring_knob();
        if ds.grow_windows == 0
            && !f.pressure
            && let Some(u) = &f.untunable
        {
            return self.hold(ReasonCode::UntunableCause, Some(ring), u);
        }
        let channel_streak = if self.policy.channels.enabled {
            ds.contended_windows.max(ds.drop_windows)
        } else {
            0
        };
        if ds.grow_windows > 0 || channel_streak > 0 {
            let have = ds.grow_windows.max(channel_streak);
            return self.hold(
                ReasonCode::Gathering,
                Some(ring),
                format_args!("finding in {have} of {n} consecutive windows"),
            );
        }
        if f.pressure {
            return self.hold(
                ReasonCode::MemoryPressure,
                Some(ring),
                "rx-alloc-fail rose: memory is short (reported, nothing to grow)",
            );
        }
        if let Some(u) = &f.untunable {
            return self.hold(ReasonCode::UntunableCause, Some(ring), u);
        }
        if f.judged == 0 {
            return self.hold(
                ReasonCode::LowTraffic,
                None,
                format_args!(
                    "fewer than {} pages per queue in the window: too little traffic to judge",
                    self.th.min_pages_per_window
                ),
            );
        }
        let miss = f
            .worst_miss
            .as_ref()
            .and_then(|q| q.recycle_miss)
            .unwrap_or(0.0);
        self.hold(
            ReasonCode::Healthy,
            None,
            format_args!(
                "signals within thresholds (worst recycle-miss share {:.2} %)",
                miss * 100.0
            ),
        )
    }

    /// A hold when the last change of `knob` in this direction was reverted
    /// (it made harm worse) or ineffective (it did not move its signal).
    /// Repeating it would only flap the device — every ring or channel change
    /// rebuilds its queues — so the engine does not try that direction again
    /// while the record is in its history (the daemon keeps two hours).
    fn failed_before(&self, knob: Knob, dir: Direction) -> Option<Proposal> {
        let r = self
            .obs
            .history
            .iter()
            .rev()
            .filter(|r| r.device == self.dev.id && r.knob == knob)
            .find(|r| match dir {
                Direction::Grow => r.to > r.from,
                Direction::Shrink => r.to < r.from,
            })?;
        let what = match (&r.outcome, dir) {
            (Outcome::Reverted, Direction::Shrink) if matches!(knob, Knob::Channels(_)) => {
                "was put back (harm rose, or the delivered rate did not rise by more than channels.trial_gain)"
            }
            (Outcome::Reverted, _) => "made harm worse and was reverted",
            (Outcome::Ineffective, Direction::Grow) if matches!(knob, Knob::Ring(_)) => {
                "did not move the recycle-miss share"
            }
            (Outcome::Ineffective, _) => "did not move the signal it was made for",
            _ => return None,
        };
        let verb = match dir {
            Direction::Grow => "growth",
            Direction::Shrink => "shrink",
        };
        let note = match knob {
            Knob::Ring(_) => format!(": {}", self.info.note),
            Knob::Channels(_) => String::new(),
        };
        Some(self.hold(
            ReasonCode::PreviousChangeIneffective,
            Some(knob),
            format_args!(
                "the last {verb} {knob} {}→{} {what}; not repeated{note}",
                r.from, r.to
            ),
        ))
    }

    fn finish(
        &self,
        mode: Mode,
        p: Proposal,
        mut evidence: Evidence,
        ds: &mut DeviceState,
        ctx: &mut PlanCtx,
        out: &mut Decision,
    ) {
        let dev = self.dev;
        let mut eff_mode = mode;
        if mode == Mode::Enforce && !dev.has_harm_signal() {
            eff_mode = Mode::Observe;
        }
        let admitted = gates::admit(
            self.policy,
            self.obs,
            dev,
            mode,
            &p.action,
            &evidence,
            &ctx.spent,
        );
        let (action, reason, message) = match admitted {
            Err(Held {
                reason,
                message: why,
            }) => {
                if let Action::SetRing { to, .. } | Action::SetChannels { to, .. } = p.action {
                    evidence.insert("held_target", f64::from(to));
                }
                (
                    Action::Hold,
                    reason,
                    self.text(format_args!(
                        "would act ({}): {}; held: {why}",
                        p.reason, p.message
                    )),
                )
            }
            Ok(()) => (p.action, p.reason, p.message),
        };
        if action != Action::Hold {
            ctx.spent.changes = ctx.spent.changes.saturating_add(1);
            if let Some(m) = dev.master {
                ctx.spent.masters.insert(m);
            }
            // A change is made (or, observing, recommended): its evidence is
            // spent; the next one needs fresh consecutive windows.
            match action {
                Action::SetRing { to, from, .. } => {
                    if to > from {
                        ds.ring_probe = p.probe;
                    }
                    ds.grow_windows = 0;
                    ds.severe_samples = 0;
                    ds.ring_changed(to < from, self.obs.pass.now);
                    ds.pool_held.rebuilt();
                    let before = device_bytes(dev, &self.info, from);
                    let after = device_bytes(dev, &self.info, to);
                    ctx.host_added = ctx.host_added.saturating_add(after.saturating_sub(before));
                }
                Action::SetChannels { .. } => {
                    ds.contended_windows = 0;
                    ds.drop_windows = 0;
                    ds.pool_held.rebuilt();
                }
                Action::Hold => {}
            }
        }
        let knob = action.knob().or(p.knob);
        out.ifindex = dev.ifindex;
        out.device.clone_from(&dev.name);
        out.device_id.clone_from(&dev.id);
        out.mode = eff_mode;
        out.action = action;
        out.reason = reason;
        out.message = message;
        out.evidence = evidence;
        out.baseline = if action == Action::Hold {
            None
        } else {
            self.window.borrow().clone()
        };
        out.id.set(&dev.id, knob, reason);
    }
}

/// Which way a change goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Grow,
    Shrink,
}

fn last_record<'h>(
    history: &'h [ActionRecord],
    dev: &crate::snapshot::DeviceId,
    knob: Knob,
) -> Option<&'h ActionRecord> {
    history
        .iter()
        .rev()
        .find(|r| &r.device == dev && r.knob == knob)
}
