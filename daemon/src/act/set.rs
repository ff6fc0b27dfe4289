//! Setting a knob and reading it back, and putting recorded originals
//! back: what the actuator, `pptune restore` and the daemon's stop share.

use policy::knobs;
use policy::plan::Knob;
use policy::snapshot::Device;

use crate::act::state::StateFile;
use crate::sample::{Kernel, SetError};

/// A knob's current value on a sampled device (`policy::knobs`).
#[must_use]
pub fn knob_value(d: &Device, knob: Knob) -> Option<u32> {
    knobs::value(d, knob)
}

/// Sets a knob and returns the value read back.
pub async fn set_knob<K: Kernel>(
    kernel: &K,
    ifindex: u32,
    knob: Knob,
    value: u32,
) -> Result<Option<u32>, SetError> {
    match knob {
        Knob::Ring(f) => kernel
            .set_ring(ifindex, f, value)
            .await
            .map(|r| knobs::desc(knob).in_rings(&r)),
        Knob::Channels(f) => kernel
            .set_channels(ifindex, f, value)
            .await
            .map(|c| knobs::desc(knob).in_channels(&c)),
    }
}

/// Puts recorded originals back on the devices present (all, or those
/// named) and forgets them. Shared by `pptune restore` and the daemon.
/// Returns lines for a person, whether everything asked for was restored,
/// and the (device name, device key, knob, value) that were set, as the
/// change journal takes them.
pub async fn restore_originals<K: Kernel>(
    kernel: &K,
    state: &mut StateFile,
    devices: &[Device],
    interfaces: &[String],
) -> (Vec<String>, bool, Vec<(String, String, Knob, u32)>) {
    let mut lines = Vec::new();
    let mut ok = true;
    let mut done = Vec::new();
    let keys: Vec<String> = state.devices.keys().cloned().collect();
    for key in keys {
        let Some(rec) = state.devices.get(&key).cloned() else {
            continue;
        };
        let dev = devices.iter().find(|d| d.id.key() == key);
        let name = dev.map_or(rec.last_name.as_str(), |d| d.name.as_str());
        if !interfaces.is_empty() && !interfaces.iter().any(|i| i == name) {
            continue;
        }
        let Some(dev) = dev else {
            if !rec.originals.is_empty() {
                lines.push(format!(
                    "{name} ({key}): not present; its originals stay recorded"
                ));
                ok = false;
            }
            continue;
        };
        let mut all = true;
        for o in &rec.originals {
            if knob_value(dev, o.knob) == Some(o.value) {
                lines.push(format!("{name}: {} already {}", o.knob, o.value));
                state.forget_original(&rec.id, o.knob);
                continue;
            }
            match set_knob(kernel, dev.ifindex, o.knob, o.value).await {
                Ok(v) if v == Some(o.value) => {
                    lines.push(format!("{name}: {} restored to {}", o.knob, o.value));
                    state.forget_original(&rec.id, o.knob);
                    done.push((name.to_owned(), key.clone(), o.knob, o.value));
                }
                Ok(v) => {
                    lines.push(format!(
                        "{name}: {} set to {} but reads back {}",
                        o.knob,
                        o.value,
                        v.map_or_else(|| "nothing".to_owned(), |v| v.to_string())
                    ));
                    all = false;
                }
                Err(e) => {
                    lines.push(format!(
                        "{name}: restoring {} to {} failed: {e}",
                        o.knob, o.value
                    ));
                    all = false;
                }
            }
        }
        if all {
            // Fully restored: the record of this device is done.
            state.devices.remove(&key);
        } else {
            ok = false;
        }
    }
    if lines.is_empty() {
        lines.push("nothing to restore".to_owned());
    }
    (lines, ok, done)
}
