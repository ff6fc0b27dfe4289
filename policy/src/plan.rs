//! What the engine decided: a plan of absolute targets, each with its reason,
//! a sentence a person understands, the evidence, and a stable id.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::knobs::{ChannelField, Knob, RingField};
use crate::policy::Mode;
use crate::snapshot::DeviceId;

/// The engine's output for one evaluation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// One decision per device the policy selects, ordered by ifindex.
    pub decisions: Vec<Decision>,
}

/// The decision for one device.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
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
    pub evidence: Evidence,
    /// Stable recommendation id: a hash of device identity, knob and reason.
    pub id: RecommendationId,
    /// For a change: the finding window it was decided on, the baseline its
    /// evaluation judges it against (`None`: not decided on a window, such
    /// as a fleet prior; the daemon then takes the last interval). Not
    /// part of the plan's JSON.
    #[serde(skip)]
    pub baseline: Option<crate::window::Rates>,
}

/// The numbers behind a decision, by stable name, in name order; read and
/// written as a map (`{"ring_current": 256, …}`).
///
/// A sorted vector of `'static` names, not a `BTreeMap<String, _>`: a
/// device's evidence is one or two dozen entries written every pass, and
/// a map spends an allocation per name and per node on it.
/// Cleared, it keeps its capacity, so a decision refilled in place
/// allocates nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence(Vec<(Cow<'static, str>, f64)>);

impl Evidence {
    /// Sets `name` to `value`; the value it replaces, if any.
    pub fn insert(&mut self, name: impl Into<Cow<'static, str>>, value: f64) -> Option<f64> {
        let name = name.into();
        match self
            .0
            .binary_search_by(|(k, _)| k.as_ref().cmp(name.as_ref()))
        {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    #[must_use]
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(name))
            .ok()
            .map(|i| self.0[i].1)
    }

    /// Entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), *v))
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Empties it, keeping the capacity.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// A copy with owned names, for a record that outlives the engine.
    #[must_use]
    pub fn to_map(&self) -> BTreeMap<String, f64> {
        self.iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }
}

impl<K: Into<Cow<'static, str>>> FromIterator<(K, f64)> for Evidence {
    fn from_iter<I: IntoIterator<Item = (K, f64)>>(iter: I) -> Self {
        let mut e = Self::default();
        for (k, v) in iter {
            e.insert(k, v);
        }
        e
    }
}

impl Serialize for Evidence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Evidence {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, f64>::deserialize(d)?;
        Ok(map.into_iter().collect())
    }
}

/// Written out for `clone_from`, which the derive does not specialise: the
/// daemon keeps each device's last decision and overwrites it every pass,
/// and field by field the strings and the evidence keep their buffers.
impl Clone for Decision {
    fn clone(&self) -> Self {
        Self {
            ifindex: self.ifindex,
            device: self.device.clone(),
            device_id: self.device_id.clone(),
            mode: self.mode,
            action: self.action,
            reason: self.reason,
            message: self.message.clone(),
            evidence: self.evidence.clone(),
            id: RecommendationId(self.id.0.clone()),
            baseline: self.baseline.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.ifindex = source.ifindex;
        self.device.clone_from(&source.device);
        self.device_id.clone_from(&source.device_id);
        self.mode = source.mode;
        self.action = source.action;
        self.reason = source.reason;
        self.message.clone_from(&source.message);
        self.evidence.0.clone_from(&source.evidence.0);
        self.id.0.clone_from(&source.id.0);
        self.baseline.clone_from(&source.baseline);
    }
}

impl Decision {
    /// The change this decision makes where it is carried out in its own
    /// mode (the counterfactual of replay and of the shadow policy): the
    /// knob, its value before and its target; `None` for a hold or an
    /// observe-mode recommendation.
    #[must_use]
    pub fn enforced_change(&self) -> Option<(Knob, u32, u32)> {
        if self.mode != Mode::Enforce {
            return None;
        }
        match self.action {
            Action::Hold => None,
            Action::SetRing { from, to, .. } | Action::SetChannels { from, to, .. } => {
                Some((self.action.knob()?, from, to))
            }
        }
    }

    /// The baseline a change's evaluation is judged against: the finding
    /// window it was decided on, else (a decision made on no window) the
    /// last sample interval, `last_interval`.
    #[must_use]
    pub fn baseline_or(
        &self,
        last_interval: impl FnOnce() -> Option<crate::window::Rates>,
    ) -> Option<crate::window::Rates> {
        self.baseline.clone().or_else(last_interval)
    }

    /// An empty slot for the engine to fill (`decide_into`).
    pub(crate) fn blank() -> Self {
        Self {
            ifindex: 0,
            device: String::new(),
            device_id: DeviceId::default(),
            mode: Mode::default(),
            action: Action::Hold,
            reason: ReasonCode::Gathering,
            message: String::new(),
            evidence: Evidence::default(),
            id: RecommendationId(String::new()),
            baseline: None,
        }
    }
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
    /// Slow path contended by a cause a ring cannot fix (held pages):
    /// fewer queues as a trial, kept only if the delivered rate rises.
    ChannelsShrinkTrial,
    /// A device pptune has not changed yet starts at its class's ring from
    /// the policy's `priors` (what the fleet converged to).
    FleetPrior,
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
    /// The reasons of a change (a decision whose action sets a knob), each
    /// with the block of the knob it turns; every other reason is a hold's.
    pub const CHANGES: [(Self, crate::knobs::Block); 6] = [
        (Self::RecycleMissHigh, crate::knobs::Block::Rings),
        (Self::CalmShrink, crate::knobs::Block::Rings),
        (Self::FleetPrior, crate::knobs::Block::Rings),
        (Self::ChannelsGrowHealthy, crate::knobs::Block::Channels),
        (Self::ChannelsShrinkContended, crate::knobs::Block::Channels),
        (Self::ChannelsShrinkTrial, crate::knobs::Block::Channels),
    ];

    /// A reason more samples cannot change: the device cannot be judged at
    /// all (no pools, no stats, no rings, nothing managed).
    #[must_use]
    pub fn cannot_judge(self) -> bool {
        matches!(
            self,
            Self::NoPools | Self::NoStats | Self::RingsUnavailable | Self::NotManaged
        )
    }

    /// The snake_case code as it appears in logs and metrics.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::RecycleMissHigh => "recycle_miss_high",
            Self::CalmShrink => "calm_shrink",
            Self::ChannelsGrowHealthy => "channels_grow_healthy",
            Self::ChannelsShrinkContended => "channels_shrink_contended",
            Self::ChannelsShrinkTrial => "channels_shrink_trial",
            Self::FleetPrior => "fleet_prior",
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
        let mut id = Self(String::new());
        id.set(device, knob, reason);
        id
    }

    /// Overwrites the id with [`RecommendationId::new`]'s, in its own
    /// buffer (a decision refilled in place allocates nothing for it).
    pub fn set(&mut self, device: &DeviceId, knob: Option<Knob>, reason: ReasonCode) {
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
        self.0.clear();
        let _ = write!(self.0, "{:012x}", h.0 >> 16);
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

    /// Evidence reads and writes as the map it replaced: names in order,
    /// a name set twice keeps the last value, the JSON is an object, and a
    /// cleared one keeps its capacity (a decision refilled in place).
    #[test]
    fn evidence_behaves_as_a_map() {
        let mut e = Evidence::default();
        assert_eq!(e.insert("ring_target", 512.0), None);
        e.insert("burst_estimate_pages", 2500.0);
        e.insert("ring_current", 256.0);
        assert_eq!(e.insert("ring_target", 1024.0), Some(512.0));
        let names: Vec<&str> = e.iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            ["burst_estimate_pages", "ring_current", "ring_target"]
        );
        assert_eq!(e.get("ring_target"), Some(1024.0));
        assert_eq!(e.get("ring"), None);
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"burst_estimate_pages":2500.0,"ring_current":256.0,"ring_target":1024.0}"#
        );
        let back: Evidence = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        let old: BTreeMap<String, f64> = serde_json::from_str(&json).unwrap();
        assert_eq!(old, e.to_map());
        let cap = e.0.capacity();
        e.clear();
        assert!(e.is_empty());
        assert_eq!(e.0.capacity(), cap);
    }
}
