//! `pptune verify`: do the live rings and channels equal what pptune set?
//! For configuration management and compliance checks: exit 0 when every
//! knob pptune changed (and has not given back) holds the value pptune set,
//! 2 when one differs, with the list.
//!
//! What pptune set comes from its record (`state.json`): a knob whose
//! original is recorded is pptune's change; its expected value is the last
//! action's target (its source when that action was reverted; refused and
//! failed attempts changed nothing). A knob pptune never changed, or gave
//! back (`restore`), or left to an operator who took it over while the
//! daemon watched, is not pptune's to verify: pptune keeps it as it is.

use policy::Knob;
use policy::engine::Outcome;
use policy::snapshot::{Device, DeviceId};
use serde::Serialize;

use crate::act::set::knob_value;
use crate::act::state::StateFile;

/// One knob pptune set, and what the kernel says now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub device: String,
    pub knob: Knob,
    /// The value pptune set.
    pub expected: u32,
    /// The live value; `None` when the device or the knob is gone.
    pub live: Option<u32>,
}

impl Check {
    #[must_use]
    pub fn holds(&self) -> bool {
        self.live == Some(self.expected)
    }
}

/// (device, its last name, knob, the value pptune set) for every knob
/// pptune changed and still owns.
#[must_use]
pub fn expectations(rec: &StateFile) -> Vec<(DeviceId, String, Knob, u32)> {
    let mut out = Vec::new();
    for d in rec.devices.values() {
        for o in &d.originals {
            let last = d.actions.iter().rev().find(|a| {
                a.knob == o.knob
                    && !matches!(a.outcome, Outcome::Refused { .. } | Outcome::Failed { .. })
            });
            let value = match last {
                Some(a) if a.outcome == Outcome::Reverted => a.from,
                Some(a) => a.to,
                None => o.value,
            };
            out.push((d.id.clone(), d.last_name.clone(), o.knob, value));
        }
    }
    out
}

/// Compares the record with the live devices; `interfaces` (names) limits
/// the check when not empty.
#[must_use]
pub fn verify(rec: Option<&StateFile>, devices: &[Device], interfaces: &[String]) -> Vec<Check> {
    let Some(rec) = rec else {
        return Vec::new();
    };
    expectations(rec)
        .into_iter()
        .filter_map(|(id, last_name, knob, expected)| {
            let dev = devices.iter().find(|d| d.id.key() == id.key());
            let device = dev.map_or(last_name, |d| d.name.clone());
            if !interfaces.is_empty() && !interfaces.contains(&device) {
                return None;
            }
            Some(Check {
                device,
                knob,
                expected,
                live: dev.and_then(|d| knob_value(d, knob)),
            })
        })
        .collect()
}

/// The report for a person: one line per differing knob, then a summary.
#[must_use]
pub fn render(checks: &[Check]) -> String {
    let mut s = String::new();
    let differ: Vec<&Check> = checks.iter().filter(|c| !c.holds()).collect();
    for c in &differ {
        let live = c
            .live
            .map_or_else(|| "not present".to_owned(), |v| v.to_string());
        s.push_str(&format!(
            "{}: {} differs: pptune set {}, live {live}\n",
            c.device, c.knob, c.expected
        ));
    }
    if checks.is_empty() {
        s.push_str("verify: pptune has set nothing that it still owns; nothing to differ\n");
    } else if differ.is_empty() {
        s.push_str(&format!(
            "verify: all {} knob(s) pptune set hold their values\n",
            checks.len()
        ));
    } else {
        s.push_str(&format!(
            "verify: {} of {} knob(s) pptune set differ\n",
            differ.len(),
            checks.len()
        ));
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::act::state::StoredAction;
    use policy::RingField;

    fn record(outcomes: &[(u32, u32, Outcome)]) -> (StateFile, DeviceId) {
        let id = DeviceId {
            name_fallback: Some("eth0".into()),
            ..DeviceId::default()
        };
        let mut rec = StateFile::new("boot".into());
        let knob = Knob::Ring(RingField::Rx);
        rec.record_original(&id, "eth0", knob, 256);
        for (from, to, outcome) in outcomes {
            rec.push_action(
                &id,
                "eth0",
                StoredAction {
                    knob,
                    from: *from,
                    to: *to,
                    at_unix_ms: 0,
                    reason: "recycle_miss_high".into(),
                    outcome: outcome.clone(),
                },
            );
        }
        (rec, id)
    }

    #[test]
    fn the_expected_value_is_what_the_last_effective_action_left() {
        let want = |o: &[(u32, u32, Outcome)]| expectations(&record(o).0)[0].3;
        assert_eq!(want(&[(256, 1024, Outcome::Effective)]), 1024);
        assert_eq!(want(&[(256, 1024, Outcome::Pending)]), 1024);
        assert_eq!(
            want(&[
                (256, 1024, Outcome::Effective),
                (1024, 2048, Outcome::Reverted)
            ]),
            1024
        );
        assert_eq!(
            want(&[
                (256, 1024, Outcome::Effective),
                (
                    1024,
                    2048,
                    Outcome::Refused {
                        errno: 22,
                        message: "no".into()
                    }
                )
            ]),
            1024
        );
        // Only the original: nothing applied yet.
        assert_eq!(want(&[]), 256);
    }

    #[test]
    fn nothing_recorded_is_nothing_to_differ() {
        assert!(verify(None, &[], &[]).is_empty());
        assert!(verify(Some(&StateFile::new("b".into())), &[], &[]).is_empty());
        assert!(render(&[]).contains("nothing to differ"));
    }

    #[test]
    fn a_vanished_device_differs() {
        let (rec, _) = record(&[(256, 1024, Outcome::Effective)]);
        let checks = verify(Some(&rec), &[], &[]);
        assert_eq!(checks.len(), 1);
        assert!(!checks[0].holds());
        assert!(
            render(&checks).contains("eth0: ring.rx differs: pptune set 1024, live not present")
        );
        assert!(verify(Some(&rec), &[], &["other".into()]).is_empty());
    }
}
