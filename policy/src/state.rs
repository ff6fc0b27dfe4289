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
}

impl DeviceState {
    /// Calm ends: a window that was not calm, or a ring change.
    pub fn end_calm(&mut self) {
        self.calm_since = None;
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
