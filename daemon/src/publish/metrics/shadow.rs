//! The shadow policy's series (`pptune_shadow_*`): what a second policy
//! would do on this host's live samples, from the counterfactual engine
//! the loop runs beside its own (`service::shadow`). Once the shadow's
//! ring differs from the live one its counters are the ring model's, so
//! the share and memory gauges are named `modelled`, and
//! `pptune_shadow_modelled` says per device whether they already are.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use policy::Policy;
use policy::accounting::PassDeltas;
use policy::knobs;
use policy::plan::{Knob, Plan};
use policy::snapshot::Snapshot;
use prometheus_client::metrics::counter::Counter;
use record::counterfactual::Counterfactual;

use super::families::Families;
use super::labels::{DevLabels, KnobLabels};

/// The shadow series each device has, so a vanished device (or a shadow
/// turned off) takes them with it.
#[derive(Debug, Default)]
pub struct ShadowSeries {
    devices: Mutex<BTreeMap<String, ShadowDevice>>,
}

#[derive(Debug, Default)]
struct ShadowDevice {
    targets: BTreeSet<KnobLabels>,
    changes: BTreeMap<KnobLabels, Counter>,
    /// Pass of the last snapshot that had the device.
    seen: u64,
}

/// One pass of the shadow, as the loop hands it over.
#[derive(Debug)]
pub struct ShadowPass<'a> {
    pub policy: &'a Policy,
    /// The shadow's snapshot (its knob values, its modelled counters; the
    /// live one until its first change) and the pass's deltas over it.
    pub snapshot: &'a Snapshot,
    pub deltas: &'a PassDeltas,
    /// The shadow's engine: which devices are modelled.
    pub engine: &'a Counterfactual,
    /// Its plan; the enforce-mode changes in it are the ones it applied.
    pub plan: &'a Plan,
    /// Counts passes, to find the devices that went away.
    pub tick: u64,
}

impl ShadowSeries {
    /// Writes one pass: per device the shadow selects, its target per
    /// managed knob (the value it would have set, or keep), its modelled
    /// miss share and pool memory, whether they are modelled; per change
    /// it would make, `pptune_shadow_changes_total`.
    pub fn observe(&self, f: &Families, p: &ShadowPass<'_>) {
        let Ok(mut devices) = self.devices.lock() else {
            return;
        };
        for (at, dev) in p.snapshot.devices.iter().enumerate() {
            let Some(dec) = p.plan.decisions.iter().find(|d| d.ifindex == dev.ifindex) else {
                continue;
            };
            let kept = devices.entry(dev.name.clone()).or_default();
            kept.seen = p.tick;
            let applied = dec.enforced_change().map(|(knob, _, to)| (knob, to));
            for k in knobs::all().filter(|k| (k.managed)(p.policy)) {
                let value = match applied {
                    Some((knob, to)) if knob == k.knob => Some(to),
                    _ => k.read(dev).0,
                };
                if let Some(v) = value {
                    let l = labels(&dev.name, k.knob);
                    f.shadow_target.get_or_create(&l).set(i64::from(v));
                    // The change counter exists at 0 from the start: a
                    // series born at 1 hides its first change from
                    // Prometheus' increase() and rate().
                    if !kept.changes.contains_key(&l) {
                        let c = f.shadow_changes.get_or_create(&l);
                        kept.changes.insert(l.clone(), c);
                    }
                    kept.targets.insert(l);
                }
            }
            if let Some((knob, _)) = applied {
                let l = labels(&dev.name, knob);
                kept.changes
                    .entry(l)
                    .or_insert_with_key(|l| f.shadow_changes.get_or_create(l))
                    .inc();
            }
            let d = DevLabels {
                device: dev.name.clone(),
            };
            let delta = p.deltas.device(at);
            match policy::signals::recycle_miss_share(&delta.stats).filter(|_| !delta.reset) {
                Some(share) => {
                    f.shadow_miss.get_or_create(&d).set(share);
                }
                None => {
                    f.shadow_miss.remove(&d);
                }
            }
            let mem: u64 = dev.pools().filter_map(|p| p.inflight_mem).sum();
            f.shadow_memory
                .get_or_create(&d)
                .set(i64::try_from(mem).unwrap_or(i64::MAX));
            f.shadow_modelled
                .get_or_create(&d)
                .set(i64::from(p.engine.is_modelled(&dev.id.key())));
        }
        devices.retain(|name, kept| {
            let keep = kept.seen == p.tick;
            if !keep {
                forget(f, name, kept);
            }
            keep
        });
    }

    /// Drops every shadow series (the shadow was turned off).
    pub fn clear(&self, f: &Families) {
        if let Ok(mut devices) = self.devices.lock() {
            for (name, kept) in std::mem::take(&mut *devices) {
                forget(f, &name, &kept);
            }
        }
    }
}

fn labels(device: &str, knob: Knob) -> KnobLabels {
    KnobLabels {
        device: device.to_owned(),
        knob: knob.to_string(),
    }
}

fn forget(f: &Families, device: &str, kept: &ShadowDevice) {
    for l in &kept.targets {
        f.shadow_target.remove(l);
    }
    for l in kept.changes.keys() {
        f.shadow_changes.remove(l);
    }
    let d = DevLabels {
        device: device.to_owned(),
    };
    f.shadow_miss.remove(&d);
    f.shadow_memory.remove(&d);
    f.shadow_modelled.remove(&d);
}
