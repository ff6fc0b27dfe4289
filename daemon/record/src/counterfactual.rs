//! The counterfactual engine: a policy run on snapshots as if its own
//! changes had been made, its counters continued by a model of the recycle
//! ring where its ring differs from the one observed. `pptune replay
//! --against` runs it over a recording ([`crate::replay`]); the daemon's
//! shadow policy runs it on live samples. Nothing it decides reaches a
//! device: its changes are written into the snapshots it is given.
//!
//! The ring model the counterfactual continues a changed device's counters
//! by is [`crate::model`]'s.

use std::collections::BTreeMap;
use std::time::Duration;

use policy::Policy;
use policy::accounting::{PassDeltas, QueueKey};
use policy::engine::{ActionRecord, EngineState, Observation, Original, Outcome};
use policy::evaluate::{Applied, Evaluation, OpenWindows};
use policy::observation::{Backoff, LocalTime};
use policy::observer::{Observer, Pass};
use policy::plan::{Decision, Knob, Plan};
use policy::snapshot::{Availability, Device, DeviceId, Pool, Snapshot};
use policy::window::Rates;

use crate::live::{Overlay, Slot};
use crate::model::{PoolModel, Track, Tracked, model_pool};

/// What the engine reads of one pass besides its samples: the local time,
/// the overrides, and the history, originals and backoff.
type Inputs<'a> = (
    Option<LocalTime>,
    &'a [(DeviceId, Knob)],
    (
        &'a [ActionRecord],
        &'a [Original],
        &'a BTreeMap<String, Backoff>,
    ),
);

/// The engine on `pass` with `inputs`, into `plan`.
fn run_engine(
    (engine, state): (&mut policy::engine::Engine, &mut EngineState),
    policy: &Policy,
    pass: Pass<'_>,
    (local_time, overrides, (history, originals, backoff)): Inputs<'_>,
    plan: &mut Plan,
) {
    let obs = Observation {
        pass,
        local_time,
        history,
        overrides,
        originals,
        backoff,
    };
    engine.decide_into(policy, state, &obs, plan);
}

/// What one pass gives the engine besides the snapshot.
#[derive(Debug, Clone, Copy)]
pub struct PassClock {
    pub now: Duration,
    pub elapsed: Duration,
    pub local_time: Option<LocalTime>,
}

/// The daemon's own inputs of a pass, for a replay under the recorded
/// policy (faithful): its history, originals and backoff instead of the
/// counterfactual's.
pub type Recorded = (Vec<ActionRecord>, Vec<Original>, BTreeMap<String, Backoff>);

/// The counterfactual engine and what it carries between passes.
#[derive(Debug, Default)]
pub struct Counterfactual {
    pub(crate) state: EngineState,
    engine: policy::engine::Engine,
    /// The snapshot the engine saw last pass (modelled where modelled)
    /// and the pass's pool deltas against it, for the engine and the
    /// totals and series.
    pub(crate) observer: Observer,
    /// On a copying pass, per device the counterfactual changed a knob
    /// of, its pools' counters as of the last pass (the model's input; a
    /// live pass keeps them in its [`Slot`]s).
    pub(crate) tracks: BTreeMap<String, Track>,
    /// Counts the copying passes, to find the tracked devices one lacked.
    pass: u64,
    pub(crate) history: Vec<ActionRecord>,
    originals: Vec<Original>,
    /// The counterfactual's knob values, by device key.
    knobs: BTreeMap<(String, Knob), u32>,
    diverged: BTreeMap<String, bool>,
    /// The simulated changes under evaluation.
    evals: OpenWindows,
    /// On a live pass, the devices it changed ([`Self::live_pass`]).
    slots: Vec<Slot>,
}

impl Counterfactual {
    /// A pass before the engine: the observed counters kept, then the
    /// snapshot made this policy's world in place (its knob values, the
    /// modelled counters) and its evaluations closed when due.
    pub fn model_pass(&mut self, policy: &Policy, snap: &mut Snapshot, now: Duration) {
        self.modelled(snap);
        self.evaluate_due(policy, snap, now);
    }

    /// One live pass (the daemon's shadow policy) on the loop's observed
    /// pass: its previous sample, its sample and their deltas, as the loop
    /// computed them. The devices the counterfactual changed stand in for
    /// the observed ones while it decides, closes its evaluations, makes
    /// its changes and `publish`es what it saw; the loop gets its pass
    /// back as it was ([`Overlay`]). The same decisions as
    /// [`Self::model_pass`] and [`Self::decide`] on a copy of the pass,
    /// without the copy.
    pub fn live_pass(
        &mut self,
        policy: &Policy,
        (observer, snap): (&mut Observer, &mut Snapshot),
        clock: PassClock,
        overrides: &[(DeviceId, Knob)],
        plan: &mut Plan,
        publish: impl FnOnce(&Snapshot, &PassDeltas, &Self, &Plan),
    ) {
        let mut slots = std::mem::take(&mut self.slots);
        for s in &mut slots {
            s.place(snap);
        }
        let mut opened = Vec::new();
        {
            let (previous, deltas) = observer.split_mut();
            let o = Overlay::new(&mut slots, (&mut *snap, deltas), |d, key, track, each| {
                self.model_device(d, key, track, each);
            });
            let (snap, deltas) = o.view();
            self.evaluate_due(policy, snap, clock.now);
            let pass = Pass {
                previous,
                current: snap,
                deltas,
                elapsed: clock.elapsed,
                now: clock.now,
            };
            self.decide_observed(policy, pass, (clock.local_time, overrides), plan);
            for dec in &plan.decisions {
                if dec.enforced_change().is_some() {
                    self.apply_on(policy, dec, pass);
                    opened.push(dec.device_id.key());
                }
            }
            publish(snap, deltas, self, plan);
        }
        // A device changed for the first time: its slot, from the pass as
        // observed.
        for key in opened {
            if slots.iter().all(|s| s.key != key)
                && let Some(d) = snap.devices.iter().find(|d| d.id.key() == key)
            {
                slots.push(Slot::open(d, key));
            }
        }
        self.slots = slots;
    }

    /// The engine on the observed pass: its previous sample and its
    /// deltas, as the caller computed them.
    fn decide_observed(
        &mut self,
        policy: &Policy,
        pass: Pass<'_>,
        (local_time, overrides): (Option<LocalTime>, &[(DeviceId, Knob)]),
        plan: &mut Plan,
    ) {
        let Self {
            state,
            engine,
            history,
            originals,
            ..
        } = self;
        let inputs = (
            history.as_slice(),
            originals.as_slice(),
            &policy::engine::NO_BACKOFF,
        );
        run_engine(
            (engine, state),
            policy,
            pass,
            (local_time, overrides, inputs),
            plan,
        );
    }

    /// The engine on `snap` into `plan`, the pass's deltas computed first
    /// (its time is the record's, `clock`). `recorded` replaces the counterfactual's own history, originals and
    /// (empty) backoff with the daemon's.
    pub fn decide(
        &mut self,
        policy: &Policy,
        snap: &Snapshot,
        clock: PassClock,
        overrides: &[(DeviceId, Knob)],
        recorded: Option<&Recorded>,
        plan: &mut Plan,
    ) {
        let Self {
            state,
            engine,
            observer,
            history,
            originals,
            ..
        } = self;
        let pass = Pass {
            elapsed: clock.elapsed,
            ..observer.next(snap, clock.now)
        };
        let inputs = match recorded {
            Some((h, o, b)) => (h.as_slice(), o.as_slice(), b),
            None => (
                history.as_slice(),
                originals.as_slice(),
                &policy::engine::NO_BACKOFF,
            ),
        };
        run_engine(
            (engine, state),
            policy,
            pass,
            (clock.local_time, overrides, inputs),
            plan,
        );
    }

    /// Another process, another clock: the simulated history is moved
    /// like the daemon moves its own (state.rs rebase), and the simulated
    /// evaluations end.
    pub fn new_clock(&mut self) {
        let now = self.observer.previous_at().unwrap_or_default();
        for a in &mut self.history {
            a.at = a.at.min(now);
        }
        self.evals = OpenWindows::default();
    }

    /// Whether the device's counters are modelled (its knobs differed from
    /// the observed ones at some pass).
    #[must_use]
    pub fn is_modelled(&self, key: &str) -> bool {
        self.diverged.get(key).copied().unwrap_or(false)
    }

    /// The pass's pool deltas, as the engine read them.
    #[must_use]
    pub fn deltas(&self) -> &PassDeltas {
        self.observer.deltas()
    }

    /// The snapshot of the last pass, as the engine saw it.
    #[must_use]
    pub fn previous(&self) -> Option<&Snapshot> {
        self.observer.previous()
    }

    /// `snap` becomes the previous pass; it is left holding the pass
    /// before, whose buffers the next pass is decoded into.
    pub fn keep_previous(&mut self, snap: &mut Snapshot, now: Duration) {
        self.observer.keep_swap(snap, now);
    }

    /// Starts again from `previous`, a recording's sample before its
    /// first pass (`None`: the next pass is a first one).
    pub(crate) fn restart(&mut self, previous: Option<(Snapshot, Duration)>) {
        self.observer.restart(previous);
    }

    /// A simulated change: the knob takes the target, an evaluation opens.
    /// Only a decision that changes something in its own mode
    /// ([`Decision::enforced_change`]); any other is ignored.
    /// The baseline of its evaluation is the finding window the decision
    /// was made on ([`Decision::baseline_or`]), else the pass
    /// [`Self::decide`] read: the counterfactual's previous pass, `snap`
    /// and their deltas.
    pub fn apply(&mut self, policy: &Policy, dec: &Decision, snap: &Snapshot, clock: PassClock) {
        // A device changed for the first time: the model continues from
        // its counters in this pass (as recorded: nothing modelled it yet).
        if dec.enforced_change().is_some() {
            let key = dec.device_id.key();
            if !self.tracks.contains_key(&key)
                && let Some(d) = snap.devices.iter().find(|d| d.id == dec.device_id)
            {
                self.tracks.insert(key, Track::of_device(d));
            }
        }
        let observer = std::mem::take(&mut self.observer);
        let pass = Pass {
            elapsed: clock.elapsed,
            ..observer.pass(snap, clock.now)
        };
        self.apply_on(policy, dec, pass);
        self.observer = observer;
    }

    /// [`Self::apply`] on `pass`.
    fn apply_on(&mut self, policy: &Policy, dec: &Decision, pass: Pass<'_>) {
        let Some((knob, from, to)) = dec.enforced_change() else {
            return;
        };
        let Pass {
            previous,
            current: snap,
            deltas,
            elapsed,
            now,
        } = pass;
        let key = dec.device_id.key();
        if !self
            .originals
            .iter()
            .any(|o| o.device == dec.device_id && o.knob == knob)
        {
            self.originals.push(Original {
                device: dec.device_id.clone(),
                knob,
                value: from,
            });
        }
        let at = snap.devices.iter().position(|d| d.id == dec.device_id);
        let dev = at.and_then(|i| snap.devices.get(i));
        self.knobs.insert((key.clone(), knob), to);
        self.history.push(ActionRecord {
            device: dec.device_id.clone(),
            knob,
            from,
            to,
            at: now,
            outcome: Outcome::Pending,
        });
        // The pass's deltas are the counterfactual's (modelled where
        // modelled); the previous sample gives the harm counters, which
        // no model touches.
        let baseline = dec.baseline_or(|| {
            let (p, i) = previous.zip(at)?;
            let a = p.devices.iter().find(|d| d.id == dec.device_id)?;
            let b = snap.devices.get(i)?;
            Rates::over(a, b, &deltas.device(i), elapsed)
        });
        if let Some(start) = dev {
            let applied = Applied {
                knob,
                from,
                to,
                reason: dec.reason,
            };
            self.evals.open(Evaluation::open(
                applied,
                baseline,
                start.clone(),
                now,
                policy,
            ));
        }
    }

    /// Closes due simulated evaluations with the daemon's judgement, and
    /// does what it asks: a harmful change put back (its revert judged
    /// from here), a revert that did worse undone.
    pub fn evaluate_due(&mut self, policy: &Policy, snap: &Snapshot, now: Duration) {
        for (closed, dev) in self.evals.advance(snap, now, policy) {
            let e = &closed.ev;
            if let Some(value) = closed.set {
                self.knobs.insert((e.key.clone(), e.knob), value);
                if let Some(ev) = closed.revert_window(dev, now, policy) {
                    self.evals.open(ev);
                }
            }
            if let Some(a) = self
                .history
                .iter_mut()
                .rev()
                .find(|a| a.device.key() == e.key && a.knob == e.knob)
            {
                a.outcome = closed.outcome.clone();
            }
        }
    }

    /// A faithful replay's pass (no model): each tracked device's
    /// observed counters move on to this pass's.
    pub fn remember_observed(&mut self, snap: &Snapshot) {
        if self.tracks.is_empty() {
            return;
        }
        self.pass = self.pass.wrapping_add(1);
        for d in &snap.devices {
            if let Some(t) = self.tracks.get_mut(&d.id.key()) {
                t.observe(d);
                t.seen = self.pass;
            }
        }
        self.forget_unseen();
    }

    /// The tracked devices this pass did not have: what they counted
    /// before is no baseline for a return.
    fn forget_unseen(&mut self) {
        for t in self.tracks.values_mut() {
            if t.seen != self.pass {
                t.forget();
            }
        }
    }

    /// The recorded snapshot, in place, with the replay's knob values,
    /// counters continued by the ring model where the ring differs.
    pub fn modelled(&mut self, snap: &mut Snapshot) {
        // With nothing changed by the replay, all stays as recorded.
        if self.tracks.is_empty() {
            return;
        }
        self.pass = self.pass.wrapping_add(1);
        let mut tracks = std::mem::take(&mut self.tracks);
        for d in &mut snap.devices {
            let key = d.id.key();
            if let Some(t) = tracks.get_mut(&key) {
                self.model_device(d, &key, t, &mut |_, _, _| {});
                t.seen = self.pass;
            }
        }
        self.tracks = tracks;
        self.forget_unseen();
    }

    /// One device the counterfactual changed a knob of, in place, with its
    /// knob values and, once they differed from the observed ones,
    /// modelled counters (the three the ring model moves, [`Moved`]) and
    /// pages in flight; `track` moves on to this pass (per pool, what was
    /// observed and what the model changed), and `each` is told, per pool
    /// in the model's order, its queue, its track and the pool as
    /// modelled. A device whose knobs never differed stays as observed.
    pub(crate) fn model_device(
        &mut self,
        d: &mut Device,
        key: &str,
        track: &mut Track,
        each: &mut dyn FnMut(QueueKey, &Tracked, &Pool),
    ) {
        let rings = self.ring_change(d, key);
        let ring_k = rings.map(|(rec, v)| f64::from(v) / f64::from(rec));
        let chan = self.knobs.iter().find_map(|((k, knob), v)| {
            (k == key && matches!(knob, Knob::Channels(_))).then_some((*knob, *v))
        });
        if let Some((knob, v)) = chan
            && policy::knobs::desc(knob).write(d, v)
        {
            self.diverged.insert(key.to_owned(), true);
        }
        if ring_k.is_some() && !self.diverged.get(key).copied().unwrap_or(false) {
            self.diverged.insert(key.to_owned(), true);
        }
        // A modelled device stays modelled: with the same ring again its
        // deltas are as observed, on the modelled base.
        let diverged = self.diverged.get(key).copied().unwrap_or(false);
        let info = policy::drivers::driver_info(d);
        let model = diverged.then(|| PoolModel {
            k: ring_k.unwrap_or(1.0),
            pages: rings.map(|r| (&info, r)),
        });
        let mut next = std::mem::take(&mut track.next);
        next.clear();
        let mut i = 0;
        let queues = d
            .rx_queues
            .iter_mut()
            .map(|q| (QueueKey::Id(q.id), &mut q.pools));
        let unmapped = std::iter::once((QueueKey::Unmapped, &mut d.unmapped_pools));
        for (queue, pools) in queues.chain(unmapped) {
            for p in pools {
                let t = model_pool(p, model.as_ref(), track.find(i, p.id));
                each(queue, &t, p);
                next.push(t);
                i += 1;
            }
        }
        track.next = std::mem::replace(&mut track.pools, next);
    }

    /// Sets the replay's ring on `d`; the recorded ring and the replay's
    /// when they differ.
    fn ring_change(&self, d: &mut Device, key: &str) -> Option<(u32, u32)> {
        let Availability::Available(r) = &mut d.rings else {
            return None;
        };
        let mut factor = None;
        for k in policy::knobs::all().filter(|k| k.block == policy::knobs::Block::Rings) {
            let Some(&v) = self.knobs.get(&(key.to_owned(), k.knob)) else {
                continue;
            };
            if let Some(rec) = k.in_rings(r)
                && rec != v
                && rec > 0
            {
                factor = Some((rec, v));
            }
            k.set_in_rings(r, v);
        }
        factor
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use policy::fixtures::{self, Nic, QueueCounters};
    use policy::observer::Observer;
    use policy::plan::Plan;
    use policy::snapshot::{PoolStats, QueueStats, Snapshot};

    use super::{Counterfactual, PassClock};

    /// Pass `n` of a host of four 2-queue NICs at ring 256: eth1 and eth3
    /// return bursts of 2,000 pages (8,000 from pass 120 on) into their
    /// 256-page pools and drop packets, eth0 and eth2 recycle everything.
    fn host(n: u64) -> Snapshot {
        let devices = (0..4)
            .map(|d| {
                let bursty = d % 2 == 1;
                Nic::pci(d, "ice", 2).device(|q| {
                    let full = |v: u64| v * n.min(120) + 4 * v * n.saturating_sub(120);
                    let per = |v: u64| v * n + u64::from(q) * 7;
                    let (ring, full) = if bursty { (256, full(1744)) } else { (2000, 0) };
                    QueueCounters {
                        qstats: QueueStats {
                            rx_packets: Some(per(4000)),
                            rx_hw_drops: Some(per(if bursty { 300 } else { 0 })),
                            ..QueueStats::default()
                        },
                        pool: PoolStats {
                            alloc_fast: per(2000),
                            alloc_slow: full / 64,
                            recycle_ring: per(ring),
                            recycle_ring_full: full,
                            recycle_cached: per(100),
                            ..PoolStats::default()
                        },
                        inflight: 256,
                    }
                })
            })
            .collect();
        fixtures::snapshot(n * 10_000, "7.3.0", devices)
    }

    /// The live pass decides, changes and models exactly what the copying
    /// one (replay's) does, pass for pass, and gives the loop its sample
    /// and deltas back as they were.
    #[test]
    fn a_live_pass_is_a_copying_pass_without_the_copy() {
        let policy = fixtures::policy();
        let (mut copying, mut live) = (Counterfactual::default(), Counterfactual::default());
        let (mut plan_c, mut plan_l) = (Plan::default(), Plan::default());
        let mut observer = Observer::default();
        let mut changes = 0;
        for n in 0..240 {
            let now = Duration::from_secs(10 * n);
            let clock = PassClock {
                now,
                elapsed: if n == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_secs(10)
                },
                local_time: None,
            };
            let mut snap = host(n);
            observer.next(&snap, now);

            let mut copy = host(n);
            copying.model_pass(&policy, &mut copy, now);
            copying.decide(&policy, &copy, clock, &[], None, &mut plan_c);
            for dec in &plan_c.decisions {
                copying.apply(&policy, dec, &copy, clock);
            }

            let snap_before = host(n);
            let queues_before: Vec<_> = (0..4)
                .map(|i| observer.deltas().queues(i).to_vec())
                .collect();
            let mut seen = false;
            live.live_pass(
                &policy,
                (&mut observer, &mut snap),
                clock,
                &[],
                &mut plan_l,
                |s, d, _, _| {
                    assert_eq!(s, &copy, "pass {n}: the sample as modelled");
                    for i in 0..4 {
                        assert_eq!(d.queues(i), copying.deltas().queues(i), "pass {n}");
                    }
                    seen = true;
                },
            );
            assert!(seen);
            assert_eq!(plan_l, plan_c, "pass {n}");
            assert_eq!(snap, snap_before, "pass {n}: the loop's sample");
            for (i, q) in queues_before.iter().enumerate() {
                assert_eq!(
                    observer.deltas().queues(i),
                    q.as_slice(),
                    "pass {n}: the loop's deltas"
                );
            }
            changes += plan_l
                .decisions
                .iter()
                .filter(|d| d.enforced_change().is_some())
                .count();
            copying.keep_previous(&mut copy, now);
            observer.keep(snap, now);
        }
        // Both bursty NICs grew, and again when their bursts did: passes
        // ran on modelled devices.
        assert!(changes >= 4, "{changes} changes");
        assert!(live.is_modelled("pci/0000:01:00.0/0c:42:a1:00:00:01"));
        assert!(!live.is_modelled("pci/0000:00:00.0/0c:42:a1:00:00:00"));
    }
}
