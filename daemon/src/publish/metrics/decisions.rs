//! The counters of what the daemon decided and did: each decision of a
//! pass (with the mode, backoff flag and recommendation it sets for the
//! device), each change the actuator made or tried, each operator
//! override, the time of the last change, and the errors by kind.

use policy::plan::{Action, Decision};

use super::devices::DeviceSeries;
use super::families::Families;
use super::labels::*;
use crate::act::events::Event;

/// Counts one error of `kind` in `pptune_errors_total`.
pub(super) fn error(f: &Families, kind: &str) {
    f.errors
        .get_or_create(&KindLabels {
            kind: kind.to_owned(),
        })
        .inc();
}

/// What the actuator did, into `pptune_actions_total`,
/// `pptune_operator_overrides_total`,
/// `pptune_last_action_timestamp_seconds`, `pptune_device_backoff` and
/// `pptune_errors_total`.
pub(super) fn count(f: &Families, devices: &DeviceSeries, events: impl IntoIterator<Item = Event>) {
    for e in events {
        match e {
            Event::Action {
                device,
                knob,
                direction,
                result,
            } => {
                let labels = ActionLabels {
                    device,
                    knob: knob.to_string(),
                    direction: direction.to_owned(),
                    result,
                };
                f.actions.get_or_create(&labels).inc();
                devices.remember_action(&labels);
            }
            Event::Override { device, knob } => {
                let labels = KnobLabels {
                    device,
                    knob: knob.to_string(),
                };
                f.overrides.get_or_create(&labels).inc();
                devices.remember_override(&labels);
            }
            Event::Applied { device, unix_s } => {
                f.last_action
                    .get_or_create(&DevLabels { device })
                    .set(unix_s);
            }
            Event::BackedOff { device } => devices.set_backoff(f, &device, true),
            Event::Error(kind) => error(f, kind),
        }
    }
}

/// One decision of the pass: the device's mode (`enforce` or `observe`,
/// after rollout), its backoff flag (0 for every selected device, so
/// "backed off" is a value to alert on, not a missing series), the
/// decision counter and the recommendation.
pub(super) fn observe_decision(
    f: &Families,
    devices: &DeviceSeries,
    dec: &Decision,
    mode: &'static str,
    backed_off: bool,
) {
    devices.set_mode(f, &dec.device, mode);
    devices.set_backoff(f, &dec.device, backed_off);
    devices.count_decision(
        f,
        &dec.device,
        crate::publish::logging::action_kind(&dec.action),
        dec.reason.as_str(),
        mode,
    );
    let rec = match dec.action {
        Action::Hold => None,
        Action::SetRing { to, .. } | Action::SetChannels { to, .. } => Some((
            RecLabels {
                device: dec.device.clone(),
                recommendation: dec.id.to_string(),
                knob: dec.action.knob().map(|k| k.to_string()).unwrap_or_default(),
                reason: dec.reason.as_str().to_owned(),
            },
            to,
        )),
    };
    devices.set_recommendation(f, &dec.device, rec);
}
