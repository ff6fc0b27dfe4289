//! The window a change is judged over: opened at the change, settled past
//! the rebuild, closed into a verdict ([`Closed`]) that says what the
//! daemon does with it, and for a change put back by the harm rule, the
//! revert's own window.

use std::time::Duration;

use super::{Verdict, harm_rose, judge_revert, judge_within};
use crate::observation::Outcome;
use crate::plan::{Knob, ReasonCode};
use crate::policy::Policy;
use crate::price::MissCost;
use crate::snapshot::Device;
use crate::window::{LoadAcc, Rates};

/// What a window judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// A change pptune made, on the signal it was made for and on harm.
    Change,
    /// pptune's revert of a change the harm rule put back, on harm alone:
    /// `from` is the change's value, `to` the one the revert restored.
    Revert,
}

/// An open post-change evaluation window: what the daemon keeps between
/// the change and the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Device identity key.
    pub key: String,
    pub knob: Knob,
    pub from: u32,
    pub to: u32,
    /// The change's reason (for a revert, the reverted change's).
    pub reason: ReasonCode,
    pub judged: Judged,
    pub ends: Duration,
    pub baseline: Option<Rates>,
    /// The device sampled right after the change (new pools' counters start
    /// here), and when.
    pub start: Device,
    pub start_at: Duration,
    /// Whether the window has been moved past the rebuild transient: a ring
    /// or channel change empties every pool and restarts every queue, so the
    /// first interval after it shows refills from empty pools and the drops
    /// of a queue that was briefly stopped — costs of changing, not of the
    /// new setting. The window restarts at the first regular sample after
    /// the change.
    pub settled: bool,
    /// Pages each queue's pools had out over the settled window's samples:
    /// the load the change is judged under.
    pub load: LoadAcc,
    /// The first sample at or past the settled window's middle, and when:
    /// the window's halves, whose shares say whether the load held while
    /// the change was judged ([`super::grew_within`]).
    pub mid: Option<(Device, Duration)>,
}

/// A change the kernel took: `knob` went `from` → `to` (the value read
/// back) for `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    pub knob: Knob,
    pub from: u32,
    pub to: u32,
    pub reason: ReasonCode,
}

impl Evaluation {
    /// Opens the window on a change applied at `at` to the device `start`
    /// (sampled right after it), to be judged against `baseline` over
    /// `policy.timing.evaluation` from the first regular sample after the
    /// change ([`Self::advance`]). The daemon and the replay open every
    /// window here.
    #[must_use]
    pub fn open(
        change: Applied,
        baseline: Option<Rates>,
        start: Device,
        at: Duration,
        policy: &Policy,
    ) -> Self {
        Self {
            key: start.id.key(),
            knob: change.knob,
            from: change.from,
            to: change.to,
            reason: change.reason,
            judged: Judged::Change,
            ends: at.saturating_add(policy.timing.evaluation),
            baseline,
            start,
            start_at: at,
            settled: false,
            load: LoadAcc::default(),
            mid: None,
        }
    }

    /// The window's step on each sample `dev` of its device at `now`:
    /// settles a fresh window, and once it has closed, the verdict and
    /// what to do with it. `None`: still open.
    pub fn advance(&mut self, dev: &Device, now: Duration, policy: &Policy) -> Option<Closed> {
        if self.settled {
            self.load.add(dev);
            let half = self.start_at + self.ends.saturating_sub(self.start_at) / 2;
            if self.mid.is_none() && now >= half && !self.due(now) {
                self.mid = Some((dev.clone(), now));
            }
        } else {
            self.settle(dev, now, policy);
        }
        self.due(now).then(|| self.close(dev, now, policy))
    }

    /// Moves a fresh window past the rebuild transient: it is judged over
    /// `timing.evaluation` from the first regular sample after the change,
    /// or, for a trial queue cut, over a window as long as its baseline
    /// (equal windows before and after: the delivered rate is compared;
    /// it closes on the sample nearest that length).
    fn settle(&mut self, dev: &Device, now: Duration, policy: &Policy) {
        if !self.settled {
            let len = match (self.judged, &self.reason, &self.baseline) {
                (Judged::Change, ReasonCode::ChannelsShrinkTrial, Some(b)) if b.secs > 0.0 => {
                    let base = Duration::from_secs_f64(b.secs);
                    base.saturating_sub((policy.timing.interval / 2).min(base / 2))
                }
                _ => policy.timing.evaluation,
            };
            self.start = dev.clone();
            self.start_at = now;
            self.ends = now.saturating_add(len);
            self.settled = true;
            self.load = LoadAcc::default();
            self.load.add(dev);
            self.mid = None;
        }
    }

    /// Whether the window has closed at `now` (then it is judged).
    fn due(&self, now: Duration) -> bool {
        self.ends <= now
    }

    /// The window ending with `dev` at `now`, judged.
    fn close(&self, dev: &Device, now: Duration, policy: &Policy) -> Closed {
        let after =
            Rates::between(&self.start, dev, now.saturating_sub(self.start_at)).map(|r| Rates {
                load: self.load.mean(),
                ..r
            });
        let (values, before) = ((self.from, self.to), self.baseline.as_ref());
        let halves = self.mid.as_ref().and_then(|(mid, at)| {
            Some((
                Rates::between(&self.start, mid, at.saturating_sub(self.start_at))?,
                Rates::between(mid, dev, now.saturating_sub(*at))?,
            ))
        });
        let (verdict, outcome) = match self.judged {
            Judged::Change => {
                let v = judge_within(
                    self.reason,
                    values,
                    before,
                    after.as_ref(),
                    halves.as_ref(),
                    policy,
                    MissCost::of(dev),
                );
                let o = v.outcome();
                (v, o)
            }
            // The change's record keeps `reverted` unless the revert is
            // undone: then the change's harm was not the change's, and it
            // is not judged (no bar on the next growth, no step to fit).
            Judged::Revert => {
                let v = judge_revert(values, before, after.as_ref());
                let o = if matches!(v, Verdict::Harmful(_)) {
                    Outcome::Inconclusive
                } else {
                    Outcome::Reverted
                };
                (v, o)
            }
        };
        let harmful = matches!(verdict, Verdict::Harmful(_));
        // Only a change the harm rule put back has its revert judged (a
        // trial cut put back for its rate, a give-back for its misses,
        // were not about harm), and a revert's undoing is final.
        let revert_baseline = (harmful && self.judged == Judged::Change)
            .then(|| {
                let zero = Rates::default();
                let after = after.as_ref()?;
                harm_rose(before.unwrap_or(&zero), after)?;
                Some(after.clone())
            })
            .flatten();
        Closed {
            ev: self.clone(),
            set: harmful.then_some(self.from),
            verdict,
            outcome,
            revert_baseline,
        }
    }
}

/// A window that closed: its verdict, and what the daemon does with it.
/// The daemon, the replay's counterfactual and the rule tests all act on
/// this, so what a verdict does is decided here once.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    /// The window that closed.
    pub ev: Evaluation,
    pub verdict: Verdict,
    /// The outcome for the change's record: the change's verdict, or after
    /// its revert's window, `reverted` (the revert stands) or
    /// `inconclusive` (the revert was undone).
    pub outcome: Outcome,
    /// The value to set the knob to now: the old value of a change that
    /// did harm, or the change's value again when its revert did worse.
    pub set: Option<u32>,
    /// The revert's baseline: harm at the change's value, over the window
    /// that put it back (`None`: the revert is not judged).
    revert_baseline: Option<Rates>,
}

impl Closed {
    /// A window that ends without a verdict, for `why`. A change's record
    /// closes `inconclusive`: it bars nothing, calibrates nothing, and no
    /// longer holds its device as a change still judged (a `pending`
    /// record would, for good). A revert stands.
    #[must_use]
    pub fn unjudged(ev: Evaluation, why: &str) -> Self {
        let outcome = match ev.judged {
            Judged::Change => Outcome::Inconclusive,
            Judged::Revert => Outcome::Reverted,
        };
        Self {
            ev,
            verdict: Verdict::NoData(why.to_owned()),
            outcome,
            set: None,
            revert_baseline: None,
        }
    }

    /// The outcome to record when [`Self::set`] did not take (the kernel
    /// refused it, the device went): a failed undo leaves the revert
    /// standing; a failed revert keeps its verdict, as before.
    #[must_use]
    pub fn outcome_if_unset(&self) -> Outcome {
        match self.ev.judged {
            Judged::Change => self.outcome.clone(),
            Judged::Revert => Outcome::Reverted,
        }
    }

    /// The window that judges the revert, once [`Self::set`] is applied and
    /// read back: from `start`, the device sampled right after it, at `at`,
    /// against the harm of the window that put the change back, with the
    /// same harm rule and the same settling. `None` when this revert is not
    /// judged (see [`Judged::Revert`]).
    #[must_use]
    pub fn revert_window(
        &self,
        start: Device,
        at: Duration,
        policy: &Policy,
    ) -> Option<Evaluation> {
        let baseline = self.revert_baseline.clone()?;
        let ev = &self.ev;
        let change = Applied {
            knob: ev.knob,
            from: ev.to,
            to: ev.from,
            reason: ev.reason,
        };
        Some(Evaluation {
            judged: Judged::Revert,
            ..Evaluation::open(change, Some(baseline), start, at, policy)
        })
    }
}

/// "change 512 -> 1024: effective: why", "revert of 1024 -> 512: …": the
/// window, the outcome recorded and the verdict's reason, as the daemon
/// logs a verdict that sets nothing back.
impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ev = &self.ev;
        let what = match ev.judged {
            Judged::Change => "change",
            Judged::Revert => "revert of",
        };
        let why = self.verdict.why();
        write!(
            f,
            "{what} {} -> {}: {}: {why}",
            ev.from, ev.to, self.outcome
        )
    }
}

/// The windows open on a host's devices: each takes its device's samples
/// until it closes. What the daemon keeps between its changes and their
/// verdicts.
#[derive(Debug, Clone, Default)]
pub struct OpenWindows(Vec<Evaluation>);

impl OpenWindows {
    pub fn open(&mut self, ev: Evaluation) {
        self.0.push(ev);
    }

    #[must_use]
    pub fn list(&self) -> &[Evaluation] {
        &self.0
    }

    /// Ends the windows of device `key` (of its `knob` only, when given)
    /// unjudged, for `why`: the device is gone, or its knob is no longer
    /// pptune's. Their records close as [`Closed::unjudged`] says.
    pub fn forget(&mut self, key: &str, knob: Option<Knob>, why: &str) -> Vec<Closed> {
        self.0
            .extract_if(.., |e| e.key == key && knob.is_none_or(|k| e.knob == k))
            .map(|e| Closed::unjudged(e, why))
            .collect()
    }

    /// Every window takes its device's sample in `snap` at `now`; the
    /// closed ones leave with their verdict and that sample. A window
    /// whose device `snap` lacks ends unjudged, with the device as last
    /// sampled: the daemon forgets a device missing from a sample (it
    /// vanished; one that comes back starts afresh). The daemon, the
    /// replay and the rule tests all keep their windows here.
    pub fn advance(
        &mut self,
        snap: &crate::snapshot::Snapshot,
        now: Duration,
        policy: &Policy,
    ) -> Vec<(Closed, Device)> {
        let mut ended = Vec::new();
        self.0.retain_mut(
            |ev| match snap.devices.iter().find(|d| d.id.key() == ev.key) {
                Some(dev) => match ev.advance(dev, now, policy) {
                    Some(closed) => {
                        ended.push((closed, dev.clone()));
                        false
                    }
                    None => true,
                },
                None => {
                    let last = ev.start.clone();
                    ended.push((Closed::unjudged(ev.clone(), VANISHED), last));
                    false
                }
            },
        );
        ended
    }
}

/// Why a window whose device left the sample ended unjudged.
pub const VANISHED: &str = "the device vanished while the change was judged";
