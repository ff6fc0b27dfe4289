//! A hand-written world for engine tests: one or more devices whose pool
//! counters advance by a traffic model, an engine loop, and an actuator
//! that applies rings/channels the way drivers do (new pools, new ids,
//! counters from zero). Its devices, their queues and its snapshot are the
//! fixture kit's (`crate::fixtures`).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::drivers::{POOL_RING_CLAMP, driver_info};
use crate::engine::{ActionRecord, Backoff, LocalTime, Observation, Original, Outcome};
use crate::fixtures::{Nic, QueueCounters, rx_queues, snapshot};
use crate::gates::{self, Spent};
use crate::plan::{Action, ChannelField, Knob, Plan, RingField};
use crate::policy::Policy;
use crate::snapshot::{
    Availability, Device, DeviceId, LinkStats, PoolStats, QueueStats, Rings, Snapshot,
};
use crate::state::EngineState;

/// A device of the world: `eth{ifindex}`, PCI function
/// `0000:3b:00.{ifindex}`, RX ring `ring` of `rx_max`, `queues` combined
/// channels of 64; its pool ids from `ifindex × 1000`, NAPI ids from 1,
/// each queue [`fresh`].
pub(crate) fn device(ifindex: u32, driver: &str, ring: u32, rx_max: u32, queues: u32) -> Device {
    Nic {
        ifindex,
        name: format!("eth{ifindex}"),
        id: DeviceId {
            bus: Some("pci".into()),
            parent: Some(format!("0000:3b:00.{ifindex}")),
            perm_addr: Some(format!("0c:42:a1:00:00:{ifindex:02x}")),
            name_fallback: None,
        },
        driver: driver.into(),
        rings: Rings {
            rx: Some(ring),
            rx_max: Some(rx_max),
            ..Rings::default()
        },
        queues,
        channels_max: 64,
        first_napi: 1,
        first_pool: u64::from(ifindex * 1000),
    }
    .device(fresh)
}

/// A queue of the world as its pool is built: every queue and pool
/// counter present and zero, 1024 pages in flight.
fn fresh(_: u32) -> QueueCounters {
    QueueCounters {
        qstats: QueueStats {
            rx_packets: Some(0),
            rx_bytes: Some(0),
            rx_alloc_fail: Some(0),
            rx_hw_drops: Some(0),
            rx_hw_drop_overruns: Some(0),
        },
        pool: PoolStats::default(),
        inflight: 1024,
    }
}

/// Per-window traffic on one queue, as counter increments.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Traffic {
    pub pool: PoolStats,
    pub drops: u64,
    pub packets: u64,
    pub alloc_fail: u64,
    /// Each pool's `inflight` at this sample (unchanged when `None`).
    pub inflight: Option<u64>,
}

/// Bursty returns: `bursts` bursts of `burst` pages into a pool ring of
/// `pool` entries. The ring takes `pool` pages per burst, the rest is freed
/// (ring_full) and later refilled through the slow path (`provider`: the
/// provider path, counted as alloc_empty).
pub(crate) fn bursty(pool: u32, burst: u64, bursts: u64, provider: bool) -> Traffic {
    let pool = u64::from(pool.min(POOL_RING_CLAMP));
    let kept = burst.min(pool) * bursts;
    let freed = burst.saturating_sub(pool) * bursts;
    let slow = freed.div_ceil(64);
    let s = PoolStats {
        alloc_fast: kept + freed,
        alloc_refill: kept.div_ceil(64),
        alloc_slow: if provider { 0 } else { slow },
        alloc_empty: slow,
        recycle_ring: kept,
        recycle_ring_full: freed,
        recycle_cached: 1000,
        ..PoolStats::default()
    };
    Traffic {
        pool: s,
        drops: if freed > 0 { 500 } else { 0 },
        packets: (kept + freed) * 2,
        alloc_fail: 0,
        inflight: None,
    }
}

/// The pages the device keeps posted at its ring now (ice: the pool is
/// the ring).
fn posted(w: &World, i: usize) -> u64 {
    u64::from(w.pool_size(i).max(w.ring(i)))
}

/// A kernel page_pool's `inflight`, as page-pool-get shows it: the
/// buffers posted, the pages the stack has out now, and the pages parked
/// in the pool's ring — the most that were out since the pool was built,
/// up to what the pool ring holds (the rest was freed when it was full).
/// A rebuild (new pool ids) starts it again. The mark is the bursts' own
/// peak, not what a sample saw: a burst out and back between two samples
/// still leaves its pages parked in the ring. The settle tests before this
/// set `inflight` back by hand once the bursts stopped, which no pool does.
#[derive(Default)]
pub(crate) struct RealPool {
    /// (the pool's id, the most pages out beyond the posted ring since it
    /// was built).
    mark: Cell<(u64, u64)>,
}

impl RealPool {
    /// `inflight` at a sample that sees `out` pages out in the stack, the
    /// bursts since the last sample having peaked at `peak` pages out.
    pub(crate) fn inflight_after(&self, w: &World, i: usize, peak: u64, out: u64) -> u64 {
        let id = w.snap.devices[i].rx_queues[0].pools[0].id;
        let (was, most) = self.mark.get();
        let most = if was == id { most } else { 0 }.max(peak).max(out);
        self.mark.set((id, most));
        let parked = most.min(u64::from(w.pool_size(i)));
        posted(w, i) + out.max(parked)
    }

    /// `inflight` at a sample that sees `out` pages out in the stack, no
    /// more than that out since the last sample.
    pub(crate) fn inflight(&self, w: &World, i: usize, out: u64) -> u64 {
        self.inflight_after(w, i, out, out)
    }

    /// Bursts of `burst` pages into the pool the ring gives now; a sample
    /// sees `seen` of a burst out in the stack.
    pub(crate) fn bursts(&self, w: &World, i: usize, burst: u64, seen: u64) -> Traffic {
        Traffic {
            inflight: Some(self.inflight(w, i, seen)),
            ..bursty(w.pool_size(i), burst, 50, false)
        }
    }

    /// Steady returns of `pages` a window, nothing out at a sample.
    pub(crate) fn steady(&self, w: &World, i: usize, pages: u64) -> Traffic {
        Traffic {
            inflight: Some(self.inflight(w, i, 0)),
            ..steady(pages)
        }
    }

    /// No traffic at all.
    pub(crate) fn idle(&self, w: &World, i: usize) -> Traffic {
        Traffic {
            inflight: Some(self.inflight(w, i, 0)),
            ..Traffic::default()
        }
    }
}

/// Held pages on a contended slow path (ppsim's `queues-held`): every
/// returned page is released (released_refcnt), the slow path is taken for
/// all of them at any ring, no ring_full. Untunable: no ring growth.
pub(crate) fn held(_: &World, _: usize) -> Traffic {
    Traffic {
        pool: PoolStats {
            alloc_fast: 100_000,
            alloc_slow: 1_500,
            alloc_refill: 50,
            recycle_released_refcnt: 100_000,
            ..PoolStats::default()
        },
        packets: 100_000,
        ..Traffic::default()
    }
}

/// Healthy steady traffic: everything recycles through the cache and ring.
pub(crate) fn steady(pages: u64) -> Traffic {
    Traffic {
        pool: PoolStats {
            alloc_fast: pages,
            alloc_refill: pages / 2 / 64,
            recycle_cached: pages / 2,
            recycle_ring: pages / 2,
            ..PoolStats::default()
        },
        drops: 0,
        packets: pages,
        alloc_fail: 0,
        inflight: None,
    }
}

/// Adds `t` to every pool and queue counter of `d`.
pub(crate) fn advance_device(d: &mut Device, t: &Traffic) {
    for q in &mut d.rx_queues {
        for p in &mut q.pools {
            if let Some(s) = &mut p.stats {
                *s = s.add(&t.pool);
            }
            if t.inflight.is_some() {
                p.inflight = t.inflight;
            }
        }
        if let Some(qs) = &mut q.qstats {
            let add = |v: &mut Option<u64>, n: u64| {
                if let Some(x) = v {
                    *x += n;
                }
            };
            add(&mut qs.rx_hw_drops, t.drops);
            add(&mut qs.rx_packets, t.packets);
            add(&mut qs.rx_alloc_fail, t.alloc_fail);
        }
    }
    if let Some(l) = &mut d.link_stats {
        l.rx_dropped += t.drops;
        l.rx_packets += t.packets;
    }
}

pub(crate) fn no_harm(mut d: Device) -> Device {
    for q in &mut d.rx_queues {
        q.qstats = None;
    }
    d.qstats = None;
    d.link_stats = None;
    d
}

#[allow(dead_code)]
pub(crate) fn with_link_stats(mut d: Device) -> Device {
    for q in &mut d.rx_queues {
        q.qstats = None;
    }
    d.link_stats = Some(LinkStats::default());
    d
}

/// The engine loop with an actuator that behaves like a pool-rebuilding
/// driver. Every call to [`World::tick`] is one interval (= one window in
/// the test policy).
pub(crate) struct World {
    pub policy: Policy,
    pub state: EngineState,
    pub snap: Snapshot,
    /// The previous sample and the pass's deltas, as the daemon keeps them.
    observer: crate::observer::Observer,
    pub now: Duration,
    pub history: Vec<ActionRecord>,
    pub originals: Vec<Original>,
    pub overrides: Vec<(DeviceId, Knob)>,
    pub backoff: BTreeMap<String, Backoff>,
    pub local_time: Option<LocalTime>,
    pub apply: bool,
    started: bool,
    /// The plan the in-place engine filled last tick, handed back to it as
    /// the daemon does (`decide_into`).
    reused: crate::plan::Plan,
    /// The engine object the reused plan is decided by, kept from tick to
    /// tick as the daemon keeps it (its buffers hold the last pass).
    engine: crate::engine::Engine,
    next_pool: u32,
    /// Judge every change as the daemon does (`evaluate::Evaluation` over
    /// `timing.evaluation`, a harmful one put back) instead of recording
    /// it effective at once.
    pub judge: bool,
    evaluations: crate::evaluate::OpenWindows,
}

impl World {
    pub(crate) fn new(policy: Policy, devices: Vec<Device>) -> Self {
        Self {
            policy,
            state: EngineState::default(),
            snap: snapshot(0, "7.3.0", devices),
            observer: crate::observer::Observer::default(),
            now: Duration::from_secs(0),
            history: vec![],
            originals: vec![],
            overrides: vec![],
            backoff: BTreeMap::new(),
            local_time: None,
            apply: true,
            started: false,
            reused: crate::plan::Plan::default(),
            engine: crate::engine::Engine::default(),
            next_pool: 50_000,
            judge: false,
            evaluations: crate::evaluate::OpenWindows::default(),
        }
    }

    /// Current pool size of device `i` (per its driver mapping).
    pub(crate) fn pool_size(&self, i: usize) -> u32 {
        let d = &self.snap.devices[i];
        let ring = d.rings.available().and_then(|r| r.rx).unwrap_or(0);
        driver_info(d).pool_for_ring(ring).unwrap_or(256)
    }

    /// A change of device `i`'s `knob` from `from` to `to` at `at`, with
    /// its `outcome`, in the history the engine reads.
    pub(crate) fn changed(
        &mut self,
        i: usize,
        knob: Knob,
        (from, to): (u32, u32),
        at: Duration,
        outcome: Outcome,
    ) {
        self.history.push(ActionRecord {
            device: self.snap.devices[i].id.clone(),
            knob,
            from,
            to,
            at,
            outcome,
        });
    }

    pub(crate) fn ring(&self, i: usize) -> u32 {
        self.snap.devices[i]
            .rings
            .available()
            .and_then(|r| r.rx)
            .unwrap_or(0)
    }

    /// Ticks under `traffic` until device 0's ring leaves where it was,
    /// at most `n` samples; the ring then (`None`: it never moved).
    pub(crate) fn until_ring_moves(
        &mut self,
        n: usize,
        traffic: impl Fn(&Self, usize) -> Traffic + Copy,
    ) -> Option<u32> {
        let from = self.ring(0);
        (0..n).find_map(|_| {
            self.tick(traffic);
            (self.ring(0) != from).then(|| self.ring(0))
        })
    }

    pub(crate) fn channels(&self, i: usize) -> u32 {
        self.snap.devices[i]
            .channels
            .available()
            .and_then(|c| c.combined)
            .unwrap_or(0)
    }

    /// Advance one interval with traffic from `traffic(world, device index)`,
    /// decide, and (when enforcing and `apply`) act on the plan.
    pub(crate) fn tick(&mut self, traffic: impl Fn(&Self, usize) -> Traffic) -> Plan {
        self.tick_with(traffic, |_| {})
    }

    /// [`World::tick`], with `mutate` applied to the new sample before the
    /// engine sees it (resets, pool rebuilds).
    pub(crate) fn tick_with(
        &mut self,
        traffic: impl Fn(&Self, usize) -> Traffic,
        mutate: impl FnOnce(&mut Snapshot),
    ) -> Plan {
        let mut next = self.snap.clone();
        for i in 0..next.devices.len() {
            let t = traffic(self, i);
            advance_device(&mut next.devices[i], &t);
        }
        mutate(&mut next);
        let interval = self.policy.timing.interval;
        // The first tick is the daemon's first sample: no previous one.
        if self.started {
            let at = self.now;
            self.now += interval;
            let current = std::mem::replace(&mut self.snap, next);
            self.observer.keep(current, at);
        } else {
            self.started = true;
            self.snap = next;
        }
        self.evaluate_due();
        let obs = Observation {
            pass: self.observer.next(&self.snap, self.now),
            local_time: self.local_time,
            history: &self.history,
            overrides: &self.overrides,
            originals: &self.originals,
            backoff: &self.backoff,
        };
        let (plan, state) = crate::engine::decide(&self.policy, &self.state, &obs);
        check_seam(&self.policy, &obs, &plan);
        // The engine object the daemon and replay keep, with last tick's
        // buffers and plan (other devices, other messages and evidence in
        // its slots), decides exactly as this one and leaves exactly the
        // same memory, on every tick of every scenario.
        let mut reused_state = self.state.clone();
        self.engine
            .decide_into(&self.policy, &mut reused_state, &obs, &mut self.reused);
        assert_eq!(self.reused, plan);
        assert_eq!(reused_state, state);
        self.state = state;
        if self.apply {
            for d in plan.decisions.clone() {
                if d.mode == crate::policy::Mode::Enforce {
                    self.act(&d.device_id, d.action);
                    self.open_evaluation(&d);
                }
            }
        }
        plan
    }

    /// With [`Self::judge`]: the change `d` just made is judged from the
    /// next sample on, as the daemon's actuator does.
    fn open_evaluation(&mut self, d: &crate::plan::Decision) {
        let Some(knob) = d.action.knob() else { return };
        let (Action::SetRing { from, to, .. } | Action::SetChannels { from, to, .. }) = d.action
        else {
            return;
        };
        if !self.judge {
            return;
        }
        let Some(dev) = self.snap.devices.iter().find(|x| x.id == d.device_id) else {
            return;
        };
        if let Some(r) = self.history.last_mut() {
            r.outcome = Outcome::Pending;
        }
        let change = crate::evaluate::Applied {
            knob,
            from,
            to,
            reason: d.reason,
        };
        self.evaluations.open(crate::evaluate::Evaluation::open(
            change,
            d.baseline.clone(),
            dev.clone(),
            self.now,
            &self.policy,
        ));
    }

    /// A daemon restart (kill -9): the open evaluations die with it, and
    /// their changes are closed inconclusive, as `StateFile::close_pending`
    /// does at the next start.
    pub(crate) fn restart(&mut self) {
        self.evaluations = crate::evaluate::OpenWindows::default();
        for r in &mut self.history {
            if r.outcome == Outcome::Pending {
                r.outcome = Outcome::Inconclusive;
            }
        }
    }

    /// Advances the open evaluations on the sample just taken; a verdict
    /// is recorded on its change, and a harmful change is put back (the
    /// driver rebuilds the pools again).
    fn evaluate_due(&mut self) {
        let due = self.evaluations.advance(&self.snap, self.now, &self.policy);
        for (closed, dev) in due {
            let (ev, id) = (&closed.ev, dev.id);
            if let Some(value) = closed.set {
                let back = match ev.knob {
                    Knob::Ring(field) => Action::SetRing {
                        field,
                        from: ev.to,
                        to: value,
                    },
                    Knob::Channels(field) => Action::SetChannels {
                        field,
                        from: ev.to,
                        to: value,
                    },
                };
                self.act(&id, back);
                // A revert (or its undoing) is the daemon's, not a change
                // of the engine's: it leaves no record of its own.
                self.history.pop();
                let start = self.snap.devices.iter().find(|d| d.id == id).cloned();
                if let Some(w) = start.and_then(|d| closed.revert_window(d, self.now, &self.policy))
                {
                    self.evaluations.open(w);
                }
            }
            if let Some(r) = self
                .history
                .iter_mut()
                .rev()
                .find(|r| r.device == id && r.knob == ev.knob)
            {
                r.outcome = closed.outcome.clone();
            }
        }
    }

    fn act(&mut self, id: &DeviceId, action: Action) {
        let Some(i) = self.snap.devices.iter().position(|d| &d.id == id) else {
            return;
        };
        let (knob, from, to) = match action {
            Action::Hold => return,
            Action::SetRing { field, from, to } => (Knob::Ring(field), from, to),
            Action::SetChannels { field, from, to } => (Knob::Channels(field), from, to),
        };
        if !self
            .originals
            .iter()
            .any(|o| &o.device == id && o.knob == knob)
        {
            self.originals.push(Original {
                device: id.clone(),
                knob,
                value: from,
            });
        }
        let d = &mut self.snap.devices[i];
        match action {
            Action::SetRing {
                field: RingField::Rx,
                to,
                ..
            } => {
                if let Availability::Available(r) = &mut d.rings {
                    r.rx = Some(to);
                }
            }
            Action::SetRing { .. } => {}
            Action::SetChannels {
                field: ChannelField::Combined,
                to,
                ..
            } => {
                if let Availability::Available(c) = &mut d.channels {
                    c.combined = Some(to);
                }
            }
            Action::SetChannels { .. } | Action::Hold => {}
        }
        // The driver rebuilds every RX pool: new ids, counters from zero.
        let n = d.channels.available().and_then(|c| c.combined).unwrap_or(1);
        self.next_pool += 100;
        d.rx_queues = rx_queues(d.ifindex, n, 1, u64::from(self.next_pool), fresh);
        self.history.push(ActionRecord {
            device: id.clone(),
            knob,
            from,
            to,
            at: self.now,
            outcome: Outcome::Effective,
        });
    }
}

/// The seam between the plan and the actuator: every change the plan
/// makes, asked again of the gates the way the actuator asks them (one by
/// one, the earlier changes of the plan already in the history), is
/// admitted. Panics where they disagree.
pub(crate) fn check_seam(policy: &Policy, obs: &Observation<'_>, plan: &Plan) {
    let mut history = obs.history.to_vec();
    for d in &plan.decisions {
        let Some(knob) = d.action.knob() else {
            continue;
        };
        let dev = obs
            .pass
            .current
            .devices
            .iter()
            .find(|x| x.id == d.device_id)
            .expect("a decision is about a sampled device");
        let at_act = Observation {
            history: &history,
            ..*obs
        };
        let admitted = gates::admit(
            policy,
            &at_act,
            dev,
            d.mode,
            &d.action,
            &d.evidence,
            &Spent::default(),
        );
        assert_eq!(
            admitted,
            Ok(()),
            "the plan made a change the actuator's gate refuses: {d:#?}"
        );
        let (from, to) = match d.action {
            Action::SetRing { from, to, .. } | Action::SetChannels { from, to, .. } => (from, to),
            Action::Hold => continue,
        };
        history.push(ActionRecord {
            device: d.device_id.clone(),
            knob,
            from,
            to,
            at: obs.pass.now,
            outcome: Outcome::Pending,
        });
    }
}

/// The only decision in a one-device plan.
pub(crate) fn only(plan: &Plan) -> &crate::plan::Decision {
    assert_eq!(plan.decisions.len(), 1, "{plan:#?}");
    &plan.decisions[0]
}

/// Sets every pool counter of device `i` back to zero (a reset).
pub(crate) fn reset_pools(s: &mut Snapshot, i: usize) {
    for q in &mut s.devices[i].rx_queues {
        for p in &mut q.pools {
            p.stats = Some(PoolStats::default());
        }
    }
}
