//! The rules: one closed window of signals → one decision per device.
//! The decision table is written out in `docs/decisions.md`; the order of
//! the checks below follows it.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use crate::accounting::PoolLedger;
use crate::drivers::{
    self, DEFAULT_PAGE_BYTES, DriverInfo, DriverRounding, Learned, POOL_CACHE_PAGES,
    POOL_RING_CLAMP, PoolMapping,
};
use crate::engine::{ActionRecord, Observation, Outcome};
use crate::gates::{self, Held, Spent};
use crate::plan::{Action, ChannelField, Decision, Evidence, Knob, Plan, ReasonCode};
use crate::policy::{Mode, Policy};
use crate::snapshot::{Device, Pool};
use crate::state::{DeviceState, EngineState, RingProbe};
use crate::window::QueueFacts;

/// The engine: a pure function of (policy, state, observation).
///
/// Returns the plan (one decision per selected device, ordered by ifindex)
/// and the state to pass to the next call. Same input, same output.
#[must_use]
pub fn decide(policy: &Policy, state: &EngineState, obs: &Observation<'_>) -> (Plan, EngineState) {
    let mut next = EngineState {
        devices: state.devices.clone(),
        ..EngineState::default()
    };
    let mut plan = Plan::default();
    run_into(policy, obs, &mut next.devices, &mut plan, &mut next.scratch);
    (plan, next)
}

/// The buffers of one pass, kept in [`EngineState`] so that the next pass
/// refills them instead of allocating: the previous sample's pool ledger,
/// the selected devices and their identity keys. Nothing in them outlives
/// a pass but capacity, so they are neither persisted nor compared.
#[derive(Default)]
pub(crate) struct Scratch {
    ledger: PoolLedger,
    /// The devices of the observation, by position, in ifindex order.
    order: Vec<usize>,
    /// Every selected device's identity key, one after another.
    keys: String,
    /// (position, mode, its key in `keys`), in ifindex order.
    selected: Vec<(usize, Mode, std::ops::Range<usize>)>,
    /// The keys of `selected`, sorted.
    sorted: Vec<std::ops::Range<usize>>,
}

impl Clone for Scratch {
    /// Buffers, not state: a copy starts empty.
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for Scratch {
    /// Buffers, not state: any two are equal.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for Scratch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scratch")
    }
}

/// [`decide`] with the state updated in place: the same plan and the same
/// next state, without copying each device's memory first (a replay calls
/// the engine thousands of times in a row).
#[must_use]
pub fn decide_in_place(policy: &Policy, state: &mut EngineState, obs: &Observation<'_>) -> Plan {
    let mut plan = Plan::default();
    run_into(
        policy,
        obs,
        &mut state.devices,
        &mut plan,
        &mut state.scratch,
    );
    plan
}

/// [`decide_in_place`] into the last plan: `plan` is overwritten with the
/// same plan [`decide`] would return, reusing its decisions' buffers (names,
/// identities, messages, evidence), so a steady pass allocates nothing per
/// device for its decisions (issue 16).
pub fn decide_into(
    policy: &Policy,
    state: &mut EngineState,
    obs: &Observation<'_>,
    plan: &mut Plan,
) {
    run_into(policy, obs, &mut state.devices, plan, &mut state.scratch);
}

/// Fills `plan` and leaves in `states` the next memory of exactly the
/// selected devices. A device's memory is updated where it lies; a key two
/// selected devices share (no bus address, no permanent MAC and one name
/// reused) makes each of them start from the memory before the plan, the
/// later one's result kept, as [`decide`] always did.
fn run_into(
    policy: &Policy,
    obs: &Observation<'_>,
    states: &mut BTreeMap<String, DeviceState>,
    plan: &mut Plan,
    scratch: &mut Scratch,
) {
    let Scratch {
        ledger,
        order,
        keys,
        selected,
        sorted,
    } = scratch;
    let prev_pools = obs.previous.map(|s| {
        ledger.refill(s);
        &*ledger
    });
    let devs = &obs.current.devices;
    order.clear();
    order.extend(0..devs.len());
    // By ifindex, ties in snapshot order (what a stable sort gives,
    // without its buffer).
    order.sort_unstable_by_key(|&i| (devs[i].ifindex, i));
    // Every selected device's key, written into one buffer.
    keys.clear();
    selected.clear();
    for &i in order.iter() {
        if let Some(m) = policy.mode_for(&devs[i]) {
            let start = keys.len();
            // Writing to a String cannot fail.
            let _ = devs[i].id.write_key(keys);
            selected.push((i, m, start..keys.len()));
        }
    }
    let keys = &*keys;
    let key = |r: &std::ops::Range<usize>| &keys[r.clone()];
    sorted.clear();
    sorted.extend(selected.iter().map(|(_, _, r)| r.clone()));
    sorted.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    states.retain(|k, _| sorted.binary_search_by(|r| key(r).cmp(k)).is_ok());
    let shared: BTreeMap<&str, DeviceState> = sorted
        .windows(2)
        .filter(|w| key(&w[0]) == key(&w[1]))
        .map(|w| {
            let k = key(&w[0]);
            (k, states.get(k).cloned().unwrap_or_default())
        })
        .collect();
    let mut ctx = PlanCtx {
        // Saturating: a pool reporting inflight-mem near u64::MAX saturates
        // its device's figure, and two such devices must not wrap the sum.
        host_bytes: selected
            .iter()
            .map(|(i, _, _)| current_bytes(&devs[*i]))
            .fold(0, u64::saturating_add),
        ..PlanCtx::default()
    };
    plan.decisions.truncate(selected.len());
    for (i, (at, mode, r)) in selected.iter().enumerate() {
        let dev = &devs[*at];
        let k = key(r);
        if i == plan.decisions.len() {
            plan.decisions.push(Decision::blank());
        }
        let out = &mut plan.decisions[i];
        let run = DeviceRun {
            policy,
            obs,
            dev,
            info: drivers::driver_info(dev),
            prev_pools,
            scratch: std::cell::Cell::new(std::mem::take(&mut out.message)),
        };
        if let Some(before) = shared.get(k) {
            let mut ds = before.clone();
            run.run_into(*mode, &mut ds, &mut ctx, out);
            states.insert(k.to_owned(), ds);
        } else if let Some(ds) = states.get_mut(k) {
            run.run_into(*mode, ds, &mut ctx, out);
        } else {
            let mut ds = DeviceState::default();
            run.run_into(*mode, &mut ds, &mut ctx, out);
            states.insert(k.to_owned(), ds);
        }
    }
}

/// How many samples and how much time `pptune plan` needs for a finding:
/// one sample to start from, then `windows_for_finding` windows of
/// `window / interval` samples each.
#[must_use]
pub fn findings_needed(policy: &Policy) -> (u32, Duration) {
    let t = &policy.timing;
    let per_window = samples_per_window(policy);
    let samples = per_window
        .saturating_mul(t.windows_for_finding.max(1))
        .saturating_add(1);
    let time = t.interval.saturating_mul(samples.saturating_sub(1));
    (samples, time)
}

fn samples_per_window(policy: &Policy) -> u32 {
    let t = &policy.timing;
    let iv = t.interval.as_millis().max(1);
    u32::try_from(t.window.as_millis().div_ceil(iv))
        .unwrap_or(u32::MAX)
        .max(1)
}

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
    obs: &'a Observation<'a>,
    dev: &'a Device,
    info: DriverInfo,
    prev_pools: Option<&'a PoolLedger>,
    /// Where the proposal's message is written: the message buffer of the
    /// decision this run overwrites, so a steady pass allocates none.
    scratch: std::cell::Cell<String>,
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

/// The per-window findings of one device.
#[derive(Debug, Default)]
struct Findings {
    /// Queues with enough traffic to judge.
    judged: usize,
    grow: bool,
    contended: bool,
    calm: bool,
    healthy_drops: bool,
    pressure: bool,
    untunable: Option<String>,
    /// The untunable cause is held pages (released_refcnt, or slow refills
    /// with ring_full flat): no ring fixes it, fewer queues contending for
    /// the allocator may ([`Shed::Held`]).
    held: bool,
    /// Worst queue by recycle-miss share.
    worst_miss: Option<QueueFacts>,
    /// Worst queue by slow-refill share.
    worst_slow: Option<QueueFacts>,
}

impl DeviceRun<'_> {
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
        if !obs.current.capabilities.page_pool_stats && dev.pools().all(|p| p.stats.is_none()) {
            return self.hold(
                ReasonCode::NoStats,
                None,
                "the kernel reports no page_pool stats (CONFIG_PAGE_POOL_STATS off): no signal",
            );
        }
        let (Some(prev), Some(prev_pools)) = (obs.previous, self.prev_pools) else {
            return self.hold(
                ReasonCode::Gathering,
                None,
                "first sample: counters need a second sample to become rates",
            );
        };
        let prev_dev = prev.devices.iter().find(|d| d.id == dev.id);
        ds.window.add_tick(prev_pools, prev_dev, dev, obs.elapsed);
        let t = &policy.timing;
        if ds.window.elapsed.saturating_add(t.interval / 2) < t.window {
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
        let f = self.findings(&ds.window);
        self.evidence(&f, &ds.window, ev);
        ds.window.clear();
        self.update_streaks(ds, &f);
        self.choose(ds, &f, ctx, ev)
    }

    fn findings(&self, acc: &crate::window::WindowAcc) -> Findings {
        let th = &self.policy.thresholds;
        let mut f = Findings {
            pressure: acc.alloc_fail > 0,
            calm: true,
            ..Findings::default()
        };
        for (key, q) in &acc.queues {
            let facts = QueueFacts::from_acc(*key, q);
            let alloc_pages = facts.stats.alloc_fast;
            if facts.returned.max(alloc_pages) < th.min_pages_per_window {
                continue;
            }
            let miss = facts.recycle_miss.unwrap_or(0.0);
            let slow = facts.slow_refill.unwrap_or(0.0);
            // Tunable: the pool ring overflowed, or slow refills follow
            // from ring_full (the ring had to free pages it later lacked).
            let grow_q = miss >= th.grow_recycle_miss
                || (slow >= th.grow_slow_refill
                    && facts.stats.recycle_ring_full > 0
                    && miss >= th.shrink_recycle_miss);
            f.grow |= grow_q;
            f.contended |= slow >= th.grow_slow_refill;
            f.calm &= miss < th.shrink_recycle_miss;
            if !grow_q && f.untunable.is_none() {
                let rel = facts.released_share.unwrap_or(0.0);
                let waive = facts.waive_share.unwrap_or(0.0);
                if rel >= th.grow_recycle_miss {
                    f.held = true;
                    f.untunable = Some(format!(
                        "{}: {:.1} % of returned pages were still referenced (released_refcnt); a bigger ring cannot fix that",
                        facts.key,
                        rel * 100.0
                    ));
                } else if waive >= th.grow_slow_refill {
                    f.untunable = Some(format!(
                        "{}: {:.1} % of refills hit NUMA-remote pages (waive): IRQ/NAPI on the wrong node, not a ring size problem",
                        facts.key,
                        waive * 100.0
                    ));
                } else if slow >= th.grow_slow_refill {
                    f.held = true;
                    f.untunable = Some(format!(
                        "{}: {:.1} % of refills went to the slow path while ring_full stayed flat: pages are held (sockets, driver ring), not overflowing the pool ring",
                        facts.key,
                        slow * 100.0
                    ));
                }
            }
            f.judged += 1;
            keep_worst(&mut f.worst_miss, &facts, |q| q.recycle_miss);
            keep_worst(&mut f.worst_slow, &facts, |q| q.slow_refill);
        }
        let drop_share = crate::signals::ratio(acc.drops, acc.packets).unwrap_or(0.0);
        f.healthy_drops = !f.grow
            && !f.contended
            && f.judged > 0
            && acc.drops > 0
            && drop_share >= self.policy.channels.grow_drop_share;
        f
    }

    fn evidence(&self, f: &Findings, acc: &crate::window::WindowAcc, ev: &mut Evidence) {
        #[allow(clippy::cast_precision_loss)]
        let n = |v: u64| v as f64;
        ev.insert("queues_judged", n(f.judged as u64));
        ev.insert("rx_alloc_fail", n(acc.alloc_fail));
        ev.insert("harm_drops", n(acc.drops));
        ev.insert("rx_packets", n(acc.packets));
        if let Some(q) = &f.worst_miss {
            ev.insert("recycle_miss_share", q.recycle_miss.unwrap_or(0.0));
            ev.insert("ring_full", n(q.stats.recycle_ring_full));
            ev.insert("recycle_ring", n(q.stats.recycle_ring));
            ev.insert("recycle_cached", n(q.stats.recycle_cached));
            ev.insert("released_refcnt", n(q.stats.recycle_released_refcnt));
            ev.insert("alloc_waive", n(q.stats.alloc_waive));
            if let Some(p) = q.recycling_pct {
                ev.insert("recycling_pct", p);
            }
            if let crate::accounting::QueueKey::Id(id) = q.key {
                ev.insert("worst_queue", f64::from(id));
            }
        }
        if let Some(q) = &f.worst_slow {
            ev.insert("slow_refill_share", q.slow_refill.unwrap_or(0.0));
            ev.insert("memory_provider", if q.provider { 1.0 } else { 0.0 });
        }
    }

    fn update_streaks(&self, ds: &mut DeviceState, f: &Findings) {
        let bump = |c: &mut u32, on: bool| *c = if on { c.saturating_add(1) } else { 0 };
        // Memory pressure breaks a growth streak: growth must be re-earned
        // once allocations stop failing.
        bump(&mut ds.grow_windows, f.grow && !f.pressure);
        bump(&mut ds.contended_windows, f.contended);
        bump(&mut ds.drop_windows, f.healthy_drops);
        if f.calm && !f.grow {
            ds.calm_since.get_or_insert(self.obs.now);
        } else {
            ds.calm_since = None;
        }
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
        if ds.grow_windows >= n {
            let p = self.grow_ring(ds, f, ctx, ev);
            if p.action == Action::Hold
                && ds.contended_windows >= n
                && let Some(c) = self.shrink_channels(f, ev, Shed::RingAtLimit(&p))
            {
                return c;
            }
            return p;
        }
        if ds.contended_windows >= n {
            let at_limit = self.ring_at_limit(ctx);
            if let Some(why) = at_limit {
                let hold = self.hold(ReasonCode::AtLimit, Some(ring), why);
                if let Some(c) = self.shrink_channels(f, ev, Shed::RingAtLimit(&hold)) {
                    return c;
                }
            }
            if let Some(u) = &f.untunable {
                // Rings first: no grow finding in this window or building.
                if f.held
                    && !f.grow
                    && ds.grow_windows == 0
                    && let Some(c) = self.shrink_channels(f, ev, Shed::Held(u))
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
            return self.grow_channels(ev, ctx);
        }
        if let Some(p) = self.calm_shrink(ds, ev) {
            return p;
        }
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
                    self.policy.thresholds.min_pages_per_window
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

    /// Limits on the ring: (current, lowest, highest allowed, what binds the
    /// highest). `Err` = a hold saying why the ring cannot be managed.
    fn ring_limits(&self, ctx: &PlanCtx) -> Result<RingLimits, Proposal> {
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
        let budget_hi = self.budget_max_ring(ctx, cur, lo, hi);
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

    fn ring_at_limit(&self, ctx: &PlanCtx) -> Option<String> {
        match self.ring_limits(ctx) {
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
    fn budget_max_ring(&self, ctx: &PlanCtx, cur: u32, lo: u32, hi: u32) -> u32 {
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

    fn grow_ring(
        &self,
        ds: &DeviceState,
        f: &Findings,
        ctx: &PlanCtx,
        ev: &mut Evidence,
    ) -> Proposal {
        let knob = self.ring_knob();
        let l = match self.ring_limits(ctx) {
            Ok(l) => l,
            Err(p) => return p,
        };
        if let Some(hold) = self.failed_before(knob, Direction::Grow) {
            return hold;
        }
        let Some(q) = &f.worst_miss else {
            return self.hold(ReasonCode::Healthy, Some(knob), "no queue to judge");
        };
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
        let calibrated = ds
            .ring_probe
            .filter(|p| steps >= 1 && p.ring == l.cur)
            .and_then(|p| calibrate(&p, pool_now, excess));
        let held = held_pages(q, &self.info, l.cur);
        let (burst, basis) = burst_estimate(
            f64::from(pool_now) + excess,
            calibrated.filter(|_| step <= max_steps).map(|(b, _)| b),
            held,
            step >= max_steps,
        );
        let needed_pool = burst * self.policy.rings.headroom;
        let estimate = self
            .info
            .ring_for_pool(to_u32(needed_pool))
            .unwrap_or(l.cur);
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
        let target = if self.info.pool_for_ring(lands) > self.info.pool_for_ring(l.cur) {
            target
        } else {
            l.cur
        };
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
            }),
        }
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

    fn calm_shrink(&self, ds: &DeviceState, ev: &mut Evidence) -> Option<Proposal> {
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
            .find(|o| o.device == self.dev.id && o.knob == knob)?
            .value;
        let rings = self.dev.rings.available()?;
        let cur = drivers::ring_value(rings, self.info.field).0?;
        let rounding = self
            .learned()
            .rounding(self.info.rounding.with_policy(self.policy.rings.rounding));
        let target = rounding.up(original.max(self.policy.rings.min));
        if target >= cur {
            return None;
        }
        ev.insert("ring_current", f64::from(cur));
        ev.insert("ring_target", f64::from(target));
        ev.insert("calm_seconds", calm_for.as_secs_f64());
        Some(Proposal {
            probe: None,
            action: Action::SetRing {
                field: self.info.field,
                from: cur,
                to: target,
            },
            reason: ReasonCode::CalmShrink,
            knob: Some(knob),
            message: self.text(format_args!(
                "the pool has been calm for {:.0} min (recycle-miss share below {:.2} %): give memory back, {knob} {cur} → {target} (the original)",
                calm_for.as_secs_f64() / 60.0,
                self.policy.thresholds.shrink_recycle_miss * 100.0
            )),
        })
    }

    fn channel_field(&self) -> Option<(ChannelField, u32, Option<u32>)> {
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
    fn shrink_channels(&self, f: &Findings, ev: &mut Evidence, why: Shed<'_>) -> Option<Proposal> {
        let cp = &self.policy.channels;
        if !cp.enabled || !cp.shrink_when_contended {
            return None;
        }
        let (field, cur, _) = self.channel_field()?;
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

    fn grow_channels(&self, ev: &mut Evidence, ctx: &PlanCtx) -> Proposal {
        let cp = &self.policy.channels;
        let Some((field, cur, max)) = self.channel_field() else {
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
        let per_queue = device_bytes(self.dev, &self.info, self.current_ring())
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

    fn current_ring(&self) -> u32 {
        self.dev
            .rings
            .available()
            .and_then(|r| drivers::ring_value(r, self.info.field).0)
            .unwrap_or(0)
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
        let admitted = gates::admit(self.policy, self.obs, dev, mode, &p.action, &ctx.spent);
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
                    ds.calm_since = None;
                    let before = device_bytes(dev, &self.info, from);
                    let after = device_bytes(dev, &self.info, to);
                    ctx.host_added = ctx.host_added.saturating_add(after.saturating_sub(before));
                }
                Action::SetChannels { .. } => {
                    ds.contended_windows = 0;
                    ds.drop_windows = 0;
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
        out.id.set(&dev.id, knob, reason);
    }
}

/// Why fewer queues are considered ([`DeviceRun::shrink_channels`]).
#[derive(Clone, Copy)]
enum Shed<'a> {
    /// The ring is at its limit: the hold that says why.
    RingAtLimit(&'a Proposal),
    /// Held pages, which no ring fixes: the cause, in words.
    Held(&'a str),
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

/// Keeps in `worst` the queue with the largest `key` of those that have
/// one; of equal ones, the later (queues come in key order).
fn keep_worst(
    worst: &mut Option<QueueFacts>,
    q: &QueueFacts,
    key: impl Fn(&QueueFacts) -> Option<f64>,
) {
    let Some(v) = key(q) else { return };
    if worst
        .as_ref()
        .and_then(&key)
        .is_none_or(|w| v.total_cmp(&w).is_ge())
    {
        *worst = Some(q.clone());
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
    /// The burst calibrated from the last step ([`calibrate`]).
    Calibrated,
    /// The last step with nothing but the lower bound: the limit.
    Limit,
}

/// The burst estimate a growth step sizes the ring for, and where it comes
/// from. `lower`: pool + excess from ring_full, a lower bound (ring_full
/// undercounts on bulk return paths); `fit`: the calibrated burst, when this
/// step may use it; `held`: pages out at once beyond the posted ring
/// ([`held_pages`]). Held pages above the lower bound are an estimate of
/// their own; at or below it they confirm it. The tighter of the estimates
/// wins, never below the lower bound; the limit only on the last step when
/// the lower bound is all there is (it already failed to cover the burst,
/// and nothing the kernel shows says by how much).
fn burst_estimate(
    lower: f64,
    fit: Option<f64>,
    held: Option<f64>,
    last: bool,
) -> (f64, BurstBasis) {
    let above = held.filter(|h| *h > lower);
    match (fit, above) {
        (Some(a), Some(h)) if h < a => (h, BurstBasis::Held),
        (Some(a), _) => (a.max(lower), BurstBasis::Calibrated),
        (None, Some(h)) => (h, BurstBasis::Held),
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
fn held_pages(q: &QueueFacts, info: &DriverInfo, ring: u32) -> Option<f64> {
    let posted =
        u64::from(posted_pages(info, ring)).saturating_mul(u64::from(info.pools_per_queue.max(1)));
    let held = q.inflight_peak.checked_sub(posted).filter(|h| *h > 0)?;
    Some(n64(held))
}

/// RX buffers a queue keeps posted per pool at `ring` (design.md): the pool
/// size where the mapping is known (ring × the driver's factor), else the
/// larger of pool and ring.
fn posted_pages(info: &DriverInfo, ring: u32) -> u32 {
    let pool = info.pool_for_ring(ring).unwrap_or(ring);
    match info.mapping {
        PoolMapping::Proportional { .. } => pool,
        PoolMapping::Fixed { .. } | PoolMapping::Unknown => pool.max(ring),
    }
}

/// The value a change left the knob at: its target, unless it failed or was
/// put back.
fn landed(r: &ActionRecord) -> u32 {
    match r.outcome {
        Outcome::Failed { .. } | Outcome::Reverted => r.from,
        _ => r.to,
    }
}

#[allow(clippy::cast_precision_loss)]
fn n64(v: u64) -> f64 {
    v as f64
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn to_u32(v: f64) -> u32 {
    v.ceil().clamp(0.0, f64::from(u32::MAX)) as u32
}

fn queue_count(dev: &Device) -> u32 {
    let active = u32::try_from(dev.rx_queues.len()).unwrap_or(u32::MAX);
    let chans = dev
        .channels
        .available()
        .map_or(0, crate::snapshot::Channels::rx_queues);
    active.max(chans).max(1)
}

/// Bytes per page for the device: `inflight_mem / inflight` where observable.
fn page_bytes(dev: &Device) -> u64 {
    dev.pools()
        .filter_map(Pool::page_bytes)
        .max()
        .unwrap_or(DEFAULT_PAGE_BYTES)
}

/// design.md: per pool ≈ (posted RX buffers + pool ring + 128 cached) ×
/// page bytes, times the pools of a queue (idpf split queue: two). Posted
/// buffers ≈ the pool size where the mapping is known (ring × the driver's
/// factor: exact for libeth, mlx5, bnxt's agg ring; an overestimate for gve),
/// the ring where it is not; the pool ring is clamped at 16384.
#[must_use]
pub fn device_bytes(dev: &Device, info: &DriverInfo, ring: u32) -> u64 {
    let pool = info.pool_for_ring(ring).unwrap_or(ring);
    let posted = u64::from(posted_pages(info, ring));
    let per_queue = posted
        .saturating_add(u64::from(pool.min(POOL_RING_CLAMP)))
        .saturating_add(POOL_CACHE_PAGES)
        .saturating_mul(u64::from(info.pools_per_queue.max(1)));
    per_queue
        .saturating_mul(page_bytes(dev))
        .saturating_mul(u64::from(queue_count(dev)))
}

fn current_bytes(dev: &Device) -> u64 {
    let info = drivers::driver_info(dev);
    let ring = dev
        .rings
        .available()
        .and_then(|r| drivers::ring_value(r, info.field).0);
    ring.map_or(0, |r| device_bytes(dev, &info, r))
}
