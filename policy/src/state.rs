//! What the engine remembers between evaluations. Plain data: the daemon
//! persists it (JSON) so a restart keeps the open windows and streaks.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::window::WindowAcc;

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
}
