//! The service loop: sample, keep the device map current from
//! notifications, feed the engine, log and export, and (in enforce mode)
//! act through the actuator.
//!
//! Generic over [`Kernel`] so the loop logic is tested against a fake; the
//! binary hands it the netlink implementation.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use policy::engine::{ActionRecord, LocalTime, Observation, Original};
use policy::plan::{Action, Decision, Knob, Plan};
use policy::snapshot::{Device, DeviceId, Snapshot};
use policy::{Mode, OnStop, Policy};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::control::{self, DaemonView, RestoreRequest};
use crate::kernel::{Kernel, KernelEvent, SampleScope};
use crate::logging::DecisionLog;
use crate::metrics::Metrics;
use crate::notify::Notifier;
use crate::rollout;
use crate::state::{StateFile, StateStore};

/// The decision engine as the loop uses it. The production implementation
/// is the policy crate's pure `decide` with its state carried here; tests of
/// loop mechanics may script plans.
pub trait Engine: Send {
    fn decide(&mut self, policy: &Policy, obs: &Observation<'_>) -> Plan;
    /// Forget accumulated windows (after a reload).
    fn reset(&mut self);
    /// The memory to persist in the state file (`None`: nothing to keep).
    fn saved_state(&self) -> Option<policy::engine::EngineState> {
        None
    }
    /// Takes over the memory a previous run persisted.
    fn restore_state(&mut self, _state: policy::engine::EngineState) {}
}

/// The policy crate's pure engine, with its state carried between ticks.
#[derive(Debug, Default)]
pub struct PolicyEngine {
    pub state: policy::engine::EngineState,
}

impl Engine for PolicyEngine {
    fn decide(&mut self, policy: &Policy, obs: &Observation<'_>) -> Plan {
        let (plan, next) = policy::engine::decide(policy, &self.state, obs);
        self.state = next;
        plan
    }

    fn reset(&mut self) {
        self.state = policy::engine::EngineState::default();
    }

    fn saved_state(&self) -> Option<policy::engine::EngineState> {
        Some(self.state.clone())
    }

    fn restore_state(&mut self, state: policy::engine::EngineState) {
        self.state = state;
    }
}

/// Where the policy comes from, re-read on SIGHUP.
pub trait PolicySource: Send {
    /// The validated policy, or every problem rendered for a person.
    fn load(&self) -> Result<Policy, String>;
}

/// Everything the loop needs besides the kernel, the engine and the policy.
#[derive(Debug)]
pub struct Options {
    pub notifier: Notifier,
    /// The locked state record; `None` runs without one (tests of pure
    /// loop logic).
    pub store: Option<StateStore>,
    /// Host identity for the rollout.
    pub host_id: rollout::HostId,
    /// Control socket to bind, if any.
    pub control_socket: Option<PathBuf>,
    pub metrics: Arc<Metrics>,
    /// One message per SIGHUP.
    pub reload: mpsc::UnboundedReceiver<()>,
    /// First backoff after a failure; doubles per failure up to an hour.
    pub backoff_base: Duration,
    /// Where other owners of the knobs (systemd `.link`, NetworkManager,
    /// TuneD) keep their files.
    pub coexist: crate::coexist::Roots,
    /// The state directory for the recording and the change journal
    /// (docs/recording.md); `None` keeps neither.
    pub recording: Option<PathBuf>,
}

/// Why the loop stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the kernel's notification sockets closed")]
    EventsClosed,
    #[error(transparent)]
    Control(#[from] control::ControlError),
    #[error("the state record cannot be kept")]
    State(#[from] crate::state::StateError),
}

/// The daemon's state between ticks.
pub(crate) struct Daemon<K: Kernel, E: Engine> {
    pub kernel: Arc<K>,
    pub engine: E,
    pub policy: Policy,
    pub source: Box<dyn PolicySource>,
    pub policy_error: Option<String>,
    pub metrics: Arc<Metrics>,
    pub notifier: Notifier,
    pub store: Option<StateStore>,
    pub state: StateFile,
    pub history: Vec<ActionRecord>,
    /// (device key, knob) an operator took over, with the DeviceId.
    pub overrides: BTreeMap<(String, Knob), DeviceId>,
    /// What pptune last set (read back) per (device key, knob).
    pub expected: BTreeMap<(String, Knob), u32>,
    /// Latest sample of each device, by ifindex (the device map).
    pub devices: BTreeMap<u32, Device>,
    /// The previous sample fed to the engine, and when it was taken.
    pub prev: Option<(Snapshot, Duration)>,
    pub backoff: BTreeMap<String, policy::gates::Backoff>,
    pub evaluations: Vec<policy::evaluate::Evaluation>,
    pub host_enforcing: bool,
    pub host_id: rollout::HostId,
    pub log: DecisionLog,
    pub last_decisions: BTreeMap<String, (Decision, u64)>,
    pub view: Arc<Mutex<DaemonView>>,
    pub ready: bool,
    pub origin: Instant,
    pub backoff_base: Duration,
    pub last_sample: Option<Duration>,
    pub coexist: crate::coexist::Tracker,
    pub recording: Option<crate::record::live::LiveRecording>,
}

pub(crate) fn unix_ms() -> u64 {
    u64::try_from(now_unix().as_millis()).unwrap_or(u64::MAX)
}

fn now_unix() -> Duration {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

pub(crate) fn local_time() -> LocalTime {
    use chrono::{Datelike, Timelike};
    let t = chrono::Local::now();
    LocalTime {
        weekday: u8::try_from(t.weekday().num_days_from_monday()).unwrap_or(0),
        minute_of_day: u16::try_from(t.hour() * 60 + t.minute()).unwrap_or(0),
    }
}

/// `now + d` for a timer, checked: a duration past `Instant`'s range (the
/// policy bounds durations, a programmatic policy need not) waits a day and
/// comes back, rather than panic in the loop.
fn after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(86_400)))
        .unwrap_or(now)
}

/// A restore's lines in the daemon's log, however it was asked for.
fn log_restore(lines: &[String], ok: bool) {
    for l in lines {
        tracing::info!("{l}");
    }
    if !ok {
        tracing::warn!("some originals could not be restored; they stay in the state record");
    }
}

/// Runs the service until `shutdown` resolves; then finishes the action in
/// progress, keeps or restores per policy, writes state and returns.
pub async fn run<K: Kernel, E: Engine>(
    kernel: Arc<K>,
    engine: E,
    source: Box<dyn PolicySource>,
    policy: Policy,
    opts: Options,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let Options {
        notifier,
        store,
        host_id,
        control_socket,
        metrics,
        mut reload,
        backoff_base,
        coexist,
        recording,
    } = opts;
    let recording = recording.map(|dir| {
        crate::record::live::LiveRecording::open(&dir, policy.daemon.recording_max_bytes, &policy)
    });
    let state = match &store {
        // An unparsable record is moved aside (logged there); a newer
        // schema or an unreadable file stops the daemon rather than be
        // overwritten.
        Some(s) => match s.load_or_set_aside()? {
            (st, Some(why)) => {
                tracing::info!(path = %s.path().display(), "ignoring old state record: {why}");
                st
            }
            (st, None) => st,
        },
        None => StateFile::new(String::new()),
    };
    let (restore_tx, mut restore_rx) = mpsc::channel::<RestoreRequest>(4);
    let view = Arc::new(Mutex::new(DaemonView::default()));
    let control_task = match &control_socket {
        Some(path) => {
            let l = control::bind(path)?;
            Some(tokio::spawn(control::serve(
                l,
                Arc::clone(&view),
                restore_tx.clone(),
            )))
        }
        None => None,
    };
    let mut d = Daemon {
        kernel,
        engine,
        host_enforcing: rollout::enforcing(policy.rollout.as_ref(), &host_id.value),
        policy,
        source,
        policy_error: None,
        metrics,
        notifier,
        store,
        history: Vec::new(),
        overrides: BTreeMap::new(),
        expected: BTreeMap::new(),
        devices: BTreeMap::new(),
        prev: None,
        backoff: BTreeMap::new(),
        evaluations: Vec::new(),
        host_id,
        log: DecisionLog::new(Duration::from_secs(3600)),
        last_decisions: BTreeMap::new(),
        view,
        ready: false,
        origin: Instant::now(),
        backoff_base,
        last_sample: None,
        coexist: crate::coexist::Tracker::new(coexist),
        recording,
        state,
    };
    d.restore_engine();
    d.history = d.history_from_state();
    d.metrics.health.set_interval(d.policy.timing.interval);
    d.metrics.set_queue_series(d.policy.daemon.queue_series);
    d.export_rollout();
    let result = d.main_loop(&mut reload, &mut restore_rx, shutdown).await;
    d.notifier.stopping();
    d.status("stopping");
    if d.policy.on_stop == OnStop::Restore {
        let (lines, ok) = d.restore(&[]).await;
        log_restore(&lines, ok);
    }
    let _ = d.save_state();
    if let Some(t) = control_task {
        t.abort();
    }
    if let Some(p) = &control_socket {
        let _ = std::fs::remove_file(p);
    }
    result
}

impl<K: Kernel, E: Engine> Daemon<K, E> {
    pub(crate) fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }

    /// Wake-up period: the policy interval, but at least twice per watchdog
    /// period so the loop's own ping never misses.
    fn tick_period(&self) -> Duration {
        let i = self.policy.timing.interval.max(Duration::from_millis(10));
        match self.notifier.watchdog() {
            Some(w) => i.min(w / 2),
            None => i,
        }
    }

    async fn main_loop(
        &mut self,
        reload: &mut mpsc::UnboundedReceiver<()>,
        restore_rx: &mut mpsc::Receiver<RestoreRequest>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), RunError> {
        tokio::pin!(shutdown);
        // Sample right away: READY waits for the first successful sample.
        let mut next_sample = Instant::now();
        let mut resync: Option<Instant> = None;
        let mut reload_open = true;
        // Absolute, so a stream of notifications cannot push the ping back.
        let mut next_ping = after(self.tick_period());
        loop {
            let wake = next_sample.min(next_ping);
            let wake = resync.map_or(wake, |r| wake.min(r));
            // `biased`: shutdown first, then the timer, so a flood of
            // notifications can starve neither the samples nor the
            // watchdog.
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok(()),
                () = tokio::time::sleep_until(wake) => {
                    let now = Instant::now();
                    if resync.is_some_and(|r| r <= now) {
                        resync = None;
                        self.refresh().await;
                    }
                    if next_sample <= now {
                        self.tick().await;
                        next_sample = after(self.policy.timing.interval);
                    }
                    // From the loop itself: a wedged tick stops the pings.
                    self.notifier.watchdog_ping();
                    next_ping = after(self.tick_period());
                }
                msg = reload.recv(), if reload_open => match msg {
                    Some(()) => self.reload().await,
                    None => reload_open = false,
                },
                Some(req) = restore_rx.recv() => {
                    if req.reply.is_closed() {
                        // Its client gave up (timeout, ^C) while the loop
                        // was busy: acting now would surprise everyone.
                        tracing::warn!(interfaces = ?req.interfaces, "restore request withdrawn by its client before it started: not carried out");
                        continue;
                    }
                    tracing::info!(interfaces = ?req.interfaces, "restore requested on the control socket");
                    let (lines, ok) = self.restore(&req.interfaces).await;
                    log_restore(&lines, ok);
                    let _ = self.save_state();
                    let _ = req.reply.send((lines, ok));
                }
                ev = self.kernel.next_event() => match ev {
                    None => return Err(RunError::EventsClosed),
                    Some(ev) => {
                        if self.on_event(ev) {
                            // Debounced: a burst of pool churn costs one resync.
                            resync.get_or_insert_with(|| after(Duration::from_millis(200)));
                        }
                    }
                },
            }
        }
    }

    /// A notification. Returns whether the device map needs a resync.
    fn on_event(&mut self, ev: KernelEvent) -> bool {
        match ev {
            KernelEvent::RingsChanged { ifindex, rings } => {
                self.check_override_rings(ifindex, &rings);
                if let Some(d) = self.devices.get_mut(&ifindex) {
                    d.rings = policy::snapshot::Availability::Available(rings);
                }
                false
            }
            KernelEvent::ChannelsChanged { ifindex, channels } => {
                self.check_override_channels(ifindex, &channels);
                if let Some(d) = self.devices.get_mut(&ifindex) {
                    d.channels = policy::snapshot::Availability::Available(channels);
                }
                // Queues (and their pools) changed.
                true
            }
            KernelEvent::PoolsChanged { .. } => true,
            // New devices, renames, up/down: re-read the map.
            KernelEvent::LinkChanged { .. } => true,
            KernelEvent::LinkRemoved { ifindex } => {
                if let Some(dev) = self.devices.remove(&ifindex) {
                    tracing::info!(device = %dev.name, "device vanished");
                    let key = dev.id.key();
                    self.evaluations.retain(|e| e.key != key);
                }
                true
            }
            KernelEvent::Overflow { source } => {
                tracing::warn!(source, "notifications lost (ENOBUFS): full resync");
                self.metrics
                    .resyncs
                    .get_or_create(&crate::metrics::KindLabels {
                        kind: source.to_owned(),
                    })
                    .inc();
                true
            }
        }
    }

    /// A sample outside the engine's cadence: keeps the device map and the
    /// metrics current (and catches changes whose notification was lost).
    async fn refresh(&mut self) {
        if let Ok(snap) = self.kernel.sample(&SampleScope::default()).await {
            self.absorb(&snap);
            self.update_view();
        } else {
            self.metrics.error("sample");
        }
    }

    /// Updates the device map from a sample; logs devices that appeared or
    /// vanished; compares managed knobs with what pptune set.
    fn absorb(&mut self, snap: &Snapshot) {
        let new: BTreeMap<u32, Device> = snap
            .devices
            .iter()
            .map(|d| (d.ifindex, d.clone()))
            .collect();
        for (i, d) in &new {
            if !self.devices.contains_key(i) && self.ready {
                tracing::info!(device = %d.name, ifindex = i, identity = %d.id.key(), "device appeared");
            }
        }
        let gone: Vec<u32> = self
            .devices
            .keys()
            .filter(|i| !new.contains_key(i))
            .copied()
            .collect();
        for i in gone {
            if let Some(d) = self.devices.get(&i) {
                tracing::info!(device = %d.name, ifindex = i, "device vanished");
                let key = d.id.key();
                self.evaluations.retain(|e| e.key != key);
            }
        }
        self.devices = new;
        // A lost notification must not hide an operator's change.
        let devs: Vec<Device> = self.devices.values().cloned().collect();
        for d in devs {
            if let Some(r) = d.rings.available() {
                self.check_override_rings(d.ifindex, r);
            }
            if let Some(c) = d.channels.available() {
                self.check_override_channels(d.ifindex, c);
            }
        }
        self.metrics.observe_snapshot(snap);
    }

    /// One sampling pass fed to the engine.
    async fn tick(&mut self) {
        let t0 = Instant::now();
        let snap = match self.kernel.sample(&SampleScope::default()).await {
            Ok(s) => s,
            Err(e) => {
                self.metrics.error("sample");
                tracing::warn!(error = %e, "sampling failed");
                self.status(&format!("sampling failed: {e}"));
                return;
            }
        };
        self.metrics.sample_duration.set(t0.elapsed().as_secs_f64());
        self.metrics.samples.inc();
        self.metrics.health.sampled();
        let now = self.now();
        self.last_sample = Some(now);
        self.absorb(&snap);
        self.evaluate_due(&snap, now).await;
        let engine_before = self.engine_for_recording();
        let (plan, asked) = {
            let elapsed = self
                .prev
                .as_ref()
                .map_or(Duration::ZERO, |(_, at)| now.saturating_sub(*at));
            // Operator overrides and, under `coexist: defer`, the knobs
            // another configuration owns.
            self.coexist.deferred(self.policy.coexist, &snap.devices);
            let overrides = self.override_list();
            let originals = self.originals();
            self.prune_history(now);
            let local = Some(local_time());
            let asked = self.recording_wanted().then(|| crate::record::live::Asked {
                engine_before,
                inputs: crate::record::format::Inputs::of(
                    &self.history,
                    &overrides,
                    &originals,
                    &self.backoff,
                ),
                local_time: local,
                elapsed,
                now,
            });
            let obs = Observation {
                previous: self.prev.as_ref().map(|(s, _)| s),
                current: &snap,
                elapsed,
                now,
                local_time: local,
                history: &self.history,
                overrides: &overrides,
                originals: &originals,
                backoff: &self.backoff,
            };
            (self.engine.decide(&self.policy, &obs), asked)
        };
        let cap = snap.capabilities.cap_net_admin;
        let mut managed = BTreeSet::new();
        for dec in &plan.decisions {
            managed.insert(dec.ifindex);
            let enforce = dec.mode == Mode::Enforce && self.host_enforcing && cap;
            let mode = if enforce { "enforce" } else { "observe" };
            self.metrics.set_mode(&dec.device, mode);
            // 0 for every selected device, so "backed off" is a value to
            // alert on, not a missing series.
            let backed_off = self
                .backoff
                .get(&dec.device_id.key())
                .is_some_and(|b| b.until > now);
            self.metrics
                .backoff
                .get_or_create(&crate::metrics::DevLabels {
                    device: dec.device.clone(),
                })
                .set(i64::from(backed_off));
            self.metrics
                .decisions
                .get_or_create(&crate::metrics::DecisionLabels {
                    device: dec.device.clone(),
                    action: crate::logging::action_kind(&dec.action).to_owned(),
                    reason: dec.reason.as_str().to_owned(),
                    mode: mode.to_owned(),
                })
                .inc();
            self.log.log(dec, mode, now);
            let rec = match dec.action {
                Action::Hold => None,
                Action::SetRing { to, .. } | Action::SetChannels { to, .. } => Some((
                    crate::metrics::RecLabels {
                        device: dec.device.clone(),
                        recommendation: dec.id.to_string(),
                        knob: dec.action.knob().map(|k| k.to_string()).unwrap_or_default(),
                        reason: dec.reason.as_str().to_owned(),
                    },
                    to,
                )),
            };
            self.metrics.set_recommendation(&dec.device, rec);
            let key = dec.device_id.key();
            let repeats = match self.last_decisions.get(&key) {
                Some((p, n)) if p.id == dec.id && p.action == dec.action => n + 1,
                _ => 1,
            };
            self.last_decisions.insert(key, (dec.clone(), repeats));
        }
        for d in self.devices.values() {
            if !managed.contains(&d.ifindex) {
                self.metrics.set_mode(&d.name, "unmanaged");
            }
        }
        // Serial actuation: one device at a time, each change finished
        // (set, read back, window opened) before the next.
        for dec in &plan.decisions {
            let enforce = dec.mode == Mode::Enforce && self.host_enforcing && cap;
            if enforce && dec.action != Action::Hold {
                self.actuate(dec, &snap).await;
            }
        }
        if !cap && !self.ready {
            tracing::warn!("no CAP_NET_ADMIN: every device is observed, none enforced");
        }
        self.record_pass(asked, &snap, &plan);
        self.prev = Some((snap, now));
        if !self.ready {
            self.ready = true;
            let s = self.summary();
            self.notifier.ready(&s);
            tracing::info!(status = %s, "ready");
        } else {
            self.status(&self.summary());
        }
        self.update_view();
    }

    /// The knobs operators took over, and those deferred to another
    /// configuration that owns them, as the engine and the gates read them.
    pub(crate) fn override_list(&self) -> Vec<(DeviceId, Knob)> {
        self.overrides
            .iter()
            .map(|((_, k), id)| (id.clone(), *k))
            .chain(self.coexist.current().iter().cloned())
            .collect()
    }

    pub(crate) fn originals(&self) -> Vec<Original> {
        self.state
            .devices
            .values()
            .flat_map(|r| {
                r.originals.iter().map(|o| Original {
                    device: r.id.clone(),
                    knob: o.knob,
                    value: o.value,
                })
            })
            .collect()
    }

    fn prune_history(&mut self, now: Duration) {
        let keep = policy::gates::HISTORY_KEEP;
        self.history
            .retain(|a| now.saturating_sub(a.at) <= keep || now < keep);
    }

    /// History rebuilt from the state record after a restart: stored wall
    /// times mapped onto this run's monotonic clock (an action from before
    /// this run's origin gets `at` = 0, which keeps its cooldown active for
    /// at least as long as it really is).
    fn history_from_state(&self) -> Vec<ActionRecord> {
        let wall = now_unix();
        let mono = self.now();
        let mut h: Vec<ActionRecord> = self
            .state
            .devices
            .values()
            .flat_map(|r| {
                // Older than the two hours the engine and budget look at:
                // history, not input.
                r.actions.iter().filter_map(move |a| {
                    let ago = wall.saturating_sub(Duration::from_millis(a.at_unix_ms));
                    (ago <= policy::gates::HISTORY_KEEP).then(|| ActionRecord {
                        device: r.id.clone(),
                        knob: a.knob,
                        from: a.from,
                        to: a.to,
                        at: mono.saturating_sub(ago),
                        outcome: a.outcome.clone(),
                    })
                })
            })
            .collect();
        h.sort_by_key(|a| a.at);
        h
    }

    fn summary(&self) -> String {
        let managed = self.last_decisions.len();
        let enforcing = self
            .last_decisions
            .values()
            .filter(|(d, _)| d.mode == Mode::Enforce)
            .count();
        let acting = self
            .last_decisions
            .values()
            .filter(|(d, _)| d.action != Action::Hold)
            .count();
        format!(
            "{} devices, {managed} selected ({} enforce{}), {acting} recommendation(s), {} override(s), {} backed off{}",
            self.devices.len(),
            if self.host_enforcing { enforcing } else { 0 },
            if self.host_enforcing {
                ""
            } else {
                "; rollout: observe on this host"
            },
            self.overrides.len(),
            self.backoff
                .values()
                .filter(|b| b.until > self.now())
                .count(),
            self.policy_error.as_ref().map_or_else(String::new, |_| {
                "; last reload INVALID, old policy in force".to_owned()
            }),
        )
    }

    pub(crate) fn status(&self, s: &str) {
        self.notifier.status(s);
    }

    fn export_rollout(&self) {
        rollout::Standing::of(&self.policy, self.host_enforcing).report(
            &self.policy,
            &self.host_id,
            &self.metrics,
        );
    }

    /// SIGHUP: re-read the policy; an invalid one keeps the last good.
    async fn reload(&mut self) {
        self.notifier.reloading();
        match self.source.load() {
            Ok(p) => {
                // Configuration management reloads unchanged files on a
                // timer: an identical policy keeps the findings in progress
                // and the backoff, or no finding would ever mature.
                let changed = p != self.policy;
                self.policy = p;
                if let Some(r) = &mut self.recording {
                    r.policy_reloaded(&self.policy, changed);
                }
                self.policy_error = None;
                if changed {
                    self.engine.reset();
                    self.log.reset();
                    self.backoff.clear();
                } else {
                    tracing::info!("policy unchanged: findings in progress and backoff kept");
                }
                // An operator's takeover lasts until the policy is reloaded.
                if !self.overrides.is_empty() {
                    tracing::info!(
                        count = self.overrides.len(),
                        "policy reloaded: operator overrides cleared"
                    );
                }
                self.overrides.clear();
                self.host_enforcing =
                    rollout::enforcing(self.policy.rollout.as_ref(), &self.host_id.value);
                self.export_rollout();
                self.metrics
                    .reloads
                    .get_or_create(&crate::metrics::ResultLabels {
                        result: "ok".into(),
                    })
                    .inc();
                self.metrics.policy_valid.set(1);
                self.metrics
                    .health
                    .set_interval(self.policy.timing.interval);
                self.metrics.health.set_policy_error(None);
                self.metrics
                    .set_queue_series(self.policy.daemon.queue_series);
                tracing::info!("policy reloaded");
            }
            Err(e) => {
                tracing::error!(error = %e, "policy reload failed: keeping the last good policy");
                self.metrics
                    .reloads
                    .get_or_create(&crate::metrics::ResultLabels {
                        result: "invalid".into(),
                    })
                    .inc();
                self.metrics.error("policy_reload");
                self.metrics.policy_valid.set(0);
                self.metrics.health.set_policy_error(Some(&e));
                self.policy_error = Some(e);
            }
        }
        self.notifier.ready(&self.summary());
        self.update_view();
        // Let the refreshed policy act on fresh data rather than wait.
        tokio::task::yield_now().await;
    }

    /// Picks up the engine's memory from the state record, and closes the
    /// evaluations the previous run could not finish.
    fn restore_engine(&mut self) {
        let closed = self.state.close_pending();
        if closed > 0 {
            tracing::info!(
                closed,
                "changes still under evaluation when the last run stopped: recorded as inconclusive"
            );
        }
        let Some(stored) = self.state.engine.take() else {
            return;
        };
        match stored.restore(self.now(), unix_ms()) {
            Ok(state) => {
                tracing::info!(
                    devices = state.devices.len(),
                    "engine state restored: open windows, streaks and ring probes continue"
                );
                self.engine.restore_state(state);
            }
            Err(why) => tracing::info!("ignoring the stored engine state: {why}"),
        }
    }

    /// Writes the record; `false` (logged, counted) when it could not.
    pub(crate) fn save_state(&mut self) -> bool {
        self.state.prune();
        self.state.engine = self
            .engine
            .saved_state()
            .map(|s| crate::state::StoredEngine::new(s, self.now(), unix_ms()));
        if let Some(store) = &self.store
            && let Err(e) = store.save(&self.state)
        {
            tracing::error!(error = %e, "writing the state record failed");
            self.metrics.error("state_write");
            return false;
        }
        true
    }

    /// Rebuilds the control socket's view.
    pub(crate) fn update_view(&self) {
        let view = crate::daemon_view::build(&crate::daemon_view::ViewInput {
            now: self.now(),
            devices: &self.devices,
            last_decisions: &self.last_decisions,
            host_enforcing: self.host_enforcing,
            rollout_fraction: self.policy.rollout.as_ref().map(|r| r.fraction),
            host_id: &self.host_id,
            policy_error: self.policy_error.as_deref(),
            last_sample: self.last_sample,
            state: &self.state,
            backoff: &self.backoff,
            overrides: &self.overrides,
            evaluations: &self.evaluations,
        });
        if let Ok(mut v) = self.view.lock() {
            *v = view;
        }
    }
}
