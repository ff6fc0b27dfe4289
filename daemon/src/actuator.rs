//! Acting on a plan in enforce mode, safely: one device at a time; sample
//! right before the change; set; read back and verify; record the original
//! first; open an evaluation window against the pre-change baseline and
//! revert what made harm worse. Kernel refusals are answers: the device is
//! backed off, never retried in a storm. A change pptune did not make
//! (notification or sample differs from what it asked for) is an operator
//! takeover of that knob until the policy is reloaded.

use std::time::Duration;

use policy::engine::{ActionRecord, Observation, Outcome};
use policy::gates::{self, Backoff};
use policy::knobs::{self, Block};
use policy::plan::{Decision, Knob, ReasonCode};
use policy::snapshot::{Channels, Device, Rings, Snapshot};

use crate::kernel::{Kernel, SetError};
use crate::metrics::{ActionLabels, DevLabels, KnobLabels};
use crate::run::{Daemon, Engine, unix_ms};
use crate::state::{StateFile, StoredAction};
use policy::evaluate::{Evaluation, Rates, Verdict};

/// A knob's current value on a sampled device (`policy::knobs`).
#[must_use]
pub fn knob_value(d: &Device, knob: Knob) -> Option<u32> {
    knobs::value(d, knob)
}

/// Sets a knob and returns the value read back.
pub async fn set_knob<K: Kernel>(
    kernel: &K,
    ifindex: u32,
    knob: Knob,
    value: u32,
) -> Result<Option<u32>, SetError> {
    match knob {
        Knob::Ring(f) => kernel
            .set_ring(ifindex, f, value)
            .await
            .map(|r| knobs::desc(knob).in_rings(&r)),
        Knob::Channels(f) => kernel
            .set_channels(ifindex, f, value)
            .await
            .map(|c| knobs::desc(knob).in_channels(&c)),
    }
}

/// Puts recorded originals back on the devices present (all, or those
/// named) and forgets them. Shared by `pptune restore` and the daemon.
/// Returns lines for a person, whether everything asked for was restored,
/// and the (device key, knob, value) that were set.
pub async fn restore_originals<K: Kernel>(
    kernel: &K,
    state: &mut StateFile,
    devices: &[Device],
    interfaces: &[String],
) -> (Vec<String>, bool, Vec<(String, Knob, u32)>) {
    let mut lines = Vec::new();
    let mut ok = true;
    let mut done = Vec::new();
    let keys: Vec<String> = state.devices.keys().cloned().collect();
    for key in keys {
        let Some(rec) = state.devices.get(&key).cloned() else {
            continue;
        };
        let dev = devices.iter().find(|d| d.id.key() == key);
        let name = dev.map_or(rec.last_name.as_str(), |d| d.name.as_str());
        if !interfaces.is_empty() && !interfaces.iter().any(|i| i == name) {
            continue;
        }
        let Some(dev) = dev else {
            if !rec.originals.is_empty() {
                lines.push(format!(
                    "{name} ({key}): not present; its originals stay recorded"
                ));
                ok = false;
            }
            continue;
        };
        let mut all = true;
        for o in &rec.originals {
            if knob_value(dev, o.knob) == Some(o.value) {
                lines.push(format!("{name}: {} already {}", o.knob, o.value));
                state.forget_original(&rec.id, o.knob);
                continue;
            }
            match set_knob(kernel, dev.ifindex, o.knob, o.value).await {
                Ok(v) if v == Some(o.value) => {
                    lines.push(format!("{name}: {} restored to {}", o.knob, o.value));
                    state.forget_original(&rec.id, o.knob);
                    done.push((key.clone(), o.knob, o.value));
                }
                Ok(v) => {
                    lines.push(format!(
                        "{name}: {} set to {} but reads back {}",
                        o.knob,
                        o.value,
                        v.map_or_else(|| "nothing".to_owned(), |v| v.to_string())
                    ));
                    all = false;
                }
                Err(e) => {
                    lines.push(format!(
                        "{name}: restoring {} to {} failed: {e}",
                        o.knob, o.value
                    ));
                    all = false;
                }
            }
        }
        if all {
            // Fully restored: the record of this device is done.
            state.devices.remove(&key);
        } else {
            ok = false;
        }
    }
    if lines.is_empty() {
        lines.push("nothing to restore".to_owned());
    }
    (lines, ok, done)
}

impl<K: Kernel, E: Engine> Daemon<K, E> {
    fn device_by_key(&self, key: &str) -> Option<&Device> {
        self.devices.values().find(|d| d.id.key() == key)
    }

    fn is_enforced(&self, key: &str) -> bool {
        self.host_enforcing
            && self
                .last_decisions
                .get(key)
                .is_some_and(|(d, _)| d.mode == policy::Mode::Enforce)
    }

    pub(crate) fn check_override_rings(&mut self, ifindex: u32, rings: &Rings) {
        for k in knobs::KNOBS.iter().filter(|k| k.block == Block::Rings) {
            self.check_override(ifindex, k.knob, k.in_rings(rings));
        }
    }

    pub(crate) fn check_override_channels(&mut self, ifindex: u32, ch: &Channels) {
        for k in knobs::KNOBS.iter().filter(|k| k.block == Block::Channels) {
            self.check_override(ifindex, k.knob, k.in_channels(ch));
        }
    }

    /// Compares a knob's new value with what pptune asked for (or, for a
    /// knob it has not set yet on an enforced device, with the value it last
    /// saw). pptune receives its own notifications too: compare, don't assume.
    fn check_override(&mut self, ifindex: u32, knob: Knob, seen: Option<u32>) {
        let Some(seen) = seen else { return };
        let Some(dev) = self.devices.get(&ifindex).cloned() else {
            return;
        };
        let key = dev.id.key();
        if self.overrides.contains_key(&(key.clone(), knob)) {
            return;
        }
        // A knob the policy does not manage (rings or channels disabled) is
        // the operator's anyway: only managed fields count.
        let managed = (knobs::desc(knob).managed)(&self.policy);
        let reference = match self.expected.get(&(key.clone(), knob)) {
            Some(v) => *v,
            None if managed && self.is_enforced(&key) => match knob_value(&dev, knob) {
                Some(v) => v,
                None => return,
            },
            None => return,
        };
        if seen == reference {
            return;
        }
        tracing::warn!(
            device = %dev.name,
            knob = %knob,
            expected = reference,
            seen,
            "operator override: someone else changed {knob} on {} ({reference} -> {seen}); pptune stops managing it until the policy is reloaded",
            dev.name
        );
        self.overrides.insert((key.clone(), knob), dev.id.clone());
        self.expected.remove(&(key.clone(), knob));
        self.evaluations
            .retain(|e| !(e.key == key && e.knob == knob));
        // The operator owns the value now: restoring our recorded original
        // on stop would undo their change.
        self.state.forget_original(&dev.id, knob);
        self.metrics
            .overrides
            .get_or_create(&KnobLabels {
                device: dev.name.clone(),
                knob: knob.to_string(),
            })
            .inc();
        let _ = self.save_state();
        self.update_view();
    }

    fn count_action(&self, device: &str, knob: Knob, direction: &str, result: &str) {
        self.metrics
            .actions
            .get_or_create(&ActionLabels {
                device: device.to_owned(),
                knob: knob.to_string(),
                direction: direction.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    fn fail(&mut self, key: &str, device: &str, error: String) {
        let now = self.now();
        let b = Backoff::after_failure(self.backoff.get(key), now, self.backoff_base, error);
        let delay = b.until.saturating_sub(now);
        let (failures, error) = (b.failures, b.last_error.clone());
        self.backoff.insert(key.to_owned(), b);
        tracing::warn!(
            device,
            failures,
            retry_in_s = delay.as_secs(),
            error = %error,
            "device backed off"
        );
        self.metrics
            .backoff
            .get_or_create(&DevLabels {
                device: device.to_owned(),
            })
            .set(1);
    }

    /// Applies one decision, if the gates still admit it (the plan asked
    /// them too; an earlier change in this tick may have used up what this
    /// one needed). `snap` is the sample the plan was made from.
    pub(crate) async fn actuate(&mut self, dec: &Decision, snap: &Snapshot) {
        let (knob, from, to) = match dec.action {
            policy::Action::Hold => return,
            policy::Action::SetRing { field, from, to } => (Knob::Ring(field), from, to),
            policy::Action::SetChannels { field, from, to } => (Knob::Channels(field), from, to),
        };
        let key = dec.device_id.key();
        let name = dec.device.clone();
        let direction = if to >= from { "grow" } else { "shrink" };
        let now = self.now();
        let Some(dev) = snap.devices.iter().find(|d| d.ifindex == dec.ifindex) else {
            return;
        };
        let overrides = self.override_list();
        let obs = Observation {
            previous: None,
            current: snap,
            elapsed: Duration::ZERO,
            now,
            local_time: Some(crate::run::local_time()),
            history: &self.history,
            overrides: &overrides,
            originals: &[],
            backoff: &self.backoff,
        };
        if let Err(held) = gates::admit(
            &self.policy,
            &obs,
            dev,
            dec.mode,
            &dec.action,
            &gates::Spent::default(),
        ) {
            let what = match held.reason {
                ReasonCode::OperatorOverride => "override",
                ReasonCode::BackedOff => "backoff",
                ReasonCode::KernelRefused => "refused",
                ReasonCode::Cooldown => "cooldown",
                ReasonCode::ChangeBudgetExhausted => "budget",
                r => r.as_str(),
            };
            tracing::info!(device = %name, knob = %knob, reason = held.reason.as_str(), "not acting: {}", held.message);
            self.count_action(&name, knob, direction, &format!("skipped_{what}"));
            return;
        }
        // Sample right before: the pools and their counters are about to be
        // replaced, so this is the baseline's last word.
        let pre = match self.kernel.sample_device(dec.ifindex).await {
            Ok(Some(d)) => d,
            Ok(None) => {
                tracing::info!(device = %name, "device vanished before the change");
                self.devices.remove(&dec.ifindex);
                return;
            }
            Err(e) => {
                self.metrics.error("sample_device");
                self.fail(&key, &name, format!("sampling before the change: {e}"));
                return;
            }
        };
        let Some(live) = knob_value(&pre, knob) else {
            return;
        };
        if live == to {
            self.expected.insert((key, knob), live);
            return;
        }
        if live != from {
            // The world moved since the plan; the next tick plans afresh.
            tracing::info!(device = %name, knob = %knob, planned_from = from, live, "value changed since the plan; not acting");
            return;
        }
        let baseline = self.prev.as_ref().and_then(|(p, at)| {
            let before = p.devices.iter().find(|d| d.id.key() == key)?;
            Rates::between(before, &pre, now.saturating_sub(*at))
        });
        if self.state.record_original(&pre.id, &pre.name, knob, live) && !self.save_state() {
            // The original must be on disk before the knob moves: a full
            // or read-only state directory stops enforcing, not observing.
            self.state.forget_original(&pre.id, knob);
            tracing::error!(device = %name, knob = %knob, "not acting: the original could not be written to the state record");
            return;
        }
        // Before sending: our own notification may arrive first.
        self.expected.insert((key.clone(), knob), to);
        let result = set_knob(&*self.kernel, dec.ifindex, knob, to).await;
        let at = self.now();
        let outcome = match result {
            Ok(Some(v)) if v != from => {
                if v != to {
                    tracing::info!(device = %name, knob = %knob, requested = to, got = v, "driver rounded the value");
                }
                self.expected.insert((key.clone(), knob), v);
                self.backoff.remove(&key);
                self.count_action(&name, knob, direction, "applied");
                self.metrics
                    .last_action
                    .get_or_create(&DevLabels {
                        device: name.clone(),
                    })
                    .set(i64::try_from(unix_ms() / 1000).unwrap_or(0));
                tracing::warn!(
                    target: "pptune::action",
                    device = %name,
                    action = %format!("{knob} {from} -> {v}"),
                    reason = dec.reason.as_str(),
                    recommendation = %dec.id,
                    "changed {knob} on {name}: {from} -> {v}"
                );
                let start = match self.kernel.sample_device(dec.ifindex).await {
                    Ok(Some(d)) => d,
                    _ => pre.clone(),
                };
                self.evaluations.push(Evaluation {
                    key: key.clone(),
                    knob,
                    from,
                    to: v,
                    reason: dec.reason,
                    ends: at.saturating_add(self.policy.timing.evaluation),
                    baseline,
                    start,
                    start_at: self.now(),
                    settled: false,
                });
                Outcome::Pending
            }
            Ok(v) => {
                let msg = format!(
                    "the kernel accepted {knob}={to} but it reads back {}",
                    v.map_or_else(|| "nothing".to_owned(), |v| v.to_string())
                );
                self.expected.insert((key.clone(), knob), live);
                self.metrics.error("verify");
                self.count_action(&name, knob, direction, "failed");
                self.fail(&key, &name, msg.clone());
                Outcome::Failed { message: msg }
            }
            Err(SetError::Refused {
                errno,
                message,
                attr,
            }) => {
                self.expected.insert((key.clone(), knob), live);
                self.count_action(&name, knob, direction, "refused");
                let msg = match &attr {
                    Some(a) => format!("{message} (attribute {a})"),
                    None => message.clone(),
                };
                tracing::warn!(device = %name, knob = %knob, to, errno, "kernel refused: {msg}");
                self.fail(&key, &name, format!("kernel refused {knob}={to}: {msg}"));
                Outcome::Refused {
                    errno,
                    message: msg,
                }
            }
            Err(SetError::DeviceGone(_)) => {
                self.expected.remove(&(key.clone(), knob));
                self.devices.remove(&dec.ifindex);
                self.count_action(&name, knob, direction, "failed");
                Outcome::Failed {
                    message: "device vanished during the change".into(),
                }
            }
            Err(e) => {
                self.expected.insert((key.clone(), knob), live);
                self.metrics.error("set");
                self.count_action(&name, knob, direction, "failed");
                self.fail(&key, &name, e.to_string());
                Outcome::Failed {
                    message: e.to_string(),
                }
            }
        };
        let to_rec = match &outcome {
            Outcome::Pending => self
                .expected
                .get(&(key.clone(), knob))
                .copied()
                .unwrap_or(to),
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
        self.state.push_action(
            &dec.device_id,
            &name,
            StoredAction {
                knob,
                from,
                to: to_rec,
                at_unix_ms: unix_ms(),
                reason: dec.reason.as_str().to_owned(),
                outcome,
            },
        );
        let _ = self.save_state();
    }

    fn set_outcome(&mut self, key: &str, knob: Knob, outcome: &Outcome) {
        if let Some(a) = self
            .history
            .iter_mut()
            .rev()
            .find(|a| a.device.key() == key && a.knob == knob)
        {
            a.outcome = outcome.clone();
        }
        if let Some(id) = self.device_by_key(key).map(|d| d.id.clone()) {
            self.state.set_last_outcome(&id, knob, outcome.clone());
        }
    }

    /// Closes the evaluation windows that are due.
    pub(crate) async fn evaluate_due(&mut self, snap: &Snapshot, now: Duration) {
        // Move fresh windows past the rebuild transient
        // (`Evaluation::settled`).
        let evaluation = self.policy.timing.evaluation;
        for ev in &mut self.evaluations {
            if let Some(dev) = snap.devices.iter().find(|d| d.id.key() == ev.key) {
                ev.settle(dev, now, evaluation);
            }
        }
        let (due, open): (Vec<Evaluation>, Vec<Evaluation>) = std::mem::take(&mut self.evaluations)
            .into_iter()
            .partition(|e| e.ends <= now);
        self.evaluations = open;
        if due.is_empty() {
            return;
        }
        let threshold = self.policy.thresholds.grow_recycle_miss;
        for ev in due {
            let Some(dev) = snap.devices.iter().find(|d| d.id.key() == ev.key).cloned() else {
                continue;
            };
            let verdict = ev.judge(&dev, now, threshold);
            let outcome = verdict.outcome();
            if let Verdict::Harmful(why) = &verdict {
                tracing::warn!(device = %dev.name, knob = %ev.knob, "change made harm worse ({why}): reverting {} -> {}", ev.to, ev.from);
                self.expected.insert((ev.key.clone(), ev.knob), ev.from);
                match set_knob(&*self.kernel, dev.ifindex, ev.knob, ev.from).await {
                    Ok(Some(v)) => {
                        self.expected.insert((ev.key.clone(), ev.knob), v);
                        self.count_action(&dev.name, ev.knob, "revert", "applied");
                    }
                    other => {
                        self.expected.insert((ev.key.clone(), ev.knob), ev.to);
                        self.count_action(&dev.name, ev.knob, "revert", "failed");
                        let msg = match other {
                            Err(e) => e.to_string(),
                            Ok(_) => "no read-back".to_owned(),
                        };
                        self.fail(&ev.key, &dev.name, format!("revert failed: {msg}"));
                    }
                }
            } else {
                tracing::info!(device = %dev.name, knob = %ev.knob, "change {} -> {}: {outcome}: {}", ev.from, ev.to, verdict.why());
            }
            let direction = if ev.to >= ev.from { "grow" } else { "shrink" };
            self.count_action(&dev.name, ev.knob, direction, outcome.label());
            self.set_outcome(&ev.key, ev.knob, &outcome);
        }
        let _ = self.save_state();
    }

    /// Restores originals (all devices, or the named ones) from a fresh
    /// sample, and forgets what was restored.
    pub(crate) async fn restore(&mut self, interfaces: &[String]) -> (Vec<String>, bool) {
        let devices: Vec<Device> = match self
            .kernel
            .sample(&crate::kernel::SampleScope::default())
            .await
        {
            Ok(s) => s.devices,
            Err(_) => self.devices.values().cloned().collect(),
        };
        let (lines, ok, done) =
            restore_originals(&*self.kernel, &mut self.state, &devices, interfaces).await;
        for (key, knob, v) in done {
            self.expected.insert((key.clone(), knob), v);
            self.evaluations
                .retain(|e| !(e.key == key && e.knob == knob));
            if let Some(d) = devices.iter().find(|d| d.id.key() == key) {
                self.count_action(&d.name, knob, "restore", "applied");
            }
        }
        let _ = self.save_state();
        self.update_view();
        (lines, ok)
    }
}
