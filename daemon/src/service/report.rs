//! What the loop tells people about the run as a whole, apart from its
//! decisions: why nothing here can be judged (once, at first contact), a
//! restore's lines, and what it leaves in place when it stops.

use std::collections::BTreeMap;

use policy::Policy;
use policy::plan::Decision;
use policy::select::Unselected;
use policy::snapshot::{Device, Snapshot};

use crate::act::state::StateFile;
use crate::publish::notes::Unjudged;

/// When no device in `snap` can be judged (every decision's reason is one
/// more samples cannot change, or there is none), warns once with the
/// reason per device, in the words `pptune status` uses, and where to look:
/// nothing will ever be logged again otherwise.
pub(super) fn why_nothing_is_judged<'a>(
    snap: &Snapshot,
    policy: &Policy,
    decisions: impl Iterator<Item = &'a Decision> + Clone,
) {
    if judges_some(decisions.clone()) {
        return;
    }
    let why: Vec<String> = snap
        .devices
        .iter()
        .map(|d| {
            let decided = decisions.clone().find(|dec| dec.ifindex == d.ifindex);
            let because = match (policy.unselected_because(d), decided) {
                (Some(Unselected::NoPools), _) => {
                    crate::publish::notes::no_pools_note(d, &snap.capabilities)
                        .unwrap_or_else(|| "no page pools".to_owned())
                }
                (Some(Unselected::NameOrDriver), _) => {
                    "not selected: no selector's names and drivers take it, or an exclude does"
                        .to_owned()
                }
                (Some(Unselected::NoSelectors), _) => {
                    "not selected: the policy has no selectors".to_owned()
                }
                (None, Some(dec)) => dec.message.clone(),
                (None, None) => "selected, not decided yet".to_owned(),
            };
            format!("{}: {because}", d.name)
        })
        .collect();
    let why = if why.is_empty() {
        "no network device here but loopback, which pptune never samples".to_owned()
    } else {
        why.join("; ")
    };
    tracing::warn!(
        devices = snap.devices.len(),
        why = %why,
        "no device can be judged, so pptune will neither recommend nor change anything here; `pptune status` shows each device and what the kernel offers"
    );
}

/// Whether some decision judged its device (its reason is one more
/// samples can change).
fn judges_some<'a>(mut decisions: impl Iterator<Item = &'a Decision>) -> bool {
    decisions.any(|d| !d.reason.cannot_judge())
}

/// Why each device of the pass cannot be judged, and why the host judges
/// nothing, into `pptune_device_unjudged` and `pptune_judging_nothing`.
pub(super) fn export_judging(
    metrics: &crate::publish::metrics::Metrics,
    snap: &Snapshot,
    policy: &Policy,
    decisions: &[Decision],
) {
    let mut host = None;
    for d in &snap.devices {
        let dec = decisions.iter().find(|dec| dec.ifindex == d.ifindex);
        let why = Unjudged::of(d, &snap.capabilities, policy, dec);
        metrics.set_unjudged(&d.name, why);
        host = match (host, why) {
            (Some(h), Some(w)) => Some(std::cmp::min(h, w)),
            (h, w) => h.or(w),
        };
    }
    let why = if judges_some(decisions.iter()) {
        None
    } else if snap.devices.is_empty() {
        Some(Unjudged::NoDevices)
    } else {
        host
    };
    metrics.set_judging_nothing(why);
}

/// A restore's lines in the daemon's log, however it was asked for.
pub(super) fn log_restore(lines: &[String], ok: bool) {
    for l in lines {
        tracing::info!("{l}");
    }
    if !ok {
        tracing::warn!("some originals could not be restored; they stay in the state record");
    }
}

/// At exit (as bpftune does): how many changes this run made and which of
/// pptune's changes stay in place, with their originals, in one line.
pub(super) fn left_in_place(changes: u64, state: &StateFile, devices: &BTreeMap<u32, Device>) {
    let mut left = Vec::new();
    for (key, rec) in &state.devices {
        let dev = devices.values().find(|d| d.id.key() == *key);
        for o in &rec.originals {
            let now = dev.and_then(|d| crate::act::set::knob_value(d, o.knob));
            left.push(format!(
                "{} {} {} (original {})",
                dev.map_or(rec.last_name.as_str(), |d| d.name.as_str()),
                o.knob,
                now.map_or_else(|| "unknown".to_owned(), |v| v.to_string()),
                o.value
            ));
        }
    }
    if left.is_empty() {
        tracing::info!(
            changes_this_run = changes,
            "stopped: none of pptune's changes is left in place"
        );
    } else {
        tracing::info!(
            changes_this_run = changes,
            left_in_place = %left.join(", "),
            "stopped: pptune's changes left in place; `pptune restore` puts the originals back"
        );
    }
}

/// What the status line counts.
pub(super) struct Counts<'a, D: Iterator<Item = &'a Decision> + Clone> {
    pub devices: usize,
    /// The last decision per selected device.
    pub decisions: D,
    /// Where the host falls in the rollout.
    pub draw: crate::act::rollout::Draw,
    pub overrides: usize,
    pub backed_off: usize,
    pub policy_invalid: bool,
}

/// The service manager's status line (`systemctl status`, READY=1).
pub(super) fn summary<'a, D: Iterator<Item = &'a Decision> + Clone>(c: &Counts<'a, D>) -> String {
    let managed = c.decisions.clone().count();
    let enforcing = c
        .decisions
        .clone()
        .filter(|d| d.mode == policy::Mode::Enforce)
        .count();
    let acting = c
        .decisions
        .clone()
        .filter(|d| d.action != policy::plan::Action::Hold)
        .count();
    format!(
        "{} devices, {managed} selected ({} enforce{}), {acting} recommendation(s), {} override(s), {} backed off{}",
        c.devices,
        if c.draw.host_selected { enforcing } else { 0 },
        if c.draw.host_selected {
            ""
        } else if c.draw.holdout {
            "; rollout: holdout, observe on this host"
        } else {
            "; rollout: observe on this host"
        },
        c.overrides,
        c.backed_off,
        if c.policy_invalid {
            "; last reload INVALID, old policy in force"
        } else {
            ""
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::metrics::Metrics;
    use policy::plan::{Action, ReasonCode, RecommendationId};
    use policy::snapshot::Capabilities;

    fn device(ifindex: u32, name: &str, driver: &str, up: bool) -> Device {
        Device {
            ifindex,
            name: name.to_owned(),
            driver: Some(driver.to_owned()),
            admin_up: up,
            ..Device::default()
        }
    }

    fn hold(d: &Device, reason: ReasonCode) -> Decision {
        Decision {
            ifindex: d.ifindex,
            device: d.name.clone(),
            device_id: d.id.clone(),
            mode: policy::Mode::Enforce,
            action: Action::Hold,
            reason,
            message: String::new(),
            evidence: policy::plan::Evidence::default(),
            id: RecommendationId(String::new()),
            baseline: None,
        }
    }

    fn judging(m: &Metrics) -> Vec<String> {
        m.encode()
            .unwrap()
            .lines()
            .filter(|l| {
                l.starts_with("pptune_judging_nothing{") && l.ends_with(" 1")
                    || l.starts_with("pptune_device_unjudged{")
            })
            .map(str::to_owned)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Each host and device where pptune can judge nothing says why, in
    /// one series a recording rule can count; a host that judges one
    /// device judges something, and its series go back to 0.
    #[test]
    fn why_nothing_is_judged_is_exported_per_host_and_device() {
        let m = Metrics::new();
        let p = policy::fixtures::policy();
        let caps = Capabilities {
            page_pool_get: true,
            page_pool_stats: true,
            ..Capabilities::default()
        };
        let snap = |caps: &Capabilities, devices: Vec<Device>| Snapshot {
            capabilities: caps.clone(),
            devices,
            ..Snapshot::default()
        };
        let down = device(2, "eth0", "ice", false);
        let veth = device(3, "veth0", "veth", true);
        export_judging(&m, &snap(&caps, vec![down.clone(), veth.clone()]), &p, &[]);
        assert_eq!(
            judging(&m),
            [
                r#"pptune_device_unjudged{device="eth0",reason="device_down"} 1"#,
                r#"pptune_device_unjudged{device="veth0",reason="driver_hides_pools"} 1"#,
                r#"pptune_judging_nothing{reason="driver_hides_pools"} 1"#,
            ]
        );

        let old = Capabilities {
            page_pool_get: false,
            ..Capabilities::default()
        };
        export_judging(&m, &snap(&old, vec![down.clone()]), &p, &[]);
        let j = judging(&m);
        assert!(
            j.contains(&r#"pptune_judging_nothing{reason="no_pool_introspection"} 1"#.to_owned()),
            "{j:?}"
        );
        assert!(
            j.contains(
                &r#"pptune_device_unjudged{device="eth0",reason="no_pool_introspection"} 1"#
                    .to_owned()
            ),
            "{j:?}"
        );

        let mut pooled = device(2, "eth0", "ice", true);
        pooled.unmapped_pools = vec![policy::snapshot::Pool::default()];
        let no_stats = Capabilities {
            page_pool_stats: false,
            ..caps.clone()
        };
        let s = snap(&no_stats, vec![pooled.clone()]);
        export_judging(&m, &s, &p, &[hold(&pooled, ReasonCode::NoStats)]);
        let j = judging(&m);
        assert!(
            j.contains(&r#"pptune_judging_nothing{reason="no_pool_stats"} 1"#.to_owned()),
            "{j:?}"
        );

        export_judging(&m, &snap(&caps, vec![]), &p, &[]);
        assert!(
            judging(&m).contains(&r#"pptune_judging_nothing{reason="no_devices"} 1"#.to_owned())
        );

        let s = snap(&caps, vec![pooled.clone(), veth.clone()]);
        export_judging(&m, &s, &p, &[hold(&pooled, ReasonCode::Healthy)]);
        assert_eq!(
            judging(&m),
            [
                r#"pptune_device_unjudged{device="veth0",reason="driver_hides_pools"} 1"#
                    .to_owned()
            ]
        );
    }
}
