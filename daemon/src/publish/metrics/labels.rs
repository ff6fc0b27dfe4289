//! The label sets of the registry's families.

use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DevLabels {
    pub device: String,
}

/// The label set of the per-queue series (written by [`Metrics::encode`]
/// from [`QueueKey`]s; kept as the documented shape of those labels).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct QueueLabels {
    pub device: String,
    /// RX queue id, or `unmapped` for pools that map to no queue.
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RingLabels {
    pub device: String,
    /// `rx`, `rx_mini`, `rx_jumbo`, `tx`.
    pub ring: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChannelLabels {
    pub device: String,
    /// `rx`, `tx`, `other`, `combined`.
    pub channel: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct DecisionLabels {
    pub device: String,
    /// `hold`, `set_ring`, `set_channels`.
    pub action: String,
    pub reason: String,
    /// `observe` or `enforce` (after rollout).
    pub mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ActionLabels {
    pub device: String,
    /// `ring.rx`, `channels.combined` …
    pub knob: String,
    /// `grow`, `shrink`, `revert`, `restore`.
    pub direction: String,
    /// `applied`, `refused`, `failed`, `effective`, `ineffective`,
    /// `reverted`, `inconclusive`, `skipped_backoff`, `skipped_cooldown`, `skipped_budget`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecLabels {
    pub device: String,
    /// The stable recommendation id (hash of device identity, knob, reason).
    pub recommendation: String,
    pub knob: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct KnobLabels {
    pub device: String,
    pub knob: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

/// `pptune_device_info`'s labels: what a fleet filters and joins by, and
/// the device classes of the fleet's comparison and priors (driver,
/// model, firmware, MTU, speed).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InfoLabels {
    pub device: String,
    /// The driver (`ethtool -i`'s), empty when the kernel does not say.
    pub driver: String,
    /// The rtnetlink link kind (`veth`, `netdevsim`, …), empty for a
    /// physical NIC.
    pub kind: String,
    /// The MTU, empty when the kernel does not say.
    pub mtu: String,
    /// The link speed in Mb/s, empty with no link or when the driver does
    /// not say.
    pub speed: String,
    /// PCI `vendor:device`, empty off PCI.
    pub model: String,
    /// The firmware version, empty when the driver reports none.
    pub firmware: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabels {
    pub device: String,
    pub mode: String,
}

/// `pptune_rollout_arm`'s label: enforce, holdout or observe.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ArmLabels {
    pub arm: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CapLabels {
    pub capability: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    /// The git commit the binary was built from (`unknown` outside a
    /// checkout unless `PPTUNE_GIT_REVISION` was set at build time).
    pub revision: String,
}

/// `pptune_memory_budget_bytes`'s label: `device` or `host`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScopeLabels {
    pub scope: &'static str,
}

/// `pptune_judging_nothing`'s label: why the host judges nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

/// `pptune_device_unjudged`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DevReasonLabels {
    pub device: String,
    pub reason: &'static str,
}

/// `pptune_policy_info`'s labels: the content hashes of the policy in
/// force and of its shadow (empty without one).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    pub hash: String,
    pub shadow_hash: String,
}
