//! The service loop: sample, keep the device map current from
//! notifications ([`devices`]), feed the engine, log and export, and (in
//! enforce mode) act through the actuator; reload the policy on SIGHUP
//! ([`loading`]).
//!
//! Generic over [`Kernel`] so the loop logic is tested against a fake; the
//! binary hands it the netlink implementation.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use policy::engine::Observation;
use policy::observer::Observer;
use policy::plan::{Action, Decision, Plan};
use policy::snapshot::Snapshot;
use policy::{Mode, OnStop, Policy};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::act::actuator::Actuator;
use crate::act::lent::{self, Lent};
use crate::act::rollout;
use crate::clock::{Clock, local_time};
use crate::publish::control::{DaemonView, RestoreRequest};
use crate::publish::logging::DecisionLog;
use crate::publish::metrics::Metrics;
use crate::publish::notify::Notifier;
use crate::publish::recording::LiveRecording;
use crate::record::journal::RestoredBy;
use crate::sample::{Kernel, SampleScope};

mod devices;
mod inputs;
mod keep;
mod loading;
mod report;
pub mod shadow;
mod start;
use devices::{DeviceMap, Observing as _};
pub use inputs::{Engine, Options, PolicyEngine, PolicyNotLoaded, PolicySource, RELOAD_DEADLINE};
use keep::{Acting, Keep};
use loading::Reloads;
pub use start::{RunError, run};

/// The service loop's state between ticks: the policy and the engine, the
/// device map and the samples (what the loop observes), the state record,
/// and the parts it composes. Acting and its memory are the
/// [`Actuator`]'s (with the record, in [`Acting`]), the recording is
/// [`LiveRecording`]'s, the control socket's view is built by
/// `publish::view` from parts lent to it.
struct Daemon<K: Kernel, E: Engine> {
    kernel: Arc<K>,
    engine: E,
    policy: Policy,
    /// Where the policy comes from, and the reload in flight.
    reloads: Reloads,
    policy_error: Option<String>,
    metrics: Arc<Metrics>,
    notifier: Notifier,
    acting: Acting,
    /// Latest sample of each device (the device map).
    devices: DeviceMap,
    /// The previous sample fed to the engine and when it was taken, and
    /// this pass's pool deltas against it: computed once per tick, read by
    /// the engine, the metrics, the shadow and the recording.
    observer: Observer,
    /// Where this host falls in the rollout (fraction, holdout).
    draw: rollout::Draw,
    host_id: rollout::HostId,
    log: DecisionLog,
    last_decisions: BTreeMap<String, (Decision, u64)>,
    /// A device key, written in place (no String per device per pass).
    key: String,
    /// Last pass's plan, handed back to the engine to refill.
    plan: Plan,
    view: Arc<Mutex<DaemonView>>,
    ready: bool,
    clock: Clock,
    last_sample: Option<Duration>,
    coexist: crate::act::coexist::Tracker,
    recording: Option<LiveRecording>,
    /// The shadow policy's engine, when the policy names one.
    shadow: Option<shadow::Shadow>,
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

impl<K: Kernel, E: Engine> Daemon<K, E> {
    /// The stop: tells the service manager, restores what the policy says
    /// to, logs what stays and writes the record.
    async fn stop(&mut self) {
        self.notifier.stopping();
        self.status("stopping");
        if self.policy.on_stop == OnStop::Restore {
            let (lines, ok) = self.restore(&[], RestoredBy::DaemonStop).await;
            report::log_restore(&lines, ok);
        }
        self.log_left_in_place();
        let _ = self.save_state();
    }

    fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Wake-up period: the policy interval, but at least twice per watchdog
    /// period and per liveness deadline (`/livez`) so the loop's own ping
    /// never misses.
    fn tick_period(&self) -> Duration {
        let i = self
            .policy
            .timing
            .interval
            .max(Duration::from_millis(10))
            .min(crate::publish::health::LOOP_DEADLINE / 2);
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
                    // From the loop itself: a wedged tick stops the pings
                    // and fails `/livez`.
                    self.notifier.watchdog_ping();
                    self.metrics.health.passed();
                    next_ping = after(self.tick_period());
                }
                msg = reload.recv(), if reload_open => match msg {
                    Some(()) => {
                        if let Some(refused) = self.reloads.asked(&self.notifier) {
                            self.reload_finished(Err(refused));
                        }
                    }
                    None => reload_open = false,
                },
                end = self.reloads.next_end() => {
                    let ended = self.reloads.ended(end);
                    if let Some(loaded) = ended.loaded {
                        self.reload_finished(loaded);
                    }
                    if ended.again {
                        self.reloads.start(&self.notifier);
                    }
                }
                Some(req) = restore_rx.recv() => {
                    if req.reply.is_closed() {
                        // Its client gave up (timeout, ^C) while the loop
                        // was busy: acting now would surprise everyone.
                        tracing::warn!(interfaces = ?req.interfaces, "restore request withdrawn by its client before it started: not carried out");
                        continue;
                    }
                    tracing::info!(interfaces = ?req.interfaces, "restore requested on the control socket");
                    let (lines, ok) = self.restore(&req.interfaces, RestoredBy::ControlSocket).await;
                    report::log_restore(&lines, ok);
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

    /// A sample outside the engine's cadence: keeps the device map and the
    /// view current (and catches changes whose notification was lost); the
    /// metrics follow the passes.
    async fn refresh(&mut self) {
        if let Ok(snap) = self.kernel.sample(&SampleScope::default()).await {
            self.absorb(&snap);
            self.update_view();
        } else {
            self.metrics.error("sample");
        }
    }

    /// One pass: sample, evaluate what is due, decide, tell, act, record.
    async fn tick(&mut self) {
        let Some(mut snap) = self.sample().await else {
            return;
        };
        let now = self.now();
        self.last_sample = Some(now);
        self.observer.next(&snap, now);
        self.absorb(&snap);
        self.metrics.observe(&snap, self.observer.deltas());
        let (actuator, io) = self.lend();
        actuator.evaluate_due(&snap, now, io).await;
        self.count_events();
        let (plan, asked) = self.decide(&mut snap, now);
        let cap = snap.capabilities.cap_net_admin;
        self.publish(&plan, now, cap);
        report::export_judging(&self.metrics, &snap, &self.policy, &plan.decisions);
        self.actuate(&plan, &snap, cap).await;
        self.close_pass(plan, snap, now, asked, cap);
    }

    /// A sample of the kernel, counted and timed; `None` (said and
    /// counted) when sampling failed.
    async fn sample(&mut self) -> Option<Snapshot> {
        let t0 = Instant::now();
        let snap = match self.kernel.sample(&SampleScope::default()).await {
            Ok(s) => s,
            Err(e) => {
                self.metrics.error("sample");
                tracing::warn!(error = %crate::human::cause(&e), "sampling failed");
                self.status(&format!("sampling failed: {}", crate::human::cause(&e)));
                return None;
            }
        };
        self.metrics.sample_duration.set(t0.elapsed().as_secs_f64());
        self.metrics.samples.inc();
        self.metrics.health.sampled();
        Some(snap)
    }

    /// The engine's plan for this sample, and what the recording keeps of
    /// what it was asked.
    fn decide(
        &mut self,
        snap: &mut Snapshot,
        now: Duration,
    ) -> (Plan, Option<crate::publish::recording::Asked>) {
        let engine_before = self
            .recording
            .as_ref()
            .is_some_and(LiveRecording::needs_engine)
            .then(|| self.engine.saved_state())
            .flatten();
        let elapsed = self.observer.elapsed(now);
        // Operator overrides and, under `coexist: defer`, the knobs
        // another configuration owns.
        self.coexist.deferred(self.policy.coexist, &snap.devices);
        let overrides = self.acting.actuator.override_list(self.coexist.current());
        let originals = self.acting.state.originals();
        self.acting.actuator.prune_history(now);
        let local = Some(local_time());
        let recording = self
            .recording
            .as_ref()
            .is_some_and(LiveRecording::wants_inputs);
        let asked = recording.then(|| crate::publish::recording::Asked {
            engine_before,
            inputs: crate::record::format::Inputs::of(
                self.acting.actuator.history(),
                &overrides,
                &originals,
                self.acting.actuator.backoff(),
            ),
            local_time: local,
            elapsed,
            now,
        });
        let obs = Observation {
            pass: self.observer.pass(snap, now),
            local_time: local,
            history: self.acting.actuator.history(),
            overrides: &overrides,
            originals: &originals,
            backoff: self.acting.actuator.backoff(),
        };
        let mut plan = std::mem::take(&mut self.plan);
        self.engine.decide_into(&self.policy, &obs, &mut plan);
        if let Some(s) = &mut self.shadow {
            let live = (&mut self.observer, snap);
            s.pass(live, (now, elapsed, local), &overrides, &self.metrics);
        }
        (plan, asked)
    }

    /// Each decision to the metrics, the log and the last decisions the
    /// view shows.
    fn publish(&mut self, plan: &Plan, now: Duration, cap: bool) {
        let mut managed = Vec::with_capacity(plan.decisions.len());
        for dec in &plan.decisions {
            managed.push(dec.ifindex);
            // The device's key, written into the loop's buffer.
            self.key.clear();
            let _ = dec.device_id.write_key(&mut self.key);
            let mode = if self.enforces(dec, cap) {
                "enforce"
            } else {
                "observe"
            };
            let backed_off = self.acting.actuator.backed_off(&self.key, now);
            if let Some(dev) = self.devices.get(dec.ifindex) {
                self.metrics.known(dev, &self.policy, mode);
                self.metrics
                    .set_ring_cost(&dev.name, policy::engine::current_device_bytes(dev));
                let reclaim = policy::engine::reclaimable(&self.policy, dev).map_or(0, |r| r.bytes);
                self.metrics.set_reclaimable(&dev.name, Some(reclaim));
            }
            self.metrics.observe_decision(dec, mode, backed_off);
            self.log.log(dec, mode, now);
            // The last decision per device, overwritten in place.
            match self.last_decisions.get_mut(self.key.as_str()) {
                Some((last, n)) => {
                    *n = if last.id == dec.id && last.action == dec.action {
                        *n + 1
                    } else {
                        1
                    };
                    last.clone_from(dec);
                }
                None => {
                    self.last_decisions
                        .insert(self.key.clone(), (dec.clone(), 1));
                }
            }
        }
        // Devices no longer selected (gone, or a reload deselected them)
        // leave the last decisions: the view, the status line's counts.
        self.last_decisions
            .retain(|_, (last, _)| plan.decisions.iter().any(|d| d.device_id == last.device_id));
        let kept = &self.last_decisions;
        self.log.retain(|key| kept.contains_key(key));
        for d in self.devices.all().values() {
            if !managed.contains(&d.ifindex) {
                self.metrics.set_mode(&d.name, "unmanaged");
                self.metrics.set_ring_cost(&d.name, None);
                self.metrics.set_reclaimable(&d.name, None);
            }
        }
    }

    /// Whether the loop carries `dec` out: its selector enforces, the host
    /// is in the rollout, and the process may change rings and channels
    /// (`cap`). The metrics, the log and the actuator all ask this.
    fn enforces(&self, dec: &Decision, cap: bool) -> bool {
        dec.mode == Mode::Enforce && self.draw.host_selected && cap
    }

    /// Serial actuation: one device at a time, each change finished (set,
    /// read back, window opened) before the next.
    async fn actuate(&mut self, plan: &Plan, snap: &Snapshot, cap: bool) {
        for dec in &plan.decisions {
            if self.enforces(dec, cap) && dec.action != Action::Hold {
                let (actuator, io) = self.lend();
                let gone = actuator.actuate(dec, snap, io).await;
                self.count_events();
                if gone {
                    self.devices.gone(dec.ifindex);
                }
            }
        }
    }

    /// The pass recorded, its sample kept as the next one's previous, and
    /// what the service manager and the view say.
    fn close_pass(
        &mut self,
        plan: Plan,
        snap: Snapshot,
        now: Duration,
        asked: Option<crate::publish::recording::Asked>,
        cap: bool,
    ) {
        if !cap && !self.ready {
            tracing::warn!("no CAP_NET_ADMIN: every device is observed, none enforced");
        }
        if let Some(rec) = &mut self.recording {
            rec.record_pass(
                asked,
                (&snap, self.observer.previous_taken()),
                &plan,
                self.acting.actuator.history(),
                self.clock.now(),
                &self.metrics,
            );
        }
        self.plan = plan;
        if !self.ready {
            self.ready = true;
            let s = self.summary();
            self.notifier.ready(&s);
            tracing::info!(status = %s, "ready");
            // First contact: when no device can be judged, say why, once.
            let decided = self.last_decisions.values().map(|(d, _)| d);
            report::why_nothing_is_judged(&snap, &self.policy, decided);
        } else {
            self.status(&self.summary());
        }
        if let Some(spent) = self.observer.keep(snap, now) {
            self.kernel.recycle(spent);
        }
        self.update_view();
        crate::heap::settle();
    }

    /// The service manager's status line.
    fn summary(&self) -> String {
        report::summary(&report::Counts {
            devices: self.devices.all().len(),
            decisions: self.last_decisions.values().map(|(d, _)| d),
            draw: self.draw,
            overrides: self.acting.actuator.overrides().len(),
            backed_off: self.acting.actuator.backed_off_count(self.now()),
            policy_invalid: self.policy_error.is_some(),
        })
    }

    fn status(&self, s: &str) {
        self.notifier.status(s);
    }

    fn export_rollout(&self) {
        let standing = rollout::Standing::of(&self.policy, self.draw);
        standing.report(&self.policy, &self.host_id);
        self.metrics.set_rollout(standing, &self.policy);
    }

    /// A reload's outcome: a valid policy replaces the last good one; an
    /// invalid one (or a load that failed) keeps it.
    fn reload_finished(&mut self, loaded: Result<Policy, PolicyNotLoaded>) {
        match loaded {
            Ok(mut p) => {
                // Configuration management reloads unchanged files on a
                // timer: an identical policy keeps the findings in progress
                // and the backoff, or no finding would ever mature.
                let changed = shadow::Shadow::differ_beyond(&mut p, &mut self.policy);
                self.policy = p;
                self.shadow =
                    shadow::Shadow::reloaded(self.shadow.take(), &self.policy, &self.metrics);
                if let Some(r) = &mut self.recording {
                    r.policy_reloaded(&self.policy, changed);
                }
                self.policy_error = None;
                if changed {
                    self.engine.reset();
                    self.log.reset();
                } else {
                    tracing::info!("policy unchanged: findings in progress and backoff kept");
                }
                self.acting.actuator.policy_reloaded(changed);
                self.draw = rollout::draw(self.policy.rollout.as_ref(), &self.host_id.value);
                self.export_rollout();
                let hashes = self.metrics.policy_loaded(Ok(&self.policy));
                tracing::info!(policy_hash = %hashes.as_ref().map_or("", |h| h.policy.as_str()), shadow_hash = hashes.as_ref().and_then(|h| h.shadow.as_deref()).unwrap_or(""), "policy reloaded: {}", hashes.as_ref().map(ToString::to_string).unwrap_or_default());
            }
            Err(e) => {
                tracing::error!(error = %crate::human::cause(&e), "policy reload failed: keeping the last good policy");
                self.metrics.policy_loaded(Err(&e.0));
                self.policy_error = Some(e.0);
            }
        }
        self.notifier.ready(&self.summary());
        self.update_view();
    }

    /// The actuator and what it borrows from the loop for one call.
    fn lend(&mut self) -> (&mut Actuator, Lent<'_, K, Keep<'_, E>>) {
        let io = Lent {
            kernel: &*self.kernel,
            policy: &self.policy,
            events: &self.acting.events,
            clock: self.clock,
            devices: self.devices.all(),
            prev: self.observer.previous_taken(),
            deferred: self.coexist.current(),
            record: Keep {
                state: &mut self.acting.state,
                store: self.acting.store.as_ref(),
                engine: &mut self.engine,
                clock: self.clock,
                metrics: &self.metrics,
            },
        };
        (&mut self.acting.actuator, io)
    }

    /// What the last actuator call did, to the metrics.
    fn count_events(&self) {
        self.metrics.count(self.acting.events.take());
    }

    /// Writes the record; `false` (logged, counted) when it could not.
    fn save_state(&mut self) -> bool {
        lent::Record::save(&mut self.lend().1.record)
    }

    /// Restores originals (all devices, or the named ones), and journals
    /// what was put back.
    async fn restore(&mut self, interfaces: &[String], by: RestoredBy) -> (Vec<String>, bool) {
        let (actuator, io) = self.lend();
        let (lines, ok, done) = actuator.restore(interfaces, io).await;
        self.count_events();
        if let Some(r) = &self.recording {
            r.journal_restores(by, &done, &self.metrics);
        }
        self.update_view();
        (lines, ok)
    }

    /// At exit: what this run changed and what it leaves in place.
    fn log_left_in_place(&self) {
        let changes = self
            .recording
            .as_ref()
            .map_or(0, LiveRecording::changes_this_run);
        report::left_in_place(changes, &self.acting.state, self.devices.all());
    }

    /// Rebuilds the control socket's view.
    fn update_view(&self) {
        let view = crate::publish::view::build(&crate::publish::view::ViewInput {
            now: self.now(),
            devices: self.devices.all(),
            last_decisions: &self.last_decisions,
            standing: rollout::Standing::of(&self.policy, self.draw),
            rollout: self.policy.rollout.as_ref(),
            host_id: &self.host_id,
            policy_error: self.policy_error.as_deref(),
            last_sample: self.last_sample,
            passes: self.observer.passes(),
            state: &self.acting.state,
            backoff: self.acting.actuator.backoff(),
            overrides: self.acting.actuator.overrides(),
            evaluations: self.acting.actuator.evaluations(),
            memory_budget: self.policy.budget,
        });
        if let Ok(mut v) = self.view.lock() {
            *v = view;
        }
    }
}
