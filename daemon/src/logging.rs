//! Logging: journald fields under systemd, JSON lines otherwise; one line
//! per decision, identical repeated findings deduplicated.

use std::collections::BTreeMap;
use std::time::Duration;

use policy::plan::{Action, Decision};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the subscriber once, in the binary. Under systemd
/// (`$JOURNAL_STREAM` set: stderr is the journal) fields go to journald as
/// `PPTUNE_DEVICE=…` and friends; otherwise JSON lines on stderr.
pub fn init() {
    let filter = EnvFilter::try_from_env("PPTUNE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(layer) = tracing_journald::layer()
    {
        let layer = layer
            .with_field_prefix(Some("PPTUNE".to_owned()))
            .with_syslog_identifier("pptune".to_owned());
        let _ = tracing_subscriber::registry()
            .with(filter)
            .with(layer)
            .try_init();
        return;
    }
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// A short word for an action.
#[must_use]
pub fn action_kind(a: &Action) -> &'static str {
    match a {
        Action::Hold => "hold",
        Action::SetRing { .. } => "set_ring",
        Action::SetChannels { .. } => "set_channels",
    }
}

/// Human form of an action: `hold`, `ring.rx 256 -> 1024`.
#[must_use]
pub fn action_text(a: &Action) -> String {
    match a {
        Action::Hold => "hold".to_owned(),
        Action::SetRing { from, to, .. } | Action::SetChannels { from, to, .. } => {
            let knob = a.knob().map(|k| k.to_string()).unwrap_or_default();
            format!("{knob} {from} -> {to}")
        }
    }
}

/// Suppresses identical findings: a device's decision is logged when its
/// (action, reason, id) changes, and repeated at most every `remind` with the
/// count of suppressed repeats.
#[derive(Debug)]
pub struct DecisionLog {
    last: BTreeMap<String, (String, Duration, u64)>,
    remind: Duration,
}

impl DecisionLog {
    #[must_use]
    pub fn new(remind: Duration) -> Self {
        Self {
            last: BTreeMap::new(),
            remind,
        }
    }

    /// Logs the decision unless it repeats the last one for the device.
    /// Returns whether a line was written.
    pub fn log(&mut self, d: &Decision, effective_mode: &str, now: Duration) -> bool {
        let key = format!(
            "{}|{}|{}|{}",
            action_text(&d.action),
            d.reason,
            d.id,
            effective_mode
        );
        if let Some((k, at, n)) = self.last.get_mut(&d.device_id.key())
            && *k == key
            && now.saturating_sub(*at) < self.remind
        {
            *n += 1;
            return false;
        }
        let suppressed = self
            .last
            .get(&d.device_id.key())
            .filter(|(k, _, _)| *k == key)
            .map_or(0, |(_, _, n)| *n);
        let evidence = serde_json::to_string(&d.evidence).unwrap_or_default();
        let is_hold = matches!(d.action, Action::Hold);
        if is_hold {
            tracing::info!(
                target: "pptune::decision",
                device = %d.device,
                action = action_text(&d.action),
                reason = d.reason.as_str(),
                recommendation = %d.id,
                mode = effective_mode,
                evidence = %evidence,
                repeats_suppressed = suppressed,
                "{}", d.message
            );
        } else {
            tracing::warn!(
                target: "pptune::decision",
                device = %d.device,
                action = action_text(&d.action),
                reason = d.reason.as_str(),
                recommendation = %d.id,
                mode = effective_mode,
                evidence = %evidence,
                repeats_suppressed = suppressed,
                "{}", d.message
            );
        }
        self.last.insert(d.device_id.key(), (key, now, 0));
        true
    }

    /// Forgets everything (a reload may change every decision).
    pub fn reset(&mut self) {
        self.last.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::plan::{Knob, ReasonCode, RecommendationId, RingField};
    use policy::snapshot::DeviceId;

    fn decision(action: Action, reason: ReasonCode) -> Decision {
        let id = DeviceId {
            name_fallback: Some("eth0".into()),
            ..DeviceId::default()
        };
        Decision {
            ifindex: 2,
            device: "eth0".into(),
            id: RecommendationId::new(&id, action.knob(), reason),
            device_id: id,
            mode: policy::Mode::Observe,
            action,
            reason,
            message: "m".into(),
            evidence: BTreeMap::from([("recycle_miss_share".to_owned(), 0.5)]),
        }
    }

    #[test]
    fn identical_findings_are_logged_once_per_reminder_period() {
        let mut log = DecisionLog::new(Duration::from_secs(3600));
        let grow = decision(
            Action::SetRing {
                field: RingField::Rx,
                from: 256,
                to: 2048,
            },
            ReasonCode::RecycleMissHigh,
        );
        assert!(log.log(&grow, "observe", Duration::from_secs(0)));
        let mut again = grow.clone();
        // Evidence moves every tick; the finding is the same.
        again.evidence.insert("recycle_miss_share".into(), 0.51);
        assert!(!log.log(&again, "observe", Duration::from_secs(10)));
        assert!(!log.log(&again, "observe", Duration::from_secs(20)));
        // A different finding is logged at once…
        let hold = decision(Action::Hold, ReasonCode::Healthy);
        assert!(log.log(&hold, "observe", Duration::from_secs(30)));
        // …and the reminder comes after the period.
        assert!(!log.log(&hold, "observe", Duration::from_secs(40)));
        assert!(log.log(&hold, "observe", Duration::from_secs(3700)));
        assert_eq!(grow.action.knob(), Some(Knob::Ring(RingField::Rx)));
    }
}
