//! The daemon's record of what it changed: `/run/pptune/state.json`.
//!
//! NIC settings do not survive a reboot, so the record carries the boot id
//! and a file from another boot is stale (ignored, then overwritten). Devices
//! are keyed by identity (`DeviceId::key`: bus address and permanent MAC),
//! never by ifindex, so a renamed or re-probed NIC keeps its originals.
//!
//! Where it is kept and how it is written and read is `store`.

use std::collections::BTreeMap;
use std::time::Duration;

use policy::Knob;
use policy::engine::{ActionRecord, ENGINE_STATE_VERSION, EngineState, Outcome};
use policy::gates;
use policy::snapshot::DeviceId;
use serde::{Deserialize, Serialize};

/// Bumped on any incompatible change of [`StateFile`].
pub const SCHEMA_VERSION: u32 = 1;

/// Actions kept per device: enough for the engine's last hour and an
/// operator's look back, bounded so the file cannot grow forever.
const MAX_ACTIONS_PER_DEVICE: usize = 64;

mod store;
pub use store::*;

/// The whole record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StateFile {
    pub schema_version: u32,
    pub boot_id: String,
    /// By `DeviceId::key()`.
    pub devices: BTreeMap<String, DeviceRecord>,
    /// The engine's memory (windows, streaks, ring probe), so a restart
    /// continues where the last run stopped. Absent in records of older
    /// daemons (the engine then starts fresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<StoredEngine>,
}

/// The engine's memory as stored, with its own version and the clocks it
/// was saved at (its instants are on the saving daemon's monotonic clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEngine {
    /// [`ENGINE_STATE_VERSION`] of the daemon that wrote it.
    pub version: u32,
    /// Wall-clock time of the save.
    pub saved_unix_ms: u64,
    /// The saving daemon's monotonic clock at the save.
    pub clock_ms: u64,
    /// Per device, by `DeviceId::key()`.
    pub state: EngineState,
}

impl StoredEngine {
    /// Stores `state`, saved now (`clock`: this daemon's monotonic time).
    #[must_use]
    pub fn new(state: EngineState, clock: Duration, unix_ms: u64) -> Self {
        Self {
            version: ENGINE_STATE_VERSION,
            saved_unix_ms: unix_ms,
            clock_ms: u64::try_from(clock.as_millis()).unwrap_or(u64::MAX),
            state,
        }
    }

    /// The state on this daemon's clock (`clock` now, `unix_ms` now), or why
    /// it cannot be used.
    pub fn restore(self, clock: Duration, unix_ms: u64) -> Result<EngineState, OtherVersion> {
        if self.version != ENGINE_STATE_VERSION {
            return Err(OtherVersion(self.version));
        }
        let since_save = Duration::from_millis(unix_ms.saturating_sub(self.saved_unix_ms));
        let old_now = Duration::from_millis(self.clock_ms).saturating_add(since_save);
        let mut state = self.state;
        state.rebase(old_now, clock);
        Ok(state)
    }
}

/// Engine memory saved by a pptune with another engine state version.
#[derive(Debug, thiserror::Error)]
#[error("engine state version {0} is not {ENGINE_STATE_VERSION}")]
pub struct OtherVersion(pub u32);

/// What pptune knows about one device it touched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRecord {
    pub id: DeviceId,
    /// The name it had when last seen (for people; identity is `id`).
    pub last_name: String,
    /// Values before pptune first changed each knob.
    pub originals: Vec<KnobValue>,
    /// Recent actions, oldest first.
    pub actions: Vec<StoredAction>,
}

/// A knob and a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobValue {
    pub knob: Knob,
    pub value: u32,
}

/// One action as stored: wall-clock time, because monotonic clocks of two
/// daemon runs share no origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAction {
    pub knob: Knob,
    pub from: u32,
    pub to: u32,
    pub at_unix_ms: u64,
    pub reason: String,
    pub outcome: Outcome,
}

impl StateFile {
    /// The recorded actions as the engine's history, stored wall times
    /// (`wall`, now) mapped onto a monotonic clock reading `mono` now, oldest
    /// first. An action from before the clock's origin gets `at` = 0, which
    /// keeps its cooldown active for at least as long as it really is;
    /// those older than the gates read ([`gates::HISTORY_KEEP`]) are left
    /// out.
    #[must_use]
    pub fn history(&self, wall: Duration, mono: Duration) -> Vec<ActionRecord> {
        let mut history: Vec<ActionRecord> = self
            .devices
            .values()
            .flat_map(|r| {
                // Older than the two hours the engine and budget look at:
                // history, not input.
                r.actions.iter().filter_map(move |a| {
                    let ago = wall.saturating_sub(Duration::from_millis(a.at_unix_ms));
                    (ago <= gates::HISTORY_KEEP).then(|| ActionRecord {
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
        history.sort_by_key(|a| a.at);
        history
    }

    /// The recorded originals, as the engine reads them (`pptune run` and
    /// `pptune plan` alike).
    #[must_use]
    pub fn originals(&self) -> Vec<policy::engine::Original> {
        self.devices
            .values()
            .flat_map(|r| {
                r.originals.iter().map(|o| policy::engine::Original {
                    device: r.id.clone(),
                    knob: o.knob,
                    value: o.value,
                })
            })
            .collect()
    }

    #[must_use]
    pub fn new(boot_id: String) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            boot_id,
            devices: BTreeMap::new(),
            engine: None,
        }
    }

    /// Closes evaluations a previous run left open: their windows died with
    /// it, so they end `inconclusive` (no data), not pending forever.
    /// Returns how many were closed.
    pub fn close_pending(&mut self) -> usize {
        let mut n = 0;
        for a in self.devices.values_mut().flat_map(|r| r.actions.iter_mut()) {
            if a.outcome == Outcome::Pending {
                a.outcome = Outcome::Inconclusive;
                n += 1;
            }
        }
        n
    }

    /// The record of a device, created on first use.
    pub fn device_mut(&mut self, id: &DeviceId, name: &str) -> &mut DeviceRecord {
        let rec = self
            .devices
            .entry(id.key())
            .or_insert_with(|| DeviceRecord {
                id: id.clone(),
                ..DeviceRecord::default()
            });
        name.clone_into(&mut rec.last_name);
        rec
    }

    /// Records `value` as the original of `knob` unless one is known.
    pub fn record_original(&mut self, id: &DeviceId, name: &str, knob: Knob, value: u32) -> bool {
        let rec = self.device_mut(id, name);
        if rec.originals.iter().any(|o| o.knob == knob) {
            return false;
        }
        rec.originals.push(KnobValue { knob, value });
        true
    }

    /// The original of a knob, if recorded.
    #[must_use]
    pub fn original(&self, id: &DeviceId, knob: Knob) -> Option<u32> {
        self.devices
            .get(&id.key())?
            .originals
            .iter()
            .find(|o| o.knob == knob)
            .map(|o| o.value)
    }

    /// Forgets the original of a knob (restored, or an operator owns it now).
    pub fn forget_original(&mut self, id: &DeviceId, knob: Knob) {
        if let Some(rec) = self.devices.get_mut(&id.key()) {
            rec.originals.retain(|o| o.knob != knob);
        }
    }

    /// Appends an action, keeping the list bounded.
    pub fn push_action(&mut self, id: &DeviceId, name: &str, action: StoredAction) {
        let rec = self.device_mut(id, name);
        rec.actions.push(action);
        if rec.actions.len() > MAX_ACTIONS_PER_DEVICE {
            let drop = rec.actions.len() - MAX_ACTIONS_PER_DEVICE;
            rec.actions.drain(..drop);
        }
    }

    /// Confirms the latest action on (device, knob), written ahead of its
    /// change: the value the kernel took (a driver may round) and the
    /// outcome.
    pub fn confirm_last_action(&mut self, id: &DeviceId, knob: Knob, to: u32, outcome: Outcome) {
        if let Some(a) = self.last_action_mut(id, knob) {
            a.to = to;
            a.outcome = outcome;
        }
    }

    fn last_action_mut(&mut self, id: &DeviceId, knob: Knob) -> Option<&mut StoredAction> {
        self.devices
            .get_mut(&id.key())?
            .actions
            .iter_mut()
            .rev()
            .find(|a| a.knob == knob)
    }

    /// Updates the outcome of the latest action on (device, knob).
    pub fn set_last_outcome(&mut self, id: &DeviceId, knob: Knob, outcome: Outcome) {
        if let Some(a) = self.last_action_mut(id, knob) {
            a.outcome = outcome;
        }
    }

    /// Drops devices with neither originals nor actions.
    pub fn prune(&mut self) {
        self.devices
            .retain(|_, r| !r.originals.is_empty() || !r.actions.is_empty());
    }
}
