//! The counterfactual engine: a policy run on snapshots as if its own
//! changes had been made, its counters continued by a model of the recycle
//! ring where its ring differs from the one observed. `pptune replay
//! --against` runs it over a recording ([`crate::replay`]); the daemon's
//! shadow policy runs it on live samples. Nothing it decides reaches a
//! device: its changes are written into the snapshots it is given.
//!
//! The ring model (docs/recording.md, "Counterfactuals"): per pool and
//! interval, the observed counters give the excess pages per ring fill
//! relative to the pool, `x = recycle_ring_full / recycle_ring` (the same
//! fitted quantity as the engine's ring probe, in the counter's own units,
//! so the bulk-path undercount carries over); a burst is `1 + x` pools. A
//! pool scaled by `k = ring' / ring` frees `e' = max(0, 1 + x - k)` per
//! fill, so of the interval's returns `T = recycle_ring + recycle_ring_full`,
//! `ring_full' = T e' / (k + e')` and `recycle_ring' = T - ring_full'`.
//! Pages freed need refilling: `alloc_slow` moves by the change in frees /
//! 64 (one refill is up to 64 pages). Pool memory (`inflight`,
//! `inflight_mem`): the posted part moves with the ring, the pages out
//! beyond it (the load's, a high-water mark while the pool lives) stay
//! (`policy::engine::inflight_at_ring`). Queue-count changes are not modelled: the
//! device's counters stay as observed and its decisions are marked modelled.

use std::collections::BTreeMap;
use std::time::Duration;

use policy::Policy;
use policy::accounting::{PassDeltas, QueueKey};
use policy::engine::{ActionRecord, EngineState, Observation, Original, Outcome};
use policy::evaluate::{Applied, Evaluation, Verdict};
use policy::observation::{Backoff, LocalTime};
use policy::plan::{Decision, Knob, Plan};
use policy::snapshot::{Availability, Device, DeviceId, Pool, PoolStats, Snapshot};
use policy::window::Rates;

use crate::live::{Overlay, Slot};

/// The engine on one pass: `(previous, current, deltas)`, and the
/// history, originals and backoff it is to read.
#[allow(clippy::too_many_arguments)]
fn run_engine(
    engine: &mut policy::engine::Engine,
    state: &mut EngineState,
    policy: &Policy,
    (previous, current, deltas): (Option<&Snapshot>, &Snapshot, &PassDeltas),
    clock: PassClock,
    overrides: &[(DeviceId, Knob)],
    (history, originals, backoff): (&[ActionRecord], &[Original], &BTreeMap<String, Backoff>),
    plan: &mut Plan,
) {
    let obs = Observation {
        previous,
        current,
        deltas,
        elapsed: clock.elapsed,
        now: clock.now,
        local_time: clock.local_time,
        history,
        overrides,
        originals,
        backoff,
    };
    engine.decide_into(policy, state, &obs, plan);
}

/// A simulated change under evaluation.
#[derive(Debug)]
struct SimEval {
    ev: Evaluation,
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
    /// The snapshot the engine saw last pass (modelled where modelled).
    pub(crate) prev: Option<(Snapshot, Duration)>,
    /// The pass's pool deltas against `prev`, for the engine and the
    /// totals and series.
    pub(crate) deltas: PassDeltas,
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
    evals: Vec<SimEval>,
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
    #[allow(clippy::too_many_arguments)]
    pub fn live_pass(
        &mut self,
        policy: &Policy,
        (previous, snap, deltas): (Option<&Snapshot>, &mut Snapshot, &mut PassDeltas),
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
            let o = Overlay::new(&mut slots, (&mut *snap, deltas), |d, key, track, each| {
                self.model_device(d, key, track, each);
            });
            let (snap, deltas) = o.view();
            self.evaluate_due(policy, snap, clock.now);
            self.decide_observed(policy, (previous, snap, deltas), clock, overrides, plan);
            for dec in &plan.decisions {
                if dec.enforced_change().is_some() {
                    self.apply_on(policy, dec, (previous, snap, deltas), clock);
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
        (previous, snap, deltas): (Option<&Snapshot>, &Snapshot, &PassDeltas),
        clock: PassClock,
        overrides: &[(DeviceId, Knob)],
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
        let pass = (previous, snap, deltas);
        run_engine(engine, state, policy, pass, clock, overrides, inputs, plan);
    }

    /// The engine on `snap` into `plan`, the pass's deltas computed first.
    /// `recorded` replaces the counterfactual's own history, originals and
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
            prev,
            deltas,
            history,
            originals,
            ..
        } = self;
        let previous = prev.as_ref().map(|(s, _)| s);
        deltas.compute(previous, snap);
        let inputs = match recorded {
            Some((h, o, b)) => (h.as_slice(), o.as_slice(), b),
            None => (
                history.as_slice(),
                originals.as_slice(),
                &policy::engine::NO_BACKOFF,
            ),
        };
        let pass = (previous, snap, &*deltas);
        run_engine(engine, state, policy, pass, clock, overrides, inputs, plan);
    }

    /// Another process, another clock: the simulated history is moved
    /// like the daemon moves its own (state.rs rebase), and the simulated
    /// evaluations end.
    pub fn new_clock(&mut self) {
        let now = self.prev.as_ref().map_or(Duration::ZERO, |p| p.1);
        for a in &mut self.history {
            a.at = a.at.min(now);
        }
        self.evals.clear();
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
        &self.deltas
    }

    /// The snapshot of the last pass, as the engine saw it.
    #[must_use]
    pub fn previous(&self) -> Option<&Snapshot> {
        self.prev.as_ref().map(|(s, _)| s)
    }

    /// `snap` becomes the previous pass; its buffer is swapped with the
    /// pass before, which the next pass is decoded into.
    pub fn keep_previous(&mut self, snap: &mut Snapshot, now: Duration) {
        match &mut self.prev {
            Some((p, at)) => {
                std::mem::swap(p, snap);
                *at = now;
            }
            None => self.prev = Some((std::mem::take(snap), now)),
        }
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
        let (prev, deltas) = (self.prev.take(), std::mem::take(&mut self.deltas));
        let previous = prev.as_ref().map(|(p, _)| p);
        self.apply_on(policy, dec, (previous, snap, &deltas), clock);
        (self.prev, self.deltas) = (prev, deltas);
    }

    /// [`Self::apply`] on the pass `(previous, snap, deltas)`.
    fn apply_on(
        &mut self,
        policy: &Policy,
        dec: &Decision,
        (previous, snap, deltas): (Option<&Snapshot>, &Snapshot, &PassDeltas),
        clock: PassClock,
    ) {
        let Some((knob, from, to)) = dec.enforced_change() else {
            return;
        };
        let now = clock.now;
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
            Rates::over(a, b, &deltas.device(i), clock.elapsed)
        });
        if let Some(start) = dev {
            let applied = Applied {
                knob,
                from,
                to,
                reason: dec.reason,
            };
            self.evals.push(SimEval {
                ev: Evaluation::open(applied, baseline, start.clone(), now, policy),
            });
        }
    }

    /// Closes due simulated evaluations with the daemon's judgement.
    pub fn evaluate_due(&mut self, policy: &Policy, snap: &Snapshot, now: Duration) {
        let mut done = Vec::new();
        for (i, e) in self.evals.iter_mut().enumerate() {
            let Some(dev) = snap.devices.iter().find(|d| d.id.key() == e.ev.key) else {
                continue;
            };
            if let Some(verdict) = e.ev.advance(dev, now, policy) {
                done.push((i, verdict));
            }
        }
        for (i, verdict) in done.into_iter().rev() {
            let e = self.evals.remove(i).ev;
            let outcome = verdict.outcome();
            if matches!(verdict, Verdict::Harmful(_)) {
                self.knobs.insert((e.key.clone(), e.knob), e.from);
            }
            if let Some(a) = self
                .history
                .iter_mut()
                .rev()
                .find(|a| a.device.key() == e.key && a.knob == e.knob)
            {
                a.outcome = outcome;
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

/// How a modelled device's pools are continued: the ring scale `k` the
/// counters' model takes, and the driver and (recorded, replayed) rings
/// the pages in flight move by, when the rings differ.
struct PoolModel<'a> {
    k: f64,
    pages: Option<(&'a policy::drivers::DriverInfo, (u32, u32))>,
}

/// One pool of a device the counterfactual changed, in place: with a
/// `model` (the device is modelled) its pages in flight moved to the
/// replayed ring (`policy::engine::inflight_at_ring`: the posted part
/// scales, the pages out beyond it are the load's), its bytes in flight
/// with them, and its moved counters continued from `last` (the pool at
/// the last pass) by the ring model; without, as observed. What the pool
/// is now, and what the model changed in it.
fn model_pool(p: &mut Pool, model: Option<&PoolModel<'_>>, last: Option<&Tracked>) -> Tracked {
    let mut t = Tracked {
        inflight: p.inflight,
        inflight_mem: p.inflight_mem,
        change: Change::default(),
        ..last.copied().unwrap_or_else(|| Tracked::new(p.id))
    };
    if let Some((info, rings)) = model.and_then(|m| m.pages)
        && let Some(n) = p.inflight
    {
        let moved = policy::engine::inflight_at_ring(info, rings, n);
        p.inflight = Some(moved);
        // Bytes per page as observed.
        p.inflight_mem = p.inflight_mem.map(|b| match n {
            0 => b,
            _ => {
                u64::try_from(u128::from(b) * u128::from(moved) / u128::from(n)).unwrap_or(u64::MAX)
            }
        });
    }
    let k = model.map(|m| m.k);
    let Some(stats) = &mut p.stats else {
        // No counters this pass: the last ones stay the baseline (as the
        // pass's ledger keeps them).
        return t;
    };
    let now = Moved::of(stats);
    // The interval's observed movement; a pool new to the track, or one
    // whose moved counters went backwards, starts from zero.
    let (obs, modl) = match last.filter(|l| l.counted && now.at_least(&l.observed)) {
        Some(l) => (l.observed, l.modelled),
        None => (Moved::default(), Moved::default()),
    };
    let delta = now.minus(&obs);
    let modelled = modl.plus(&k.map_or(delta, |k| delta.ring_model(k)));
    modelled.write(stats);
    t.counted = true;
    // As the pass's ledger counts it: a pool it never saw with its whole
    // counters, one it saw without counters not at all, a reset not.
    let counted = last.is_none_or(|l| l.counted && now.at_least(&l.observed));
    t.change = Change {
        moved: modelled.minus(&modl).diff(&delta),
        counted,
    };
    (t.observed, t.modelled) = (now, modelled);
    t
}

/// The three counters of a pool the ring model moves (docs/recording.md,
/// "Counterfactuals"); a modelled pool's other counters are its observed
/// ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    ring: u64,
    ring_full: u64,
    slow: u64,
}

impl Moved {
    fn of(s: &PoolStats) -> Self {
        Self {
            ring: s.recycle_ring,
            ring_full: s.recycle_ring_full,
            slow: s.alloc_slow,
        }
    }

    pub(crate) fn write(&self, s: &mut PoolStats) {
        (s.recycle_ring, s.recycle_ring_full, s.alloc_slow) =
            (self.ring, self.ring_full, self.slow);
    }

    fn at_least(&self, o: &Self) -> bool {
        self.ring >= o.ring && self.ring_full >= o.ring_full && self.slow >= o.slow
    }

    fn minus(&self, o: &Self) -> Self {
        Self {
            ring: self.ring.saturating_sub(o.ring),
            ring_full: self.ring_full.saturating_sub(o.ring_full),
            slow: self.slow.saturating_sub(o.slow),
        }
    }

    fn plus(&self, o: &Self) -> Self {
        Self {
            ring: self.ring.saturating_add(o.ring),
            ring_full: self.ring_full.saturating_add(o.ring_full),
            slow: self.slow.saturating_add(o.slow),
        }
    }

    /// `self - o` per counter, wrapping: what adding it to `o` gives back
    /// `self`.
    fn diff(&self, o: &Self) -> Self {
        Self {
            ring: self.ring.wrapping_sub(o.ring),
            ring_full: self.ring_full.wrapping_sub(o.ring_full),
            slow: self.slow.wrapping_sub(o.slow),
        }
    }

    /// What adding gives back (wrapping): `x + d + d.negated() == x`.
    pub(crate) fn negated(&self) -> Self {
        Self {
            ring: self.ring.wrapping_neg(),
            ring_full: self.ring_full.wrapping_neg(),
            slow: self.slow.wrapping_neg(),
        }
    }

    /// Adds a [`Self::diff`] into `s`'s moved counters (wrapping).
    pub(crate) fn add_to(&self, s: &mut PoolStats) {
        s.recycle_ring = s.recycle_ring.wrapping_add(self.ring);
        s.recycle_ring_full = s.recycle_ring_full.wrapping_add(self.ring_full);
        s.alloc_slow = s.alloc_slow.wrapping_add(self.slow);
    }

    /// The ring model on one interval's movement (module docs).
    fn ring_model(&self, k: f64) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let (full, ring) = (self.ring_full as f64, self.ring as f64);
        let total = full + ring;
        if total <= 0.0 || (k - 1.0).abs() < f64::EPSILON {
            return *self;
        }
        let x = if ring > 0.0 { full / ring } else { 0.0 };
        let e = (1.0 + x - k).max(0.0);
        let full2 = total * e / (k + e);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let full2 = (full2 + 0.5) as u64;
        let freed_less = i128::from(self.ring_full) - i128::from(full2);
        let slow = i128::from(self.slow) - freed_less / 64;
        Self {
            ring: (self.ring + self.ring_full).saturating_sub(full2),
            ring_full: full2,
            slow: u64::try_from(slow.max(0)).unwrap_or(0),
        }
    }
}

/// What the model changed in one pool this pass, for a live pass to
/// move the loop's queue deltas by.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Change {
    /// Modelled minus observed movement of the moved counters (wrapping).
    pub(crate) moved: Moved,
    /// The pass's ledger counted the pool's delta (it had counters now and
    /// at its last pass, none went backwards): only then is its movement
    /// in the queue's delta.
    pub(crate) counted: bool,
}

/// One pool as the counterfactual last saw it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tracked {
    id: u64,
    /// Its pages and bytes in flight, as observed.
    pub(crate) inflight: Option<u64>,
    pub(crate) inflight_mem: Option<u64>,
    /// `observed` and `modelled` hold counters (of this pass or, without
    /// counters now, of the last one that had them).
    counted: bool,
    /// Its moved counters, as observed and as modelled.
    pub(crate) observed: Moved,
    modelled: Moved,
    /// What the model changed in it this pass.
    pub(crate) change: Change,
}

impl Tracked {
    /// A pool not seen before.
    fn new(id: u64) -> Self {
        Self {
            id,
            inflight: None,
            inflight_mem: None,
            counted: false,
            observed: Moved::default(),
            modelled: Moved::default(),
            change: Change::default(),
        }
    }
}

/// The pools of one device the counterfactual changed a knob of, as of the
/// last pass, in the model's order ([`pools_mut`]): a sample lists a
/// device's pools in the same order pass after pass, so each is found at
/// its position, without a map.
#[derive(Debug, Default, Clone)]
pub(crate) struct Track {
    pools: Vec<Tracked>,
    /// The next pass's `pools`, built in the buffer the pass before last
    /// used.
    next: Vec<Tracked>,
    /// The copying pass that last had the device.
    seen: u64,
}

impl Track {
    /// `d` as observed: the baseline the model continues from.
    pub(crate) fn of_device(d: &Device) -> Self {
        let mut t = Self::default();
        t.observe(d);
        t
    }

    /// The observed counters become `d`'s (pools it no longer has are
    /// forgotten, the modelled counters of the others kept).
    pub(crate) fn observe(&mut self, d: &Device) {
        let mut next = std::mem::take(&mut self.next);
        next.clear();
        for (i, p) in d.pools().enumerate() {
            let mut t = self
                .find(i, p.id)
                .copied()
                .unwrap_or_else(|| Tracked::new(p.id));
            if let Some(s) = &p.stats {
                let now = Moved::of(s);
                if !t.counted {
                    t.modelled = now;
                }
                (t.observed, t.counted) = (now, true);
            }
            next.push(t);
        }
        self.next = std::mem::replace(&mut self.pools, next);
    }

    /// The pools as of this pass, in the model's order.
    pub(crate) fn pools(&self) -> &[Tracked] {
        &self.pools
    }

    /// Pool `id`, looked for at position `at` first.
    fn find(&self, at: usize, id: u64) -> Option<&Tracked> {
        match self.pools.get(at) {
            Some(t) if t.id == id => Some(t),
            _ => self.pools.iter().find(|t| t.id == id),
        }
    }

    /// Nothing of the device is known any more (it went away: what it
    /// counted before is no baseline for a return).
    pub(crate) fn forget(&mut self) {
        self.pools.clear();
    }
}

/// The ring model on one interval's counters of one pool (module docs):
/// the moved counters modelled, the others as given.
#[must_use]
pub fn model_delta(d: &PoolStats, k: f64) -> PoolStats {
    let mut out = *d;
    Moved::of(d).ring_model(k).write(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_model_keeps_returns_and_frees_less_with_a_bigger_pool() {
        let d = PoolStats {
            recycle_ring: 1000,
            recycle_ring_full: 500,
            alloc_slow: 100,
            alloc_fast: 9000,
            recycle_cached: 7000,
            ..PoolStats::default()
        };
        assert_eq!(model_delta(&d, 1.0), d);
        // x = 0.5: a burst is 1.5 pools; a pool twice as big frees nothing.
        let big = model_delta(&d, 2.0);
        assert_eq!(big.recycle_ring_full, 0);
        assert_eq!(big.recycle_ring, 1500);
        assert!(big.alloc_slow < d.alloc_slow);
        // The counters the ring does not move stay as observed.
        assert_eq!((big.alloc_fast, big.recycle_cached), (9000, 7000));
        // Half the pool: e' = 1.0, ring_full' = 1500 * 1 / 1.5 = 1000.
        let small = model_delta(&d, 0.5);
        assert_eq!(small.recycle_ring_full, 1000);
        assert_eq!(small.recycle_ring + small.recycle_ring_full, 1500);
    }

    /// A pool's pages in flight at a counterfactual ring: the posted
    /// buffers move with the ring, the 600 pages out beyond them (the
    /// load's high-water mark) stay; the bytes follow the pages. Scaling
    /// the whole mark by the ring modelled ice's 8160 → 768 step holding
    /// 824 pages, fewer than its posted ring and the load's 600 together.
    #[test]
    fn a_modelled_ring_keeps_the_pages_out_beyond_its_posted_buffers() {
        let d = policy::fixtures::nic("ice", 8160, 8160, 1);
        let info = policy::drivers::driver_info(&d);
        let model = PoolModel {
            k: 768.0 / 8160.0,
            pages: Some((&info, (8160, 768))),
        };
        let mut p = Pool {
            id: 1,
            inflight: Some(8160 + 600),
            inflight_mem: Some((8160 + 600) * 4096),
            ..Pool::default()
        };
        let t = model_pool(&mut p, Some(&model), None);
        assert_eq!(
            (p.inflight, p.inflight_mem),
            (Some(768 + 600), Some((768 + 600) * 4096))
        );
        // The track keeps what was observed.
        assert_eq!(t.inflight, Some(8160 + 600));
        // Not modelled (no ring change): as observed.
        let same = PoolModel {
            k: 1.0,
            pages: None,
        };
        let mut q = Pool {
            inflight: Some(8760),
            inflight_mem: Some(8760 * 4096),
            ..Pool::default()
        };
        let _ = model_pool(&mut q, Some(&same), None);
        assert_eq!(q.inflight, Some(8760));
    }
}
