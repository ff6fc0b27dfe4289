//! What the engine remembers between evaluations. Plain data: the daemon
//! persists it in its state file (JSON, with [`ENGINE_STATE_VERSION`]) so a
//! restart keeps the open windows, the streaks and the ring probe — a
//! growth chain interrupted by a restart continues with a calibrated step
//! instead of jumping to the limit.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    /// Since when (obs.now) every queue has been calm; `None` = not calm.
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
    /// While calm: the most pages any queue had out at once beyond its
    /// posted ring lately (`decide::ring::held_pages`): a calm shrink keeps
    /// the ring those pages still need.
    #[serde(default)]
    pub calm_held: HeldPeak,
}

impl DeviceState {
    /// Calm ends: a window that was not calm, or a ring change.
    pub fn end_calm(&mut self) {
        self.calm_since = None;
        self.calm_held = HeldPeak::default();
    }
}

/// The largest of a count over the last `span` of samples, in two halves:
/// the peak covers at least the last `span` and at most the last 2 ×
/// `span`, so a peak that stopped recurring falls out within 2 × `span`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldPeak {
    /// When the current half began (obs.now).
    pub started: Duration,
    pub current: u64,
    pub previous: u64,
}

impl HeldPeak {
    /// Notes a sample's `held` at `now`.
    pub fn note(&mut self, now: Duration, span: Duration, held: u64) {
        let age = now.saturating_sub(self.started);
        if age >= span {
            self.previous = if age >= span.saturating_mul(2) {
                0
            } else {
                self.current
            };
            self.current = 0;
            self.started = now;
        }
        self.current = self.current.max(held);
    }

    /// The peak over the last `span` to 2 × `span`.
    #[must_use]
    pub fn peak(&self) -> u64 {
        self.current.max(self.previous)
    }
}

/// The window a ring growth was decided on: the pool it had and the pages
/// per ring fill it freed (pool × ring_full / recycle_ring, worst queue).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RingProbe {
    /// The ring value the growth proposed (valid only while the device has it).
    pub ring: u32,
    /// Pool entries before the growth.
    pub pool_before: u32,
    /// Excess pages per ring fill before the growth.
    pub excess_before: f64,
    /// The growth went to the geometric mean of ring_full's lower bound
    /// and the pages out at once (`BurstBasis::Bracketed`): a later step
    /// with nothing calibrated may take the pages out.
    #[serde(default)]
    pub bracketed: bool,
}

impl EngineState {
    /// Moves every monotonic instant in the state from a clock that reads
    /// `old_now` to one that reads `new_now` at the same moment (a restarted
    /// daemon's clock starts again at zero). Instants older than the new
    /// clock's origin become its origin.
    pub fn rebase(&mut self, old_now: Duration, new_now: Duration) {
        for d in self.devices.values_mut() {
            let rebase = |t: Duration| new_now.saturating_sub(old_now.saturating_sub(t));
            if let Some(since) = &mut d.calm_since {
                *since = rebase(*since);
            }
            d.calm_held.started = rebase(d.calm_held.started);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_peak_covers_one_to_two_spans() {
        let span = Duration::from_secs(60);
        let at = Duration::from_secs;
        let mut p = HeldPeak::default();
        p.note(at(0), span, 500);
        p.note(at(50), span, 100);
        assert_eq!(p.peak(), 500);
        // A new half: the last one's peak stays.
        p.note(at(70), span, 0);
        assert_eq!(p.peak(), 500);
        // Two halves on, it is gone.
        p.note(at(130), span, 0);
        assert_eq!(p.peak(), 0);
        // A gap of two spans or more forgets both halves at once.
        p.note(at(140), span, 900);
        p.note(at(400), span, 10);
        assert_eq!(p.peak(), 10);
    }

    #[test]
    fn rebase_keeps_ages_and_round_trips_through_json() {
        let mut s = EngineState::default();
        s.devices.insert(
            "pci/0000:3b:00.0/-".into(),
            DeviceState {
                grow_windows: 1,
                calm_since: Some(Duration::from_secs(100)),
                ring_probe: Some(RingProbe {
                    ring: 1024,
                    pool_before: 256,
                    excess_before: 1500.5,
                    bracketed: true,
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
    }
}
