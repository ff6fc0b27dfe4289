//! Acting on a plan in enforce mode, safely: one device at a time; sample
//! right before the change; set; read back and verify; record the original
//! first; open an evaluation window against the pre-change baseline and
//! revert what made harm worse. Kernel refusals are answers: the device is
//! backed off, never retried in a storm. A change pptune did not make
//! (notification or sample differs from what it asked for) is an operator
//! takeover of that knob until the policy is reloaded.
//!
//! [`Actuator`] owns what acting needs to remember (the history the gates
//! read, backoff, open evaluations, overrides, the values it set); the loop
//! lends it the kernel, the policy and the state record for each call
//! ([`Lent`]), and takes back what it did as [`Event`]s for the outputs.

use std::collections::BTreeMap;
use std::time::Duration;

use policy::engine::{ActionRecord, Observation, Outcome};
use policy::evaluate::{Applied, Closed, Evaluation, Judged, OpenWindows, VANISHED};
use policy::gates::{self, Backoff};
use policy::knobs::{self, Block};
use policy::plan::{Decision, Knob};
use policy::snapshot::{Device, DeviceId, Snapshot};
use policy::window::Rates;

use crate::act::backoffs::Backoffs;
use crate::act::change::Change;
use crate::act::events::{Event, skipped};
use crate::act::lent::{Lent, Record, Seen};
use crate::act::ownership::Ownership;
use crate::act::set::{knob_value, restore_originals, set_knob};
use crate::act::state::StateFile;
use crate::clock::{Clock, local_time, now_unix, unix_ms};
use crate::sample::{Kernel, SetError};

/// What acting remembers between ticks.
#[derive(Debug)]
pub(crate) struct Actuator {
    /// Recent changes, as the engine and the gates read them.
    history: Vec<ActionRecord>,
    /// What pptune set on each knob, and the knobs operators took over.
    owned: Ownership,
    /// Failing devices, by key.
    backoffs: Backoffs,
    /// Open post-change windows.
    evaluations: OpenWindows,
}

impl Actuator {
    /// Starts from the state record a previous run left: its actions become
    /// the history, stored wall times mapped onto this run's monotonic clock
    /// (an action from before this run's origin gets `at` = 0, which keeps
    /// its cooldown active for at least as long as it really is).
    pub(crate) fn new(backoff_base: Duration, state: &StateFile, clock: Clock) -> Self {
        Self {
            history: state.history(now_unix(), clock.now()),
            owned: Ownership::default(),
            backoffs: Backoffs::new(backoff_base),
            evaluations: OpenWindows::default(),
        }
    }

    pub(crate) fn history(&self) -> &[ActionRecord] {
        &self.history
    }

    pub(crate) fn backoff(&self) -> &BTreeMap<String, Backoff> {
        self.backoffs.by_key()
    }

    pub(crate) fn overrides(&self) -> &BTreeMap<(String, Knob), DeviceId> {
        self.owned.overrides()
    }

    pub(crate) fn evaluations(&self) -> &[Evaluation] {
        self.evaluations.list()
    }

    /// Whether the device is backed off at `now`.
    pub(crate) fn backed_off(&self, key: &str, now: Duration) -> bool {
        self.backoffs.active(key, now)
    }

    /// How many devices are backed off at `now`.
    pub(crate) fn backed_off_count(&self, now: Duration) -> usize {
        self.backoffs.active_count(now)
    }

    /// [`Ownership::override_list`].
    pub(crate) fn override_list(&self, deferred: &[(DeviceId, Knob)]) -> Vec<(DeviceId, Knob)> {
        self.owned.override_list(deferred)
    }

    /// Drops history older than what the gates and the engine read.
    pub(crate) fn prune_history(&mut self, now: Duration) {
        let keep = gates::HISTORY_KEEP;
        self.history
            .retain(|a| now.saturating_sub(a.at) <= keep || now < keep);
    }

    /// A device vanished: its open evaluations cannot be judged, and
    /// their changes' records close (written at once); what pptune set on
    /// it is forgotten ([`Ownership::forget_device`]; its originals stay
    /// recorded, for `restore`).
    pub(crate) fn forget_device<R: Record>(&mut self, key: &str, record: &mut R) {
        self.owned.forget_device(key);
        let ended = self.evaluations.forget(key, None, VANISHED);
        if !ended.is_empty() {
            self.end_unjudged(ended, record.file());
            let _ = record.save();
        }
    }

    /// Records the windows that ended without a verdict
    /// ([`Closed::unjudged`]).
    fn end_unjudged(&mut self, ended: Vec<Closed>, state: &mut StateFile) {
        for c in ended {
            let (ev, dev) = (&c.ev, &c.ev.start);
            tracing::info!(device = %dev.name, knob = %ev.knob, "{c}");
            self.set_outcome(&dev.id, ev.knob, &c.outcome, state);
        }
    }

    /// After a reload: a changed policy clears the backoff; an operator's
    /// takeover lasts until the policy is reloaded, changed or not.
    pub(crate) fn policy_reloaded(&mut self, changed: bool) {
        if changed {
            self.backoffs.clear();
        }
        self.owned.policy_reloaded();
    }

    /// Compares the knobs of a reported block with what pptune set (or, for
    /// a knob it has not set yet on an `enforced` device, with the value it
    /// last saw in `dev`). Returns whether an operator took one over.
    pub(crate) fn check_overrides<K, R: Record>(
        &mut self,
        dev: &Device,
        enforced: bool,
        seen: Seen<'_>,
        io: &mut Lent<'_, K, R>,
    ) -> bool {
        let mut taken = false;
        for k in knobs::all() {
            let value = match (seen, k.block) {
                (Seen::Rings(r), Block::Rings) => k.in_rings(r),
                (Seen::Channels(c), Block::Channels) => k.in_channels(c),
                _ => continue,
            };
            taken |= self.check_override(dev, enforced, k.knob, value, io);
        }
        taken
    }

    /// One knob of [`Self::check_overrides`]. pptune receives its own
    /// notifications too: compare, don't assume.
    fn check_override<K, R: Record>(
        &mut self,
        dev: &Device,
        enforced: bool,
        knob: Knob,
        seen: Option<u32>,
        io: &mut Lent<'_, K, R>,
    ) -> bool {
        let Some(seen) = seen else { return false };
        let key = dev.id.key();
        if self.owned.overridden(&key, knob) {
            return false;
        }
        // A knob the policy does not manage (rings or channels disabled) is
        // the operator's anyway: only managed fields count.
        let managed = (knobs::desc(knob).managed)(io.policy);
        let reference = match self.owned.expected(&key, knob) {
            Some(v) => v,
            None if managed && enforced => match knob_value(dev, knob) {
                Some(v) => v,
                None => return false,
            },
            None => return false,
        };
        if seen == reference {
            return false;
        }
        tracing::warn!(
            device = %dev.name,
            knob = %knob,
            expected = reference,
            seen,
            "operator override: someone else changed {knob} on {} ({reference} -> {seen}); pptune stops managing it until the policy is reloaded",
            dev.name
        );
        self.owned.take_over(&dev.id, knob);
        let ended = self
            .evaluations
            .forget(&key, Some(knob), "the operator changed the knob");
        self.end_unjudged(ended, io.record.file());
        // The operator owns the value now: restoring our recorded original
        // on stop would undo their change.
        io.record.file().forget_original(&dev.id, knob);
        io.events.note(Event::Override {
            device: dev.name.clone(),
            knob,
        });
        let _ = io.record.save();
        true
    }

    fn fail<K, R>(&mut self, key: &str, device: &str, error: String, io: &Lent<'_, K, R>) {
        self.backoffs.fail(key, device, io.clock.now(), error);
        io.events.note(Event::BackedOff {
            device: device.to_owned(),
        });
    }

    /// Applies one decision, if the gates still admit it (the plan asked
    /// them too; an earlier change in this tick may have used up what this
    /// one needed). `snap` is the sample the plan was made from; the
    /// baseline is the finding window the decision was made on (else the
    /// loop's previous sample) and the knobs another
    /// configuration owns are deferred (both in `io`). Returns whether the
    /// device vanished (the loop drops it from its map).
    pub(crate) async fn actuate<K: Kernel, R: Record>(
        &mut self,
        dec: &Decision,
        snap: &Snapshot,
        mut io: Lent<'_, K, R>,
    ) -> bool {
        let Some(c) = Change::of(dec) else {
            return false;
        };
        let (knob, from, to) = (c.knob, c.from, c.to);
        let Some(dev) = snap.devices.iter().find(|d| d.ifindex == dec.ifindex) else {
            return false;
        };
        if !self.still_admitted(dec, dev, snap, &c, &io) {
            return false;
        }
        let (key, name) = (c.key.clone(), c.name.clone());
        // Sample right before: the pools and their counters are about to be
        // replaced, so this is the baseline's last word.
        let pre = match io.kernel.sample_device(dec.ifindex).await {
            Ok(Some(d)) => d,
            Ok(None) => {
                tracing::info!(device = %name, "device vanished before the change");
                return true;
            }
            Err(e) => {
                io.events.note(Event::Error("sample_device"));
                self.fail(&key, &name, format!("sampling before the change: {e}"), &io);
                return false;
            }
        };
        // Stamped after the read, as the loop stamps its samples: a
        // last-interval baseline's rates span exactly the two reads.
        let pre_at = io.clock.now();
        let Some(live) = knob_value(&pre, knob) else {
            return false;
        };
        if live == to {
            self.owned.set(&key, knob, live);
            return false;
        }
        if live != from {
            // The world moved since the plan; the next tick plans afresh.
            tracing::info!(device = %name, knob = %knob, planned_from = from, live, "value changed since the plan; not acting");
            return false;
        }
        let baseline = dec.baseline_or(|| {
            let (p, at) = io.prev?;
            let before = p.devices.iter().find(|d| d.id.key() == key)?;
            Rates::between(before, &pre, pre_at.saturating_sub(at))
        });
        if !c.write_ahead(dec, &pre, &mut io) {
            return false;
        }
        // Before sending: our own notification may arrive first.
        self.owned.set(&key, knob, to);
        let result = set_knob(io.kernel, dec.ifindex, knob, to).await;
        let at = io.clock.now();
        let (outcome, gone) = self
            .settle(result, dec, &c, live, &pre, baseline, at, &mut io)
            .await;
        self.log_change(dec, &c, at, outcome, &mut io);
        gone
    }

    /// Whether the gates still admit the change now (an earlier change in
    /// this tick may have used up what it needed); said and counted when not.
    fn still_admitted<K, R>(
        &self,
        dec: &Decision,
        dev: &policy::snapshot::Device,
        snap: &Snapshot,
        c: &Change,
        io: &Lent<'_, K, R>,
    ) -> bool {
        let (knob, name, direction) = (c.knob, &c.name, c.direction);
        let now = io.clock.now();
        let overrides = self.override_list(io.deferred);
        let obs = Observation {
            pass: policy::observer::Pass::alone(snap, now),
            local_time: Some(local_time()),
            history: &self.history,
            overrides: &overrides,
            originals: &[],
            backoff: self.backoffs.by_key(),
        };
        if let Err(held) = gates::admit(
            io.policy,
            &obs,
            dev,
            dec.mode,
            &dec.action,
            &dec.evidence,
            &gates::Spent::default(),
        ) {
            tracing::info!(device = %name, knob = %knob, reason = held.reason.as_str(), "not acting: {}", held.message);
            io.events
                .action(name, knob, direction, &skipped(held.reason));
            return false;
        }
        true
    }

    /// What the kernel's answer to the set means: the outcome (an open
    /// evaluation when applied; a backoff when it failed) and whether the
    /// device vanished.
    #[allow(clippy::too_many_arguments)]
    async fn settle<K: Kernel, R: Record>(
        &mut self,
        result: Result<Option<u32>, SetError>,
        dec: &Decision,
        c: &Change,
        live: u32,
        pre: &Device,
        baseline: Option<Rates>,
        at: Duration,
        io: &mut Lent<'_, K, R>,
    ) -> (Outcome, bool) {
        let (key, name, knob, from, to, direction) = (
            c.key.clone(),
            c.name.clone(),
            c.knob,
            c.from,
            c.to,
            c.direction,
        );
        let mut gone = false;
        let outcome = match result {
            Ok(Some(v)) if v != from => self.applied(v, dec, c, pre, baseline, at, io).await,
            Ok(v) => {
                let msg = format!(
                    "the kernel accepted {knob}={to} but it reads back {}",
                    v.map_or_else(|| "nothing".to_owned(), |v| v.to_string())
                );
                self.owned.set(&key, knob, live);
                io.events.note(Event::Error("verify"));
                io.events.action(&name, knob, direction, "failed");
                self.fail(&key, &name, msg.clone(), io);
                Outcome::Failed { message: msg }
            }
            Err(SetError::Refused {
                errno,
                message,
                attr,
            }) => {
                self.owned.set(&key, knob, live);
                io.events.action(&name, knob, direction, "refused");
                let msg = match &attr {
                    Some(a) => format!("{message} (attribute {a})"),
                    None => message.clone(),
                };
                tracing::warn!(device = %name, knob = %knob, to, errno, "kernel refused: {msg}");
                self.fail(
                    &key,
                    &name,
                    format!("kernel refused {knob}={to}: {msg}"),
                    io,
                );
                Outcome::Refused {
                    errno,
                    message: msg,
                }
            }
            Err(SetError::DeviceGone(_)) => {
                self.owned.unset(&key, knob);
                gone = true;
                io.events.action(&name, knob, direction, "failed");
                Outcome::Failed {
                    message: "device vanished during the change".into(),
                }
            }
            Err(e) => {
                self.owned.set(&key, knob, live);
                io.events.note(Event::Error("set"));
                io.events.action(&name, knob, direction, "failed");
                self.fail(&key, &name, e.to_string(), io);
                Outcome::Failed {
                    message: e.to_string(),
                }
            }
        };
        (outcome, gone)
    }

    /// The kernel took the change and reads back `v`: counted, logged,
    /// and judged from here on (an open evaluation).
    #[allow(clippy::too_many_arguments)]
    async fn applied<K: Kernel, R: Record>(
        &mut self,
        v: u32,
        dec: &Decision,
        c: &Change,
        pre: &Device,
        baseline: Option<Rates>,
        at: Duration,
        io: &Lent<'_, K, R>,
    ) -> Outcome {
        let (key, name, knob, from, to, direction) =
            (&c.key, &c.name, c.knob, c.from, c.to, c.direction);
        if v != to {
            tracing::info!(device = %name, knob = %knob, requested = to, got = v, "driver rounded the value");
        }
        self.owned.set(key, knob, v);
        self.backoffs.succeeded(key);
        io.events.action(name, knob, direction, "applied");
        io.events.note(Event::Applied {
            device: name.clone(),
            unix_s: i64::try_from(unix_ms() / 1000).unwrap_or(0),
        });
        tracing::warn!(
            target: "pptune::action",
            device = %name,
            action = %format!("{knob} {from} -> {v}"),
            reason = dec.reason.as_str(),
            recommendation = %dec.id,
            "changed {knob} on {name}: {from} -> {v}"
        );
        let start = match io.kernel.sample_device(dec.ifindex).await {
            Ok(Some(d)) => d,
            _ => pre.clone(),
        };
        let applied = Applied {
            knob,
            from,
            to: v,
            reason: dec.reason,
        };
        self.evaluations
            .open(Evaluation::open(applied, baseline, start, at, io.policy));
        Outcome::Pending
    }

    /// The change in the engine's history, and confirmed in the state
    /// record ([`Change::write_ahead`] wrote it pending).
    fn log_change<K, R: Record>(
        &mut self,
        dec: &Decision,
        c: &Change,
        at: Duration,
        outcome: Outcome,
        io: &mut Lent<'_, K, R>,
    ) {
        let (key, knob, from, to) = (c.key.clone(), c.knob, c.from, c.to);
        let to_rec = match &outcome {
            Outcome::Pending => self.owned.expected(&key, knob).unwrap_or(to),
            _ => to,
        };
        self.history.push(ActionRecord {
            device: dec.device_id.clone(),
            knob,
            from,
            to: to_rec,
            at,
            outcome: outcome.clone(),
        });
        io.record
            .file()
            .confirm_last_action(&dec.device_id, knob, to_rec, outcome);
        let _ = io.record.save();
    }

    fn set_outcome(&mut self, id: &DeviceId, knob: Knob, outcome: &Outcome, state: &mut StateFile) {
        let key = id.key();
        if let Some(a) = self
            .history
            .iter_mut()
            .rev()
            .find(|a| a.device.key() == key && a.knob == knob)
        {
            a.outcome = outcome.clone();
        }
        state.set_last_outcome(id, knob, outcome.clone());
    }

    /// Closes the evaluation windows that are due on `snap` (taken at
    /// `now`), reverting what policy judged harmful.
    pub(crate) async fn evaluate_due<K: Kernel, R: Record>(
        &mut self,
        snap: &Snapshot,
        now: Duration,
        mut io: Lent<'_, K, R>,
    ) {
        let due = self.evaluations.advance(snap, now, io.policy);
        if due.is_empty() {
            return;
        }
        for (closed, dev) in due {
            let ev = &closed.ev;
            let undoing = ev.judged == Judged::Revert;
            let mut outcome = closed.outcome.clone();
            let done = if undoing { "undo" } else { "revert" };
            if let Some(value) = closed.set {
                // On disk before the knob moves, as a change's record is
                // before the change (killed between the two, a change put
                // back would read `inconclusive`, which holds nothing).
                self.set_outcome(&dev.id, ev.knob, &closed.outcome, io.record.file());
                let _ = io.record.save();
                tracing::warn!(device = %dev.name, knob = %ev.knob, "{done} {} -> {value}: {}", ev.to, closed.verdict.why());
                self.owned.set(&ev.key, ev.knob, value);
                match set_knob(io.kernel, dev.ifindex, ev.knob, value).await {
                    Ok(Some(v)) => {
                        self.owned.set(&ev.key, ev.knob, v);
                        io.events.action(
                            &dev.name,
                            ev.knob,
                            "revert",
                            if undoing { "undone" } else { "applied" },
                        );
                        let start = match io.kernel.sample_device(dev.ifindex).await {
                            Ok(Some(d)) => d,
                            _ => dev.clone(),
                        };
                        if let Some(w) = closed.revert_window(start, now, io.policy) {
                            self.evaluations.open(w);
                        }
                    }
                    other => {
                        self.owned.set(&ev.key, ev.knob, ev.to);
                        outcome = closed.outcome_if_unset();
                        io.events.action(&dev.name, ev.knob, "revert", "failed");
                        let msg = other.map_or_else(|e| e.to_string(), |_| "no read-back".into());
                        self.fail(&ev.key, &dev.name, format!("{done} failed: {msg}"), &io);
                    }
                }
            } else {
                tracing::info!(device = %dev.name, knob = %ev.knob, "{closed}");
            }
            // A change's evaluation counts under its direction; a revert's
            // is counted above (undone) or not at all (it stands).
            if !undoing {
                let direction = if ev.to >= ev.from { "grow" } else { "shrink" };
                io.events
                    .action(&dev.name, ev.knob, direction, outcome.label());
            }
            self.set_outcome(&dev.id, ev.knob, &outcome, io.record.file());
        }
        let _ = io.record.save();
    }

    /// Restores originals (all devices, or the named ones) from a fresh
    /// sample (`known`, the loop's device map, when sampling fails), and
    /// forgets what was restored.
    pub(crate) async fn restore<K: Kernel, R: Record>(
        &mut self,
        interfaces: &[String],
        mut io: Lent<'_, K, R>,
    ) -> (Vec<String>, bool, Vec<(String, String, Knob, u32)>) {
        let devices: Vec<Device> = match io
            .kernel
            .sample(&crate::sample::SampleScope::default())
            .await
        {
            Ok(s) => s.devices,
            Err(_) => io.devices.values().cloned().collect(),
        };
        let (lines, ok, done) =
            restore_originals(io.kernel, io.record.file(), &devices, interfaces).await;
        for (_, key, knob, v) in &done {
            self.owned.set(key, *knob, *v);
            let ended = self
                .evaluations
                .forget(key, Some(*knob), "pptune restored the original");
            self.end_unjudged(ended, io.record.file());
            if let Some(d) = devices.iter().find(|d| d.id.key() == *key) {
                io.events.action(&d.name, *knob, "restore", "applied");
            }
        }
        let _ = io.record.save();
        (lines, ok, done)
    }
}
