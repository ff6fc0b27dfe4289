//! What the engine remembers between evaluations. Plain data: the daemon
//! persists it in its state file (JSON, with [`ENGINE_STATE_VERSION`]) so a
//! restart keeps the open windows, the streaks and the ring probe — a
//! growth chain interrupted by a restart continues with a calibrated step
//! instead of jumping to the limit.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::accounting::QueueKey;
use crate::snapshot::PoolStats;
use crate::window::WindowAcc;

/// Bumped on any incompatible change of [`EngineState`]: a persisted state
/// of another version is dropped (the engine starts fresh), never misread.
pub const ENGINE_STATE_VERSION: u32 = 1;

/// The engine's memory, keyed by device identity ([`crate::snapshot::DeviceId::key`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineState {
    pub devices: BTreeMap<String, DeviceState>,
}

/// Per device: the open window and the consecutive-window counters, one per
/// finding (a finding belongs to one knob: ring growth and calm to the ring,
/// contention and healthy drops to channels).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceState {
    pub window: WindowAcc,
    /// Consecutive windows whose worst queue says "grow the ring".
    pub grow_windows: u32,
    /// Consecutive windows with the slow path contended.
    pub contended_windows: u32,
    /// Consecutive windows with drops while recycling was healthy.
    pub drop_windows: u32,
    /// Since when (obs.pass.now) every queue has been calm; `None` = not calm.
    pub calm_since: Option<Duration>,
    /// Closed windows seen for this device.
    pub windows_closed: u64,
    /// What the last proposed ring growth saw before it: the second step
    /// calibrates the burst estimate against it (`docs/decisions.md` §4).
    #[serde(default)]
    pub ring_probe: Option<RingProbe>,
    /// Samples in a row with a severe miss on some queue
    /// (`thresholds.severe_recycle_miss`), since the last window closed.
    #[serde(default)]
    pub severe_samples: u32,
    /// The most pages any queue had out beyond its posted ring since the
    /// pools were built (`decide::ring::held_pages`). A pool's `inflight`
    /// counts the pages parked in its own ring and cache, and a pool gives
    /// pages back only when that ring is full: while the pool lives this
    /// is a high-water mark of what the load needed, not what it needs
    /// now, and only a rebuild (a ring or channel change) starts it again.
    #[serde(default)]
    pub pool_held: PoolHeld,
    /// Since when (obs.pass.now) no queue has had enough traffic to judge;
    /// `None` = some queue had. A load that is gone needs no ring.
    #[serde(default)]
    pub idle_since: Option<Duration>,
    /// Give-back trials that brought recycle misses back, and when.
    #[serde(default)]
    pub shrink_hold: ShrinkHold,
    /// What the calm since `calm_since` returned and freed, per queue.
    #[serde(default)]
    pub calm: CalmLedger,
}

/// Since when the load has been gone: no queue had traffic to judge from
/// `idle_since` on, for at least `calm` by `now` (`None`: not gone). The
/// one reading of "the load is gone" (the hold's end, the step to the
/// floor).
#[must_use]
pub fn load_gone_since(
    idle_since: Option<Duration>,
    now: Duration,
    calm: Duration,
) -> Option<Duration> {
    idle_since.filter(|s| now.saturating_sub(*s) >= calm)
}

impl DeviceState {
    /// Calm ends, and its ledger with it.
    pub fn end_calm(&mut self) {
        self.calm_since = None;
        self.calm.clear();
    }

    /// The ring was changed at `now`. A growth ends the calm. A shrink is
    /// made only from a calm, and rebuilds the pools: the calm at the new
    /// ring counts from that rebuild, and the first window at it that is
    /// not calm ends it. Counting it from the first calm window after the
    /// change instead would make each step of a descent wait a window
    /// longer than a calm for nothing the windows between had not judged.
    pub fn ring_changed(&mut self, shrunk: bool, now: Duration) {
        self.end_calm();
        self.calm_since = shrunk.then_some(now);
    }
}

/// The calm's own returns (docs/decisions.md §7): per queue, the pool
/// counters of every window since the calm began in which the queue had
/// traffic enough to judge, and the windows in a row, at the end, that
/// were over the shrink threshold. A calm is judged over what it returned,
/// not window by window: at the shipped timing (30 s windows, a 6 h calm)
/// one window over the shrink threshold, a single burst's spill among
/// thousands, restarted the calm, and a ring grown for a load that had
/// turned quiet but not silent never gave its memory back. Kept per queue:
/// a device-wide sum would dilute one hot queue in the others' returns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalmLedger {
    /// Per queue, ascending by key, each key once.
    pub queues: Vec<(QueueKey, PoolStats)>,
    /// Windows in a row, at the end of the calm, in which some judged
    /// queue freed at least the shrink threshold.
    pub over_windows: u32,
}

impl CalmLedger {
    /// Empties the ledger (its storage kept: the queues come back).
    pub fn clear(&mut self) {
        self.queues.clear();
        self.over_windows = 0;
    }

    /// Adds a closed window: the counters of each queue that moved at
    /// least `min_pages` in it ([`crate::window::judged`]). The streak of
    /// windows over the threshold is the engine's to count, as its other
    /// streaks are.
    pub fn fold(&mut self, window: &WindowAcc, min_pages: u64) {
        for (key, q) in &window.queues {
            if !crate::window::judged(&q.stats, min_pages) {
                continue;
            }
            match self.queues.binary_search_by(|(k, _)| k.cmp(key)) {
                Ok(at) => self.queues[at].1 = self.queues[at].1.add(&q.stats),
                Err(at) => self.queues.insert(at, (*key, q.stats)),
            }
        }
    }

    /// Whether the calm is over: some queue freed at least `threshold` of
    /// what it returned over the whole calm, or `windows` windows in a row
    /// were over it (a load that changed, not one spill).
    #[must_use]
    pub fn over(&self, threshold: f64, windows: u32) -> bool {
        self.over_windows >= windows.max(1)
            || self
                .queues
                .iter()
                .any(|(_, s)| crate::signals::recycle_miss_share(s).is_some_and(|m| m >= threshold))
    }
}

/// The most pages out beyond the posted ring since the device's pools were
/// built, and the ring they were built at: a high-water mark that only a
/// rebuild resets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolHeld {
    /// The ring the pools had when the mark was taken (0: none yet).
    pub ring: u32,
    /// Pages out at once beyond the posted ring, at most, since then.
    pub pages: u64,
    /// Closed windows the mark covers.
    pub windows: u32,
}

impl PoolHeld {
    /// Notes a closed window's peak `held` at the device's `ring`. A ring
    /// other than the one the mark was taken at means the pools were
    /// rebuilt (by pptune or by anyone): the mark starts again.
    pub fn note(&mut self, ring: u32, held: u64) {
        if ring != self.ring {
            *self = Self {
                ring,
                ..Self::default()
            };
        }
        self.pages = self.pages.max(held);
        self.windows = self.windows.saturating_add(1);
    }

    /// A rebuild: the pools start afresh, and so does the mark.
    pub fn rebuilt(&mut self) {
        *self = Self::default();
    }
}

/// The give-back trials of a ring that failed (were put back because
/// recycle misses returned, or did not hold), in a row: the load needs the
/// ring, so no trial is made while [`Self::holds`] says so — for a hold
/// that scales with `timing.calm_before_shrink` and doubles with every
/// failure in a row ([`crate::gates::shrink_hold`]), or until the load is
/// gone. A kept give-back step ends the row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShrinkHold {
    /// When the last failed trial was made (`None`: no failure in a row).
    pub since: Option<Duration>,
    /// Failed trials in a row.
    pub failures: u32,
    /// The time of the last trial whose outcome was noted (each is noted once).
    pub noted: Option<Duration>,
}

impl ShrinkHold {
    /// Notes the outcome of the ring's last shrink, made at `at`: a failure
    /// extends the row, a kept step ends it; an outcome not yet known (or
    /// that could not be judged) and a trial noted before change nothing.
    /// Returns whether a failure was noted now.
    pub fn note(&mut self, at: Duration, outcome: &crate::observation::Outcome) -> bool {
        use crate::observation::Outcome;
        if self.noted.is_some_and(|n| at <= n) {
            return false;
        }
        let failed = match outcome {
            Outcome::Reverted | Outcome::Ineffective => {
                self.since = Some(at);
                self.failures = self.failures.saturating_add(1);
                true
            }
            Outcome::Effective => {
                self.since = None;
                self.failures = 0;
                false
            }
            Outcome::Pending
            | Outcome::Inconclusive
            | Outcome::Refused { .. }
            | Outcome::Failed { .. } => return false,
        };
        self.noted = Some(at);
        failed
    }

    /// Whether a give-back trial is held at `now`: a failure in a row is
    /// younger than its hold, and the load it failed under has not been
    /// gone (no traffic to judge since `idle_since`) for `calm` since then.
    #[must_use]
    pub fn holds(&self, now: Duration, calm: Duration, idle_since: Option<Duration>) -> bool {
        let Some(at) = self.since else { return false };
        let gone = load_gone_since(idle_since, now, calm).is_some_and(|s| s >= at);
        !gone && now.saturating_sub(at) < crate::gates::shrink_hold(calm, self.failures)
    }
}

/// The window a ring growth was decided on: the pool it had, the pages per
/// ring fill it freed (pool × ring_full / recycle_ring) and what it freed
/// per page handed out (worst queue).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RingProbe {
    /// The ring value the growth proposed (valid only while the device has it).
    pub ring: u32,
    /// Pool entries before the growth.
    pub pool_before: u32,
    /// Excess pages per ring fill before the growth.
    pub excess_before: f64,
    /// ring_full per page handed out before the growth
    /// ([`crate::signals::freed_per_page_handed_out`]; `None`: a state file
    /// from before it was kept, which calibrates nothing).
    #[serde(default)]
    pub freed_before: Option<f64>,
    /// The growth went to the geometric mean of ring_full's lower bound
    /// and the pages out at once (`BurstBasis::Bracketed`): a later step
    /// with nothing calibrated may take the pages out.
    #[serde(default)]
    pub bracketed: bool,
    /// The device's RX queue count when the growth was proposed (0: not
    /// recorded, a state file from before it was).
    #[serde(default)]
    pub queues: u32,
}

impl RingProbe {
    /// Whether the probe can calibrate the next step of a device at ring
    /// `ring` with `queues` RX queues: it was taken at that ring and over
    /// as many queues. A queue-count change between the steps spreads the
    /// load over another number of queues, so the excess per queue before
    /// and after the step do not compare.
    #[must_use]
    pub fn applies(&self, ring: u32, queues: u32) -> bool {
        self.ring == ring && (self.queues == 0 || self.queues == queues)
    }
}

impl EngineState {
    /// Moves every monotonic instant in the state from a clock that reads
    /// `old_now` to one that reads `new_now` at the same moment (a restarted
    /// daemon's clock starts again at zero). Instants older than the new
    /// clock's origin become its origin.
    pub fn rebase(&mut self, old_now: Duration, new_now: Duration) {
        for d in self.devices.values_mut() {
            let rebase = |t: Duration| new_now.saturating_sub(old_now.saturating_sub(t));
            let instants = [
                &mut d.calm_since,
                &mut d.idle_since,
                &mut d.shrink_hold.since,
                &mut d.shrink_hold.noted,
            ];
            for since in instants.into_iter().flatten() {
                *since = rebase(*since);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::Outcome;

    #[test]
    fn a_pool_mark_holds_until_a_rebuild() {
        let mut p = PoolHeld::default();
        p.note(2560, 2048);
        // The bursts stopped: the pool parks their pages, the mark stays.
        p.note(2560, 0);
        assert_eq!((p.pages, p.windows), (2048, 2));
        // Another ring: the pools were rebuilt, the mark starts again.
        p.note(1152, 30);
        assert_eq!((p.ring, p.pages, p.windows), (1152, 30, 1));
        p.rebuilt();
        assert_eq!(p, PoolHeld::default());
    }

    #[test]
    fn rebase_keeps_ages_and_round_trips_through_json() {
        let mut s = EngineState::default();
        s.devices.insert(
            "pci/0000:3b:00.0/-".into(),
            DeviceState {
                grow_windows: 1,
                calm_since: Some(Duration::from_secs(100)),
                idle_since: Some(Duration::from_secs(120)),
                shrink_hold: ShrinkHold {
                    since: Some(Duration::from_secs(110)),
                    failures: 2,
                    noted: Some(Duration::from_secs(110)),
                },
                ring_probe: Some(RingProbe {
                    ring: 1024,
                    pool_before: 256,
                    excess_before: 1500.5,
                    freed_before: Some(0.25),
                    bracketed: true,
                    queues: 4,
                }),
                ..DeviceState::default()
            },
        );
        let text = serde_json::to_string(&s).unwrap_or_default();
        let back: EngineState = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, s);
        // Calm for 30 s when the old clock read 130 s; the new one reads 5 s.
        s.rebase(Duration::from_secs(130), Duration::from_secs(5));
        let d = s.devices.values().next().cloned().unwrap_or_default();
        assert_eq!(d.calm_since, Some(Duration::ZERO));
        s.rebase(Duration::from_secs(10), Duration::from_secs(50));
        let d = s.devices.values().next().cloned().unwrap_or_default();
        assert_eq!(d.calm_since, Some(Duration::from_secs(40)));
        // Every instant moves with the clock: the hold keeps its age.
        assert_eq!(d.idle_since, Some(Duration::from_secs(40)));
        assert_eq!(d.shrink_hold.since, Some(Duration::from_secs(40)));
        assert_eq!(d.shrink_hold.noted, Some(Duration::from_secs(40)));
    }

    #[test]
    fn a_shrink_hold_counts_each_failure_once_and_ends_when_the_load_goes() {
        let calm = Duration::from_secs(300);
        let at = |s| Duration::from_secs(s);
        let mut h = ShrinkHold::default();
        assert!(!h.holds(at(0), calm, None));
        h.note(at(100), &Outcome::Pending);
        assert_eq!(h, ShrinkHold::default(), "not judged yet");
        h.note(at(100), &Outcome::Reverted);
        h.note(at(100), &Outcome::Reverted);
        assert_eq!(h.failures, 1, "one trial, noted once");
        // Held 8 calms from the trial.
        assert!(h.holds(at(100 + 2399), calm, None));
        assert!(!h.holds(at(100 + 2400), calm, None));
        // Idle for a calm since the trial: the load is gone.
        assert!(h.holds(at(500), calm, Some(at(300))));
        assert!(!h.holds(at(600), calm, Some(at(300))));
        // Idle since before the trial is not the load going away.
        assert!(h.holds(at(600), calm, Some(at(50))));
        h.note(at(2000), &Outcome::Ineffective);
        assert_eq!(h.failures, 2);
        assert!(h.holds(at(2000 + 4799), calm, None));
        h.note(at(5000), &Outcome::Effective);
        assert_eq!(h.since, None);
        assert!(!h.holds(at(5001), calm, None));
    }

    #[test]
    fn a_shrink_hold_doubles_from_eight_calms_to_at_most_128() {
        let calm = Duration::from_secs(60);
        let holds: Vec<u64> = (0..8)
            .map(|n| crate::gates::shrink_hold(calm, n).as_secs() / 60)
            .collect();
        assert_eq!(holds, [0, 8, 16, 32, 64, 128, 128, 128]);
    }
}
