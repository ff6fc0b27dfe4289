//! What the engine decided: a plan of absolute targets, each with its reason,
//! a sentence a person understands, the evidence, and a stable id.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::policy::Mode;
use crate::snapshot::DeviceId;

/// The engine's output for one evaluation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// One decision per device the policy selects, ordered by ifindex.
    pub decisions: Vec<Decision>,
}

/// The decision for one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub ifindex: u32,
    pub device: String,
    pub device_id: DeviceId,
    /// The mode the policy gives this device (after rollout is applied by the
    /// daemon, `observe` means "log and export, do not act").
    pub mode: Mode,
    pub action: Action,
    pub reason: ReasonCode,
    /// One sentence, e.g. "rx ring 256 is too small for return bursts: 62 %
    /// of returned pages were freed because the pool ring was full".
    pub message: String,
    /// The numbers behind the decision, by name (stable keys).
    pub evidence: BTreeMap<String, f64>,
    /// Stable recommendation id: a hash of device identity, knob and reason.
    pub id: RecommendationId,
}

/// An absolute target, so re-applying it is harmless.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Action {
    Hold,
    SetRing {
        field: RingField,
        from: u32,
        to: u32,
    },
    SetChannels {
        field: ChannelField,
        from: u32,
        to: u32,
    },
}

impl Action {
    /// The knob this action turns, if any.
    #[must_use]
    pub fn knob(&self) -> Option<Knob> {
        match self {
            Self::Hold => None,
            Self::SetRing { field, .. } => Some(Knob::Ring(*field)),
            Self::SetChannels { field, .. } => Some(Knob::Channels(*field)),
        }
    }
}

/// The ring field that sizes this driver's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RingField {
    Rx,
    RxMini,
    RxJumbo,
}

/// The channel count pptune manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChannelField {
    Combined,
    Rx,
}

/// A knob on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "knob", content = "field")]
pub enum Knob {
    Ring(RingField),
    Channels(ChannelField),
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(crate::knobs::desc(*self).name)
    }
}

/// Why. Stable snake_case codes: they appear in logs, metrics and ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    // --- actions ---
    /// Return bursts overflow the pool ring (ring_full) — grow the ring.
    RecycleMissHigh,
    /// The pool has been calm long enough — give memory back.
    CalmShrink,
    /// Recycling is healthy and rings are settled: more queues may help.
    ChannelsGrowHealthy,
    /// Slow path stays high with rings at their limit: fewer queues.
    ChannelsShrinkContended,
    // --- holds ---
    /// Nothing to do: signals within thresholds.
    Healthy,
    /// Not enough windows of evidence yet.
    Gathering,
    /// Misses come from untunable causes (released_refcnt, NUMA waive).
    UntunableCause,
    /// qstats rx-alloc-fail says memory is short: never grow.
    MemoryPressure,
    /// Already at rx-max / policy max / pool clamp.
    AtLimit,
    /// The memory budget forbids a bigger ring.
    BudgetExhausted,
    /// Inside a cooldown after a change.
    Cooldown,
    /// Hourly change budget spent.
    ChangeBudgetExhausted,
    /// Outside the policy's change windows.
    OutsideChangeWindow,
    /// Another member of the same bond/team is being changed.
    BondSiblingBusy,
    /// The driver's disruption class is not allowed while the link is up.
    DisruptionNotAllowed,
    /// No harm signal to evaluate a change against: observe only.
    NoHarmSignal,
    /// The device exposes no page pools (or the kernel lists none).
    NoPools,
    /// The kernel has no page-pool stats.
    NoStats,
    /// Ring sizes are not available for this driver.
    RingsUnavailable,
    /// An operator changed this knob: pptune no longer manages it.
    OperatorOverride,
    /// Pools were rebuilt or counters reset inside the window: no data.
    CounterReset,
    /// Traffic too low for the ratios to mean anything.
    LowTraffic,
    /// The driver's pool does not follow the ring (netdevsim, virtio_net):
    /// resizing the ring would not change the pool.
    RingDoesNotSizePool,
    /// The last change of this knob did not move the signal it was made
    /// for: more of the same is not evidence-based.
    PreviousChangeIneffective,
    /// The policy does not manage this knob (rings or channels disabled).
    NotManaged,
    /// The device failed recently and is backed off.
    BackedOff,
    /// The kernel refused this target within the hour.
    KernelRefused,
}

impl ReasonCode {
    /// The snake_case code as it appears in logs and metrics.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::RecycleMissHigh => "recycle_miss_high",
            Self::CalmShrink => "calm_shrink",
            Self::ChannelsGrowHealthy => "channels_grow_healthy",
            Self::ChannelsShrinkContended => "channels_shrink_contended",
            Self::Healthy => "healthy",
            Self::Gathering => "gathering",
            Self::UntunableCause => "untunable_cause",
            Self::MemoryPressure => "memory_pressure",
            Self::AtLimit => "at_limit",
            Self::BudgetExhausted => "budget_exhausted",
            Self::Cooldown => "cooldown",
            Self::ChangeBudgetExhausted => "change_budget_exhausted",
            Self::OutsideChangeWindow => "outside_change_window",
            Self::BondSiblingBusy => "bond_sibling_busy",
            Self::DisruptionNotAllowed => "disruption_not_allowed",
            Self::NoHarmSignal => "no_harm_signal",
            Self::NoPools => "no_pools",
            Self::NoStats => "no_stats",
            Self::RingsUnavailable => "rings_unavailable",
            Self::OperatorOverride => "operator_override",
            Self::CounterReset => "counter_reset",
            Self::LowTraffic => "low_traffic",
            Self::RingDoesNotSizePool => "ring_does_not_size_pool",
            Self::PreviousChangeIneffective => "previous_change_ineffective",
            Self::NotManaged => "not_managed",
            Self::BackedOff => "backed_off",
            Self::KernelRefused => "kernel_refused",
        }
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stable recommendation id: the first 12 hex digits of a hash of
/// (device identity key, knob, reason). It does not change between runs,
/// restarts or hosts for the same device, knob and reason.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RecommendationId(pub String);

impl RecommendationId {
    /// FNV-1a 64 over `key \0 knob \0 reason`: dependency-free and stable
    /// across Rust versions (unlike `DefaultHasher`). The text is hashed as
    /// it is written, never built.
    #[must_use]
    pub fn new(device: &DeviceId, knob: Option<Knob>, reason: ReasonCode) -> Self {
        use fmt::Write as _;
        /// FNV-1a 64 as a `fmt::Write` sink.
        struct Fnv(u64);
        impl fmt::Write for Fnv {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                for b in s.bytes() {
                    self.0 ^= u64::from(b);
                    self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
                }
                Ok(())
            }
        }
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        // Hashing cannot fail.
        let _ = device.write_key(&mut h);
        let _ = match knob {
            Some(k) => write!(h, "\0{k}\0{}", reason.as_str()),
            None => write!(h, "\0none\0{}", reason.as_str()),
        };
        Self(format!("{:012x}", h.0 >> 16))
    }
}

impl fmt::Display for RecommendationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recommendation_id_is_stable() {
        let d = DeviceId {
            bus: Some("pci".into()),
            parent: Some("0000:3b:00.0".into()),
            perm_addr: Some("0c:42:a1:00:00:01".into()),
            name_fallback: None,
        };
        let a = RecommendationId::new(
            &d,
            Some(Knob::Ring(RingField::Rx)),
            ReasonCode::RecycleMissHigh,
        );
        // Pinned value: if this changes, every operator's review list changes.
        assert_eq!(a.0.len(), 12);
        assert_eq!(
            a,
            RecommendationId::new(
                &d,
                Some(Knob::Ring(RingField::Rx)),
                ReasonCode::RecycleMissHigh
            )
        );
        assert_ne!(
            a,
            RecommendationId::new(&d, Some(Knob::Ring(RingField::Rx)), ReasonCode::CalmShrink)
        );
    }
}
