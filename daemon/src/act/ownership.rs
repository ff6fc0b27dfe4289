//! Who a knob belongs to: the value pptune last set on it (read back), and
//! the knobs an operator took over. The actuator keeps one; the override
//! check compares what a device reports with [`Ownership::reference`].

use std::collections::BTreeMap;

use policy::plan::Knob;
use policy::snapshot::DeviceId;

/// What pptune set, and what operators took over, per (device key, knob).
#[derive(Debug, Default)]
pub(crate) struct Ownership {
    /// (device key, knob) an operator took over, with the `DeviceId`.
    overrides: BTreeMap<(String, Knob), DeviceId>,
    /// What pptune last set (read back) per (device key, knob).
    expected: BTreeMap<(String, Knob), u32>,
}

impl Ownership {
    /// pptune set `knob` of device `key` to `value` (read back).
    pub(crate) fn set(&mut self, key: &str, knob: Knob, value: u32) {
        self.expected.insert((key.to_owned(), knob), value);
    }

    /// pptune no longer knows what `knob` of `key` holds.
    pub(crate) fn unset(&mut self, key: &str, knob: Knob) {
        self.expected.remove(&(key.to_owned(), knob));
    }

    /// What pptune last set on `knob` of `key`.
    pub(crate) fn expected(&self, key: &str, knob: Knob) -> Option<u32> {
        self.expected.get(&(key.to_owned(), knob)).copied()
    }

    /// The device `key` vanished: what pptune set on it is no reference
    /// for a device back under the same identity (a driver reset or reload
    /// brings it back at the driver's defaults, which is no operator's
    /// override). An operator's takeover stays, until a reload.
    pub(crate) fn forget_device(&mut self, key: &str) {
        self.expected.retain(|(k, _), _| k != key);
    }

    pub(crate) fn overrides(&self) -> &BTreeMap<(String, Knob), DeviceId> {
        &self.overrides
    }

    /// Whether an operator took `knob` of `key` over.
    pub(crate) fn overridden(&self, key: &str, knob: Knob) -> bool {
        self.overrides.contains_key(&(key.to_owned(), knob))
    }

    /// An operator took `knob` of `id` over: pptune sets it no more.
    pub(crate) fn take_over(&mut self, id: &DeviceId, knob: Knob) {
        let key = id.key();
        self.expected.remove(&(key.clone(), knob));
        self.overrides.insert((key, knob), id.clone());
    }

    /// The knobs operators took over, and those `deferred` to another
    /// configuration that owns them, as the engine and the gates read them.
    pub(crate) fn override_list(&self, deferred: &[(DeviceId, Knob)]) -> Vec<(DeviceId, Knob)> {
        self.overrides
            .iter()
            .map(|((_, k), id)| (id.clone(), *k))
            .chain(deferred.iter().cloned())
            .collect()
    }

    /// After a reload: an operator's takeover lasts until the policy is
    /// reloaded, changed or not.
    pub(crate) fn policy_reloaded(&mut self) {
        if !self.overrides.is_empty() {
            tracing::info!(
                count = self.overrides.len(),
                "policy reloaded: operator overrides cleared"
            );
        }
        self.overrides.clear();
    }
}
