//! The loop's view of other owners, kept from tick to tick.

use policy::Knob;
use policy::snapshot::Device;

use super::{Roots, Sources};

/// The loop's view of other owners: re-read every tick (the files are few
/// and small, and an owner added or removed counts at once), each (device,
/// knob, owner) logged once when first seen.
#[derive(Debug)]
pub struct Tracker {
    roots: Roots,
    seen: std::collections::BTreeSet<(String, Knob, String)>,
    deferred: Vec<(policy::snapshot::DeviceId, Knob)>,
}

impl Tracker {
    #[must_use]
    pub fn new(roots: Roots) -> Self {
        Self {
            roots,
            seen: std::collections::BTreeSet::new(),
            deferred: Vec::new(),
        }
    }

    /// The knobs deferred to their owner at the last [`Tracker::deferred`].
    #[must_use]
    pub fn current(&self) -> &[(policy::snapshot::DeviceId, Knob)] {
        &self.deferred
    }

    /// Re-reads the owners: the (device, knob) pairs another configuration
    /// owns, to be treated like operator overrides under `coexist: defer`
    /// (none under `warn`). Kept for [`Tracker::current`].
    pub fn deferred(
        &mut self,
        mode: policy::Coexist,
        devices: &[Device],
    ) -> Vec<(policy::snapshot::DeviceId, Knob)> {
        let sources = Sources::read(&self.roots);
        let mut out = Vec::new();
        for d in devices {
            for (knob, owner) in sources.owners(d) {
                if self.seen.insert((d.id.key(), knob, owner.to_string())) {
                    let value = owner
                        .value
                        .map_or_else(|| "max".to_owned(), |v| v.to_string());
                    match mode {
                        policy::Coexist::Defer => tracing::info!(
                            device = %d.name, knob = %knob, owner = %owner, value = %value,
                            "{knob} of {} is set by {owner}: pptune leaves it to that owner (coexist: defer)", d.name
                        ),
                        policy::Coexist::Warn => tracing::warn!(
                            device = %d.name, knob = %knob, owner = %owner, value = %value,
                            "{knob} of {} is also set by {owner}, which re-applies it when the link is reconfigured; pptune manages it anyway (coexist: warn)", d.name
                        ),
                    }
                }
                if mode == policy::Coexist::Defer {
                    out.push((d.id.clone(), knob));
                }
            }
        }
        self.deferred.clone_from(&out);
        out
    }
}
