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
//! The ring model is [`crate::counterfactual`]'s.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use policy::Policy;
use policy::accounting::PassDeltas;
use policy::engine::EngineState;
use policy::plan::{Action, Decision, ReasonCode};
use policy::snapshot::{PoolStats, Snapshot};
use serde::Serialize;

use crate::counterfactual::{Counterfactual, PassClock};
use crate::format::{Pass, Start, local_time};
pub use crate::model::model_delta;
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

/// The replay's engine and what it carries between passes.
#[derive(Debug)]
struct Replayer<'p> {
    policy: &'p Policy,
    selection: &'p Selection,
    policy_json: Option<String>,
    /// The engine, its memory and the counterfactual's changes.
    cf: Counterfactual,
    faithful: bool,
    run: Option<u64>,
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
        cf: Counterfactual::default(),
        faithful: false,
        run: None,
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
        let first = self.cf.previous().is_none() && self.cf.state.devices.is_empty();
        if faithful || first {
            if let Some(blob) = &start.engine
                && blob.version == policy::engine::ENGINE_STATE_VERSION
                && let Ok(s) = serde_json::from_str::<EngineState>(&blob.json)
            {
                self.cf.state = s;
            } else if faithful {
                self.cf.state = EngineState::default();
            }
        }
        if faithful || new_run || self.cf.previous().is_none() {
            if let Some((p, _)) = &previous {
                self.cf.remember_observed(p);
            }
            self.cf.restart(previous);
        }
        if new_run && !faithful {
            self.cf.new_clock();
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
        if self.faithful {
            self.cf.remember_observed(snap);
        } else {
            self.cf.model_pass(self.policy, snap, now);
        }
        self.decide_pass(pass, snap, report);
        self.cf.keep_previous(snap, now);
    }

    /// The engine on one pass, the report and the simulated changes.
    fn decide_pass(&mut self, pass: &Pass, snap: &Snapshot, report: &mut Report) {
        let now = Duration::from_nanos(pass.now_ns);
        let elapsed = Duration::from_nanos(pass.elapsed_ns);
        let clock = PassClock {
            now,
            elapsed,
            local_time: local_time(pass.local_time),
        };
        let recorded = self.faithful.then(|| pass.inputs.engine_inputs());
        let mut plan = policy::plan::Plan::default();
        self.cf.decide(
            self.policy,
            snap,
            clock,
            &pass.inputs.overrides,
            recorded.as_ref(),
            &mut plan,
        );
        let sel = self.selection;
        let reported = !sel.before(pass.unix_ms);
        if self.faithful && reported {
            report.faithful_passes += 1;
            if same_decisions(&plan, pass, sel) {
                report.identical_passes += 1;
            }
        }
        let deltas = match self.cf.previous() {
            Some(p) if reported => device_deltas(p, snap, self.cf.deltas(), sel),
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
                if !self.faithful {
                    self.cf.apply(self.policy, dec, snap, clock);
                }
                continue;
            }
            let key = dec.device_id.key();
            let modelled = !self.faithful && self.cf.is_modelled(&key);
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
            if !self.faithful {
                self.cf.apply(self.policy, dec, snap, clock);
            }
        }
    }
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
