//! Every family the registry holds, in one table: [`Families`] is
//! generated from it with its registration and the names the exposition
//! gives them (a family is one line). The per-queue families are written
//! by hand (`series.rs`), the `process_*` ones by their collector. The
//! labelled ones are `family::Family`s: prometheus-client's exposition,
//! in tables that give a burst's memory back when its devices go.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};

use super::family::Family;
use super::labels::*;

type FGauge = Gauge<f64, AtomicU64>;

/// A family's name as the exposition writes it: the unit appended, and
/// `_total` on a counter.
pub(super) fn exposed(name: &str, unit: Option<&str>, kind: MetricType) -> String {
    let mut s = name.to_owned();
    if let Some(u) = unit {
        s.push('_');
        s.push_str(u);
    }
    if matches!(kind, MetricType::Counter) {
        s.push_str("_total");
    }
    s
}

macro_rules! unit {
    () => {
        None::<Unit>
    };
    ($u:expr) => {
        Some($u)
    };
}

macro_rules! families {
    ($($(#[$doc:meta])* $field:ident: $ty:ty = ($name:literal, $help:literal $(, $unit:expr)?);)*) => {
        /// Every registered family, each a handle the daemon updates.
        #[derive(Debug)]
        pub struct Families {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl Families {
            /// Every family, registered in `r`.
            pub(super) fn register(r: &mut Registry) -> Self {
                Self {
                    $($field: {
                        let m = <$ty>::default();
                        match unit!($($unit)?) {
                            Some(u) => r.register_with_unit($name, $help, u, m.clone()),
                            None => r.register($name, $help, m.clone()),
                        }
                        m
                    },)*
                }
            }

            /// The families' names as the exposition writes them.
            pub(super) fn names() -> Vec<String> {
                vec![$(exposed(
                    $name,
                    unit!($($unit)?).as_ref().map(Unit::as_str),
                    <$ty as TypedMetric>::TYPE,
                )),*]
            }
        }
    };
}

families! {
    ring: Family<RingLabels, Gauge> = ("pptune_ring", "Current ring size", Unit::Other("entries".into()));
    ring_max: Family<RingLabels, Gauge> = ("pptune_ring_max", "Maximum ring size the driver allows", Unit::Other("entries".into()));
    channels: Family<ChannelLabels, Gauge> = ("pptune_channels", "Current channel count");
    channels_max: Family<ChannelLabels, Gauge> = ("pptune_channels_max", "Maximum channel count the driver allows");
    orphan_pools: Gauge = ("pptune_orphan_pools", "Pools whose device is gone but which still hold pages");
    orphan_inflight_pages: Gauge = ("pptune_orphan_inflight", "Pages held by orphaned pools", Unit::Other("pages".into()));
    decisions: Family<DecisionLabels, Counter> = ("pptune_decisions", "Engine decisions by action and reason");
    actions: Family<ActionLabels, Counter> = ("pptune_actions", "Changes pptune made or tried, by knob, direction and result");
    last_action: Family<DevLabels, Gauge> = ("pptune_last_action_timestamp", "Unix time of the last change on the device", Unit::Seconds);
    overrides: Family<KnobLabels, Counter> = ("pptune_operator_overrides", "Knobs someone else changed: pptune stopped managing them until the policy is reloaded");
    recommendation: Family<RecLabels, Gauge> = ("pptune_recommendation_target", "The engine's current recommendation for the device (observe and enforce alike): the target value, labelled with its stable id");
    backoff: Family<DevLabels, Gauge> = ("pptune_device_backoff", "1 while the device is backed off after repeated failures");
    errors: Family<KindLabels, Counter> = ("pptune_errors", "Errors by kind");
    capability: Family<CapLabels, Gauge> = ("pptune_capability", "1 when the kernel (or process) has the capability");
    device_mode: Family<ModeLabels, Gauge> = ("pptune_device_mode", "1 for the mode the device is in (after rollout)");
    device_info: Family<InfoLabels, Gauge> = ("pptune_device_info", "1 per device, labelled with its driver, link kind, MTU, link speed (Mb/s), PCI model and firmware");
    /// The device's own receive counters (rtnetlink stats64), counted from
    /// the daemon's start: what a fleet compares arms on besides the pools.
    rx_packets: Family<DevLabels, Counter> = ("pptune_device_rx_packets", "Packets the device received (rtnetlink rx_packets), counted since pptune started");
    rx_bytes: Family<DevLabels, Counter> = ("pptune_device_rx", "Bytes the device received (rtnetlink rx_bytes), counted since pptune started", Unit::Bytes);
    rx_missed: Family<DevLabels, Counter> = ("pptune_device_rx_missed_packets", "Packets the NIC dropped for want of a posted buffer (rtnetlink rx_missed_errors + rx_fifo_errors), counted since pptune started");
    rx_dropped: Family<DevLabels, Counter> = ("pptune_device_rx_dropped_packets", "Packets received but dropped by the host (rtnetlink rx_dropped), counted since pptune started");
    /// The memory estimate the budget gates on (`policy::device_bytes`),
    /// per selected device, beside the pools' observed inflight bytes.
    ring_cost: Family<DevLabels, Gauge> = ("pptune_device_ring_cost_estimate", "What the device's configured rings cost by pptune's estimate, the figure its memory budget is judged against ((posted buffers + pool ring + cache) x page bytes x queues); per device pptune selects", Unit::Bytes);
    /// What right-sizing's first step would give back now
    /// (`policy::engine::reclaimable`), per selected device: 0 when
    /// nothing is, so a fleet sum counts every device.
    reclaimable: Family<DevLabels, Gauge> = ("pptune_device_reclaimable", "Ring memory right-sizing could give back now by pptune's estimate: the ring cost at the current ring less at the ring that covers, with headroom, the most pages the pools had out since they were built (0 when nothing); per device pptune selects", Unit::Bytes);
    memory_budget: Family<ScopeLabels, Gauge> = ("pptune_memory_budget", "The policy's memory budget for the ring cost estimate: per device (scope=device) and for the selected devices' sum (scope=host); absent when the policy sets none", Unit::Bytes);
    /// Why pptune judges nothing (`publish::notes::Unjudged`).
    judging_nothing: Family<ReasonLabels, Gauge> = ("pptune_judging_nothing", "1 for the reason this host judges no device (every reason exported, all 0 while some device is judged): no_pool_introspection, no_pool_stats, driver_hides_pools, no_pools, device_down, rings_unavailable, not_managed, not_selected, no_devices");
    device_unjudged: Family<DevReasonLabels, Gauge> = ("pptune_device_unjudged", "1 with the reason pptune cannot judge the device (absent while it can)");
    rollout_enforcing: Gauge = ("pptune_rollout_enforcing", "1 when this host enforces: it falls in the policy's rollout fraction and some selector is in enforce mode");
    rollout_host_selected: Gauge = ("pptune_rollout_host_selected", "1 when this host falls in the policy's rollout fraction (it would enforce what an enforcing selector selects)");
    policy_enforcing: Gauge = ("pptune_policy_enforcing", "1 when some selector of the policy in force is in enforce mode");
    rollout_fraction: FGauge = ("pptune_rollout_fraction", "The policy's rollout fraction (1 without a rollout)", Unit::Other("ratio".into()));
    rollout_holdout: FGauge = ("pptune_rollout_holdout", "The policy's holdout fraction: the control group that only observes (0 without one)", Unit::Other("ratio".into()));
    /// 1 for the host's arm, 0 for the two others: every host exports all
    /// three, so `sum by (arm)` counts hosts per arm.
    rollout_arm: Family<ArmLabels, Gauge> = ("pptune_rollout_arm", "1 for this host's fleet arm: enforce (in the rollout fraction, some selector enforces), holdout (the control group: observes only, keeps its rings), observe (the rest)");
    /// The shadow policy (`publish::metrics::shadow`).
    shadow_running: Gauge = ("pptune_shadow_running", "1 while a shadow policy runs beside the policy in force (it never acts)");
    shadow_changes: Family<KnobLabels, Counter> = ("pptune_shadow_changes", "Changes the shadow policy would have made (modelled as made: its later decisions follow from them), by device and knob");
    shadow_target: Family<KnobLabels, Gauge> = ("pptune_shadow_target", "The value the shadow policy would have each managed knob at, on each device it selects");
    shadow_miss: Family<DevLabels, FGauge> = ("pptune_shadow_recycle_miss_modelled", "The shadow's recycle-miss share over the last interval: observed until its ring differs from the live one, then the ring model's", Unit::Other("ratio".into()));
    shadow_memory: Family<DevLabels, Gauge> = ("pptune_shadow_pool_inflight_modelled", "The shadow's pool memory (inflight) on the device: observed until its ring differs from the live one, then the ring model's (posted buffers at its ring, the pages out beyond them as observed)", Unit::Bytes);
    shadow_modelled: Family<DevLabels, Gauge> = ("pptune_shadow_modelled", "1 when the shadow's figures on the device are the ring model's, not observed");
    reloads: Family<ResultLabels, Counter> = ("pptune_policy_reloads", "Policy reloads by result (ok, invalid)");
    /// Which policy runs (`publish::policy_hash`): one series, replaced
    /// on each load.
    policy_info: Family<PolicyLabels, Gauge> = ("pptune_policy_info", "1, labelled with the content hash of the policy in force (hash) and of its shadow (shadow_hash, empty without one): sha256 of the effective policy, drop-ins merged, first 16 hex digits");
    policy_loaded: FGauge = ("pptune_policy_loaded_timestamp", "Unix time the policy in force was loaded (at start or by the last successful reload)", Unit::Seconds);
    policy_valid: Gauge = ("pptune_policy_valid", "0 when the last reload was invalid and the last good policy is still in force");
    samples: Counter = ("pptune_samples", "Successful sampling passes");
    sample_duration: FGauge = ("pptune_sample_duration", "Duration of the last sampling pass", Unit::Seconds);
    resyncs: Family<KindLabels, Counter> = ("pptune_resyncs", "Full resyncs after lost notifications, by source");
    /// The recording on disk (docs/recording.md): bytes, and the start of
    /// the oldest pass it still holds (age = time() - this).
    recording_bytes: Gauge = ("pptune_recording", "Size of the daemon's recording on disk", Unit::Bytes);
    recording_oldest: FGauge = ("pptune_recording_oldest_timestamp", "Unix time of the oldest pass the recording still holds (0: none)", Unit::Seconds);
}
