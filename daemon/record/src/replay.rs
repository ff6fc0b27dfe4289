//! `pptune replay`: the engine (`policy::engine::decide`, the same pure
//! function the daemon calls) run over a recording.
//!
//! - **Faithful**: where the replayed policy is the one the recording was
//!   made under, the engine gets exactly what the daemon's engine got (its
//!   memory at each segment start, the history, overrides, originals,
//!   backoff and clocks of each pass), so its decisions are the daemon's;
//!   each is compared with the recorded one.
//! - **Counterfactual**: under another policy, the replay keeps its own
//!   history and, once its ring differs from the recorded one, the
//!   recorded counters no longer describe the device: they are continued
//!   by a model of the recycle ring (below) and every decision on that
//!   device is marked *modelled*. Nothing modelled is presented as observed.
//!
//! The ring model (docs/recording.md, "Counterfactuals"): per pool and
//! interval, the recorded counters give the excess pages per ring fill
//! relative to the pool, `x = recycle_ring_full / recycle_ring` (the same
//! fitted quantity as the engine's ring probe, in the counter's own units,
//! so the bulk-path undercount carries over); a burst is `1 + x` pools. A
//! pool scaled by `k = ring' / ring` frees `e' = max(0, 1 + x - k)` per
//! fill, so of the interval's returns `T = recycle_ring + recycle_ring_full`,
//! `ring_full' = T e' / (k + e')` and `recycle_ring' = T - ring_full'`.
//! Pages freed need refilling: `alloc_slow` moves by the change in frees /
//! 64 (one refill is up to 64 pages). Pool memory (`inflight`,
//! `inflight_mem`) scales by `k`. Queue-count changes are not modelled: the
//! device's counters stay as recorded and its decisions are marked modelled.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use policy::accounting::PassDeltas;
use policy::engine::{ActionRecord, EngineState, Observation, Original, Outcome};
use policy::evaluate::{Applied, Evaluation, Rates, Verdict};
use policy::plan::{Action, Decision, Knob, ReasonCode};
use policy::snapshot::{Availability, Device, PoolStats, Snapshot};
use policy::{Mode, Policy};
use serde::Serialize;

use crate::format::{Pass, Start, local_time};
use crate::{Next, RecordError, Recording};

/// Whether a decision rests on recorded counters or on the ring model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    Observed,
    Modelled,
}

/// One replayed decision that changes something.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub unix_ms: u64,
    pub basis: Basis,
    #[serde(flatten)]
    pub decision: Decision,
    /// What the daemon decided in the same pass (faithful replay).
    pub recorded: Option<RecordedDecision>,
}

/// The daemon's decision in the recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedDecision {
    pub id: String,
    pub action: Action,
    pub reason: String,
}

/// Per device, over the whole replay.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceSummary {
    /// Changes the replayed policy made (enforce mode) or recommended.
    pub changes: u32,
    pub first_ring: Option<u32>,
    pub final_ring: Option<u32>,
    pub final_channels: Option<u32>,
    /// Pool memory at the end (sum of `inflight_mem`), bytes.
    pub pool_bytes: u64,
    /// Recycle-miss share over the replay (modelled where marked).
    pub recycle_miss_share: Option<f64>,
    /// Whether any of it is modelled.
    pub modelled: bool,
    /// First change's recommendation id.
    pub first_recommendation: Option<String>,
}

impl DeviceSummary {
    /// What a pass shows of the device: its ring, channels and pool memory
    /// (the first ring kept), and whether the replay modelled it.
    fn saw(&mut self, live: Option<&policy::snapshot::Device>, modelled: bool) {
        if let Some(d) = live {
            let ring = d.rings.available().and_then(|r| r.rx);
            if self.first_ring.is_none() {
                self.first_ring = ring;
            }
            self.final_ring = ring;
            self.final_channels = d
                .channels
                .available()
                .map(policy::snapshot::Channels::rx_queues);
            self.pool_bytes = d.pools().filter_map(|p| p.inflight_mem).sum();
        }
        self.modelled |= modelled;
    }
}

/// What of a replay is reported: the passes from `since_ms` to `until_ms`
/// (wall clock, inclusive) and the named devices (every device when
/// empty). The engine still runs over every pass before the window, so a
/// decision inside it is the one the whole recording leads to; reading
/// stops at the first pass after `until_ms`.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub since_ms: Option<u64>,
    pub until_ms: Option<u64>,
    pub interfaces: Vec<String>,
    /// Keep one [`Point`] per pass and device ([`Report::series`]).
    pub series: bool,
}

impl Selection {
    fn before(&self, unix_ms: u64) -> bool {
        self.since_ms.is_some_and(|s| unix_ms < s)
    }

    fn after(&self, unix_ms: u64) -> bool {
        self.until_ms.is_some_and(|u| unix_ms > u)
    }

    fn device(&self, name: &str) -> bool {
        self.interfaces.is_empty() || self.interfaces.iter().any(|i| i == name)
    }
}

/// One device in one pass of the replay: what the engine saw and decided.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The pass's number in the recording (0 is the first pass read), the
    /// key that pairs the points of two replays of the same recording.
    pub pass: u64,
    pub unix_ms: u64,
    pub device: String,
    /// The RX ring in effect in the pass (the replayed one where the
    /// replay changed it).
    pub ring_rx: Option<u32>,
    pub rx_queues: Option<u32>,
    /// The pass's decision on the device when it changes something.
    pub action: Option<Action>,
    pub reason: Option<ReasonCode>,
    /// Over the interval before the pass (`policy::signals`), `None`
    /// without traffic or when a counter went backwards.
    pub recycle_miss_share: Option<f64>,
    pub slow_refill_share: Option<f64>,
    pub basis: Basis,
}

/// The outcome of a replay.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Passes read from the recording (up to the selection's end).
    pub passes_read: u64,
    /// Passes in the selection: the figures below are of these.
    pub passes: u64,
    pub first_unix_ms: Option<u64>,
    pub last_unix_ms: Option<u64>,
    /// Passes replayed with the recording's own policy and inputs.
    pub faithful_passes: u64,
    /// Of those, passes whose decisions equal the recorded ones (ids,
    /// actions, reasons, modes).
    pub identical_passes: u64,
    pub decisions: Vec<Row>,
    pub devices: BTreeMap<String, DeviceSummary>,
    pub warnings: Vec<String>,
    /// Per pass and device, when the selection asks for it (not part of
    /// the summary's JSON: `replay --series` writes it).
    #[serde(skip)]
    pub series: Vec<Point>,
}

/// A simulated change under evaluation (counterfactual).
#[derive(Debug)]
struct SimEval {
    ev: Evaluation,
}

/// The replay's engine and what it carries between passes.
#[derive(Debug)]
struct Replayer<'p> {
    policy: &'p Policy,
    selection: &'p Selection,
    policy_json: Option<String>,
    state: EngineState,
    engine: policy::engine::Engine,
    /// The snapshot the engine saw last pass (modelled where modelled).
    prev: Option<(Snapshot, Duration)>,
    /// The pass's pool deltas against `prev`, for the engine and the
    /// totals and series.
    deltas: PassDeltas,
    /// The recorded counters of this pass and the previous one, by pool
    /// id, of the devices the replay changed a knob of (the model's input).
    obs_now: HashMap<u64, PoolStats>,
    obs_prev: HashMap<u64, PoolStats>,
    faithful: bool,
    run: Option<u64>,
    // Counterfactual memory:
    history: Vec<ActionRecord>,
    originals: Vec<Original>,
    /// Replayed knob values, by device key.
    knobs: BTreeMap<(String, Knob), u32>,
    /// Modelled cumulative counters per pool id.
    model: HashMap<u64, PoolStats>,
    diverged: BTreeMap<String, bool>,
    evals: Vec<SimEval>,
    totals: BTreeMap<String, PoolStats>,
}

/// Replays `path` under `policy`, every pass and device reported.
///
/// # Errors
/// The recording cannot be opened.
pub fn replay(path: &Path, policy: &Policy) -> Result<Report, RecordError> {
    replay_selected(path, policy, &Selection::default())
}

/// Replays `path` under `policy`; what is reported is `selection`.
///
/// # Errors
/// The recording cannot be opened.
pub fn replay_selected(
    path: &Path,
    policy: &Policy,
    selection: &Selection,
) -> Result<Report, RecordError> {
    let mut rec = Recording::open(path)?;
    let mut r = Replayer {
        policy,
        selection,
        policy_json: serde_json::to_string(policy).ok(),
        state: EngineState::default(),
        engine: policy::engine::Engine::default(),
        prev: None,
        deltas: PassDeltas::default(),
        obs_now: HashMap::new(),
        obs_prev: HashMap::new(),
        faithful: false,
        run: None,
        history: Vec::new(),
        originals: Vec::new(),
        knobs: BTreeMap::new(),
        model: HashMap::new(),
        diverged: BTreeMap::new(),
        evals: Vec::new(),
        totals: BTreeMap::new(),
    };
    let mut report = Report::default();
    // Each pass is decoded into the buffer the pass before last used.
    let mut buf = Snapshot::default();
    while let Some(item) = rec.next_into(&mut buf) {
        match item {
            Next::Start { start, previous } => r.start(&start, previous),
            Next::Pass(pass) if selection.after(pass.unix_ms) => break,
            Next::Pass(pass) => r.pass(&pass, &mut buf, &mut report),
        }
    }
    for (key, s) in &r.totals {
        if let Some(d) = report.devices.get_mut(key) {
            d.recycle_miss_share = policy::signals::recycle_miss_share(s);
        }
    }
    report.warnings = rec.warnings;
    Ok(report)
}

impl Replayer<'_> {
    fn start(&mut self, start: &Start, previous: Option<(Snapshot, Duration)>) {
        let new_run = self.run != Some(start.run);
        self.run = Some(start.run);
        let faithful = start.policy.is_some() && start.policy == self.policy_json;
        // The daemon's memory at the segment start: taken over when this is
        // the recorded policy (that is what the daemon's engine had), or
        // when nothing earlier was replayed.
        let first = self.prev.is_none() && self.state.devices.is_empty();
        if faithful || first {
            if let Some(blob) = &start.engine
                && blob.version == policy::engine::ENGINE_STATE_VERSION
                && let Ok(s) = serde_json::from_str::<EngineState>(&blob.json)
            {
                self.state = s;
            } else if faithful {
                self.state = EngineState::default();
            }
        }
        if faithful || new_run || self.prev.is_none() {
            self.obs_now = previous
                .iter()
                .flat_map(|(s, _)| s.devices.iter())
                .flat_map(Device::pools)
                .filter_map(|p| Some((p.id, p.stats?)))
                .collect();
            self.prev = previous;
        }
        if new_run && !faithful {
            // Another process, another clock: the simulated history is
            // moved like the daemon moves its own (state.rs rebase).
            let now = self.prev.as_ref().map_or(Duration::ZERO, |p| p.1);
            for a in &mut self.history {
                a.at = a.at.min(now);
            }
            self.evals.clear();
        }
        self.faithful = faithful;
    }

    /// One pass; `snap` holds the recorded snapshot and is left holding
    /// the one before it (a buffer to decode the next pass into).
    fn pass(&mut self, pass: &Pass, snap: &mut Snapshot, report: &mut Report) {
        report.passes_read += 1;
        if !self.selection.before(pass.unix_ms) {
            report.passes += 1;
            report.first_unix_ms.get_or_insert(pass.unix_ms);
            report.last_unix_ms = Some(pass.unix_ms);
        }
        let now = Duration::from_nanos(pass.now_ns);
        self.remember_observed(snap);
        if !self.faithful {
            self.modelled(snap);
            self.evaluate_due(snap, now);
        }
        self.decide_pass(pass, snap, report);
        self.keep_previous(snap, now);
    }

    /// The engine on one pass, the report and the simulated changes.
    fn decide_pass(&mut self, pass: &Pass, snap: &Snapshot, report: &mut Report) {
        let now = Duration::from_nanos(pass.now_ns);
        let elapsed = Duration::from_nanos(pass.elapsed_ns);
        let (history, originals, backoff) = if self.faithful {
            pass.inputs.engine_inputs()
        } else {
            (
                self.history.clone(),
                self.originals.clone(),
                BTreeMap::new(),
            )
        };
        let overrides = pass.inputs.overrides.clone();
        self.deltas
            .compute(self.prev.as_ref().map(|(s, _)| s), snap);
        let obs = Observation {
            previous: self.prev.as_ref().map(|(s, _)| s),
            current: snap,
            deltas: &self.deltas,
            elapsed,
            now,
            local_time: local_time(pass.local_time),
            history: &history,
            overrides: &overrides,
            originals: &originals,
            backoff: &backoff,
        };
        let mut plan = policy::plan::Plan::default();
        self.engine
            .decide_into(self.policy, &mut self.state, &obs, &mut plan);
        let sel = self.selection;
        let reported = !sel.before(pass.unix_ms);
        if self.faithful && reported {
            report.faithful_passes += 1;
            if same_decisions(&plan, pass, sel) {
                report.identical_passes += 1;
            }
        }
        let deltas = match &self.prev {
            Some((p, _)) if reported => device_deltas(p, snap, &self.deltas, sel),
            _ => Vec::new(),
        };
        for (name, delta) in &deltas {
            if !delta.reset {
                let t = self.totals.entry((*name).to_owned()).or_default();
                *t = t.add(&delta.stats);
            }
        }
        for dec in &plan.decisions {
            if !reported || !sel.device(&dec.device) {
                if !self.faithful && dec.mode == Mode::Enforce && dec.action != Action::Hold {
                    self.apply(dec, snap, now, elapsed);
                }
                continue;
            }
            let key = dec.device_id.key();
            let modelled = !self.faithful && self.diverged.get(&key).copied().unwrap_or(false);
            let live = snap.devices.iter().find(|d| d.ifindex == dec.ifindex);
            if sel.series {
                report.series.push(point(
                    pass,
                    report.passes_read - 1,
                    dec,
                    live,
                    &deltas,
                    modelled,
                ));
            }
            let dev = report.devices.entry(dec.device.clone()).or_default();
            dev.saw(live, modelled);
            if dec.action == Action::Hold {
                continue;
            }
            dev.changes += 1;
            dev.first_recommendation
                .get_or_insert_with(|| dec.id.to_string());
            let recorded = pass
                .decisions
                .iter()
                .find(|r| r.device_id == dec.device_id)
                .map(|r| RecordedDecision {
                    id: r.id.clone(),
                    action: r.action,
                    reason: r.reason.clone(),
                });
            report.decisions.push(Row {
                unix_ms: pass.unix_ms,
                basis: if modelled {
                    Basis::Modelled
                } else {
                    Basis::Observed
                },
                decision: dec.clone(),
                recorded,
            });
            if !self.faithful && dec.mode == Mode::Enforce {
                self.apply(dec, snap, now, elapsed);
            }
        }
    }

    /// `snap` becomes the previous pass; its buffer is swapped with the
    /// pass before, which the next pass is decoded into.
    fn keep_previous(&mut self, snap: &mut Snapshot, now: Duration) {
        match &mut self.prev {
            Some((p, at)) => {
                std::mem::swap(p, snap);
                *at = now;
            }
            None => self.prev = Some((std::mem::take(snap), now)),
        }
    }

    /// A simulated change: the knob takes the target, an evaluation opens.
    fn apply(&mut self, dec: &Decision, snap: &Snapshot, now: Duration, elapsed: Duration) {
        let (Some(knob), Action::SetRing { from, to, .. } | Action::SetChannels { from, to, .. }) =
            (dec.action.knob(), dec.action)
        else {
            return;
        };
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
        self.knobs.insert((key.clone(), knob), to);
        // The model continues from the recorded counters of this pass (a
        // device not modelled yet shows them as recorded).
        if let Some(d) = snap.devices.iter().find(|d| d.id == dec.device_id) {
            for p in d.pools() {
                if let Some(s) = p.stats {
                    self.obs_now.entry(p.id).or_insert(s);
                }
            }
        }
        self.history.push(ActionRecord {
            device: dec.device_id.clone(),
            knob,
            from,
            to,
            at: now,
            outcome: Outcome::Pending,
        });
        let baseline = self.prev.as_ref().and_then(|(p, _)| {
            let a = p.devices.iter().find(|d| d.id == dec.device_id)?;
            let b = snap.devices.iter().find(|d| d.id == dec.device_id)?;
            Rates::between(a, b, elapsed)
        });
        if let Some(start) = snap.devices.iter().find(|d| d.id == dec.device_id) {
            let applied = Applied {
                knob,
                from,
                to,
                reason: dec.reason,
            };
            self.evals.push(SimEval {
                ev: Evaluation::open(applied, baseline, start.clone(), now, self.policy),
            });
        }
    }

    /// Closes due simulated evaluations with the daemon's judgement.
    fn evaluate_due(&mut self, snap: &Snapshot, now: Duration) {
        let mut done = Vec::new();
        for (i, e) in self.evals.iter_mut().enumerate() {
            let Some(dev) = snap.devices.iter().find(|d| d.id.key() == e.ev.key) else {
                continue;
            };
            if let Some(verdict) = e.ev.advance(dev, now, self.policy) {
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

    /// Keeps this pass's recorded counters of the devices the replay
    /// changed a knob of (the model's next input); the previous pass's move
    /// to `obs_prev`.
    fn remember_observed(&mut self, snap: &Snapshot) {
        std::mem::swap(&mut self.obs_prev, &mut self.obs_now);
        self.obs_now.clear();
        if !self.knobs.is_empty() {
            for d in &snap.devices {
                let key = d.id.key();
                if self.knobs.keys().any(|(k, _)| k == &key) {
                    self.obs_now
                        .extend(d.pools().filter_map(|p| Some((p.id, p.stats?))));
                }
            }
        }
    }

    /// The recorded snapshot, in place, with the replay's knob values,
    /// counters continued by the ring model where the ring differs.
    fn modelled(&mut self, snap: &mut Snapshot) {
        let mut next_model = HashMap::new();
        for d in &mut snap.devices {
            if self.knobs.is_empty() {
                // Nothing changed by the replay: all as recorded.
                break;
            }
            let key = d.id.key();
            let ring_k = self.ring_factor(d, &key);
            let chan = self.knobs.iter().find_map(|((k, knob), v)| {
                (k == &key && matches!(knob, Knob::Channels(_))).then_some((*knob, *v))
            });
            if let Some((knob, v)) = chan
                && policy::knobs::desc(knob).write(d, v)
            {
                self.diverged.insert(key.clone(), true);
            }
            if ring_k.is_some() {
                self.diverged.insert(key.clone(), true);
            }
            // A modelled device stays modelled: with the same ring again its
            // deltas are as observed, on the modelled base.
            if self.diverged.get(&key).copied().unwrap_or(false) {
                let k = ring_k.unwrap_or(1.0);
                for p in d
                    .rx_queues
                    .iter_mut()
                    .flat_map(|q| q.pools.iter_mut())
                    .chain(d.unmapped_pools.iter_mut())
                {
                    self.model_pool(p, k, &mut next_model);
                }
            }
        }
        self.model = next_model;
    }

    /// Sets the replay's ring on `d`; the pool scale `ring' / ring` when
    /// it differs from the recorded one.
    fn ring_factor(&self, d: &mut Device, key: &str) -> Option<f64> {
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
                factor = Some(f64::from(v) / f64::from(rec));
            }
            k.set_in_rings(r, v);
        }
        factor
    }

    fn model_pool(
        &self,
        p: &mut policy::snapshot::Pool,
        k: f64,
        next: &mut HashMap<u64, PoolStats>,
    ) {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let scale = |v: u64, k: f64| (v as f64 * k).round() as u64;
        p.inflight = p.inflight.map(|v| scale(v, k));
        p.inflight_mem = p.inflight_mem.map(|v| scale(v, k));
        let Some(cur) = p.stats else {
            return;
        };
        let prev_obs = self.obs_prev.get(&p.id).copied();
        let delta = prev_obs.and_then(|b| cur.delta(&b)).unwrap_or(cur);
        let base = self.model.get(&p.id).copied().or(prev_obs);
        let d = model_delta(&delta, k);
        let out = match base {
            Some(b) => b.add(&d),
            None => d,
        };
        next.insert(p.id, out);
        p.stats = Some(out);
    }
}

/// The ring model on one interval's counters of one pool (module docs).
#[must_use]
pub fn model_delta(d: &PoolStats, k: f64) -> PoolStats {
    #[allow(clippy::cast_precision_loss)]
    let (full, ring) = (d.recycle_ring_full as f64, d.recycle_ring as f64);
    let total = full + ring;
    if total <= 0.0 || (k - 1.0).abs() < f64::EPSILON {
        return *d;
    }
    let x = if ring > 0.0 { full / ring } else { 0.0 };
    let e = (1.0 + x - k).max(0.0);
    let full2 = total * e / (k + e);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let full2 = full2.round().max(0.0) as u64;
    let mut out = *d;
    out.recycle_ring_full = full2;
    out.recycle_ring = (d.recycle_ring + d.recycle_ring_full).saturating_sub(full2);
    let freed_less = i128::from(d.recycle_ring_full) - i128::from(full2);
    let slow = i128::from(d.alloc_slow) - freed_less / 64;
    out.alloc_slow = u64::try_from(slow.max(0)).unwrap_or(0);
    out
}

/// Whether the engine decided as the recording says it did, for the
/// selected devices, in the order both keep.
fn same_decisions(plan: &policy::plan::Plan, pass: &Pass, sel: &Selection) -> bool {
    let ours = plan.decisions.iter().filter(|d| sel.device(&d.device));
    let theirs = pass.decisions.iter().filter(|d| sel.device(&d.device));
    ours.clone().count() == theirs.clone().count()
        && ours.zip(theirs).all(|(a, b)| {
            a.id.0 == b.id
                && a.action == b.action
                && a.reason.as_str() == b.reason
                && a.mode == b.mode
        })
}

/// Each selected device's counters over the interval, from the pass's
/// deltas the engine read: the totals' and the series' one source. A
/// device new in this pass has no interval yet.
fn device_deltas<'s>(
    prev: &Snapshot,
    snap: &'s Snapshot,
    deltas: &PassDeltas,
    sel: &Selection,
) -> Vec<(&'s str, policy::accounting::QueueDelta)> {
    snap.devices
        .iter()
        .enumerate()
        .filter(|(_, d)| sel.device(&d.name) && prev.devices.iter().any(|x| x.id == d.id))
        .map(|(at, d)| (d.name.as_str(), deltas.device(at)))
        .collect()
}

/// One device's row of the per-pass series.
fn point(
    pass: &Pass,
    index: u64,
    dec: &policy::plan::Decision,
    live: Option<&policy::snapshot::Device>,
    deltas: &[(&str, policy::accounting::QueueDelta)],
    modelled: bool,
) -> Point {
    let delta = deltas
        .iter()
        .find(|(n, _)| *n == dec.device)
        .map(|(_, d)| d)
        .filter(|d| !d.reset);
    Point {
        pass: index,
        unix_ms: pass.unix_ms,
        device: dec.device.clone(),
        ring_rx: live.and_then(|d| d.rings.available()).and_then(|r| r.rx),
        rx_queues: live
            .and_then(|d| d.channels.available())
            .map(policy::snapshot::Channels::rx_queues),
        action: (dec.action != Action::Hold).then_some(dec.action),
        reason: (dec.action != Action::Hold).then_some(dec.reason),
        recycle_miss_share: delta.and_then(|d| policy::signals::recycle_miss_share(&d.stats)),
        slow_refill_share: delta
            .and_then(|d| policy::signals::slow_refill_share(&d.stats, d.provider)),
        basis: if modelled {
            Basis::Modelled
        } else {
            Basis::Observed
        },
    }
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
            ..PoolStats::default()
        };
        assert_eq!(model_delta(&d, 1.0), d);
        // x = 0.5: a burst is 1.5 pools; a pool twice as big frees nothing.
        let big = model_delta(&d, 2.0);
        assert_eq!(big.recycle_ring_full, 0);
        assert_eq!(big.recycle_ring, 1500);
        assert!(big.alloc_slow < d.alloc_slow);
        // Half the pool: e' = 1.0, ring_full' = 1500 * 1 / 1.5 = 1000.
        let small = model_delta(&d, 0.5);
        assert_eq!(small.recycle_ring_full, 1000);
        assert_eq!(small.recycle_ring + small.recycle_ring_full, 1500);
    }
}
