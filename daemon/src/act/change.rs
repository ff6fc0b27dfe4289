//! One change being made, from the decision that asked for it to its
//! write-ahead in the state record.

use policy::engine::Outcome;
use policy::plan::{Decision, Knob};
use policy::snapshot::Device;

use crate::act::lent::{Lent, Record};
use crate::act::state::StoredAction;
use crate::clock::unix_ms;

/// One change being made: the device's key and name, the knob, from and
/// to, and which way (for the metrics' `direction`).
pub(super) struct Change {
    pub key: String,
    pub name: String,
    pub knob: Knob,
    pub from: u32,
    pub to: u32,
    pub direction: &'static str,
}

impl Change {
    /// The change `dec` asks for; `None` for a hold.
    pub(super) fn of(dec: &Decision) -> Option<Self> {
        let (knob, from, to) = match dec.action {
            policy::Action::Hold => return None,
            policy::Action::SetRing { field, from, to } => (Knob::Ring(field), from, to),
            policy::Action::SetChannels { field, from, to } => (Knob::Channels(field), from, to),
        };
        Some(Self {
            key: dec.device_id.key(),
            name: dec.device.clone(),
            knob,
            from,
            to,
            direction: if to >= from { "grow" } else { "shrink" },
        })
    }

    /// Writes the knob's original (unless one is recorded) and the action,
    /// pending, to the state record before the knob moves: a daemon killed
    /// between the change and its confirmation ([`Actuator::log_change`])
    /// leaves both, so `restore` can put the original back and the next
    /// run closes the action `inconclusive` (`StateFile::close_pending`),
    /// a change its gates and cooldown count. When the record cannot be
    /// written (a full or read-only state directory) it stops enforcing,
    /// not observing: nothing is changed and the record is left as it was.
    pub(super) fn write_ahead<K, R: Record>(
        &self,
        dec: &Decision,
        pre: &Device,
        io: &mut Lent<'_, K, R>,
    ) -> bool {
        let file = io.record.file();
        let before = file.devices.clone();
        file.record_original(&pre.id, &pre.name, self.knob, self.from);
        file.push_action(
            &dec.device_id,
            &self.name,
            StoredAction {
                knob: self.knob,
                from: self.from,
                to: self.to,
                at_unix_ms: unix_ms(),
                reason: dec.reason.as_str().to_owned(),
                outcome: Outcome::Pending,
            },
        );
        if io.record.save() {
            return true;
        }
        io.record.file().devices = before;
        tracing::error!(device = %self.name, knob = %self.knob, "not acting: the original and the action could not be written to the state record");
        false
    }
}
