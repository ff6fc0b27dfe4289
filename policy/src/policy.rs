//! The validated policy: domain values only. `config/` builds it from YAML
//! (checking every range and contradiction there); the engine trusts it.
//!
//! Every timing term lives here and nowhere else.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Observe (plan, log, export) or enforce (act).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Observe,
    Enforce,
}

/// What to do with tuned devices when the daemon stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnStop {
    /// Leave the tuned values in place (the default: a restart must not
    /// undo good settings; reboot resets NICs anyway).
    #[default]
    Keep,
    /// Put the recorded originals back.
    Restore,
}

/// What to do with a knob another configuration sets (a systemd `.link`
/// file, a NetworkManager profile, TuneD's active profile), which would
/// re-apply its value whenever the link is reconfigured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Coexist {
    /// Leave the knob to its owner, like an operator override (the default).
    #[default]
    Defer,
    /// Manage it anyway, and say in `status` and the log who else sets it.
    Warn,
}

/// The whole validated policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Global mode; selectors may override it per interface.
    pub mode: Mode,
    /// Interface selection, evaluated in order; first match wins.
    pub selectors: Vec<Selector>,
    pub timing: Timing,
    pub thresholds: Thresholds,
    pub rings: RingPolicy,
    pub channels: ChannelPolicy,
    pub budget: MemoryBudget,
    pub limits: ChangeLimits,
    pub disruption: Disruption,
    pub on_stop: OnStop,
    /// Knobs another configuration owns: defer to it, or warn and manage.
    pub coexist: Coexist,
    /// Staged enforcement across a fleet; `None` = every host as `mode` says.
    pub rollout: Option<Rollout>,
    pub daemon: DaemonSettings,
    /// A second policy the daemon runs on the same samples without acting,
    /// exporting what it would do.
    #[serde(default)]
    pub shadow: Option<Shadow>,
    /// Starting rings per device class, from what the fleet converged to
    /// (`pptune fleet suggest`); the first that matches a device applies.
    #[serde(default)]
    pub priors: Vec<Prior>,
}

/// A device class's starting ring: a device of the class that pptune has
/// not changed yet starts at `ring_rx` instead of the driver's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prior {
    /// The driver (`ethtool -i`'s name).
    pub driver: String,
    /// The MTU; `None` = any.
    pub mtu: Option<u32>,
    /// The link speed in Mb/s; `None` = any.
    #[serde(default)]
    pub speed_mbps: Option<u32>,
    /// PCI `vendor:device`, lower case; `None` = any.
    #[serde(default)]
    pub model: Option<String>,
    /// The firmware version; `None` = any.
    #[serde(default)]
    pub firmware: Option<String>,
    /// The RX ring (`ring.rx`) to start at.
    pub ring_rx: u32,
}

impl Prior {
    /// Whether `dev` is of this class.
    #[must_use]
    pub fn matches(&self, dev: &crate::snapshot::Device) -> bool {
        dev.driver.as_deref() == Some(self.driver.as_str())
            && self.mtu.is_none_or(|m| dev.mtu == Some(m))
            && self.speed_mbps.is_none_or(|s| dev.speed_mbps == Some(s))
            && self
                .model
                .as_deref()
                .is_none_or(|m| dev.model.as_deref() == Some(m))
            && self
                .firmware
                .as_deref()
                .is_none_or(|f| dev.firmware.as_deref() == Some(f))
    }

    /// Whether `other` names the same class (the same key fields, the
    /// ring aside).
    #[must_use]
    pub fn same_class(&self, other: &Self) -> bool {
        (
            &self.driver,
            self.mtu,
            self.speed_mbps,
            &self.model,
            &self.firmware,
        ) == (
            &other.driver,
            other.mtu,
            other.speed_mbps,
            &other.model,
            &other.firmware,
        )
    }
}

/// The shadow policy: a file, and the policy it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shadow {
    pub path: std::path::PathBuf,
    /// The file's policy, read and validated by `config::load` (which fails
    /// when it cannot); `None` from the parsers that read no file
    /// (`config::parse_str`, `parse_docs`).
    pub policy: Option<Box<Policy>>,
}

/// Which interfaces a rule applies to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    /// Shell globs on the interface name (`eth*`, `ens1f?`); empty = any.
    pub names: Vec<String>,
    /// Driver names (`mlx5_core`, `ice`); empty = any.
    pub drivers: Vec<String>,
    /// Globs that exclude an interface even when the rest matches.
    pub exclude: Vec<String>,
    /// Mode for matching interfaces; `None` = the global mode.
    pub mode: Option<Mode>,
    /// Only interfaces that expose page pools.
    pub require_pools: bool,
}

/// Every timing term, defined once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// Time between samples.
    pub interval: Duration,
    /// The span one finding window covers (a multiple of `interval`).
    pub window: Duration,
    /// Consecutive windows over threshold that make a finding.
    pub windows_for_finding: u32,
    /// Minimum time after a change before the next change on that device.
    pub cooldown: Duration,
    /// After a change: how long to evaluate against the pre-change baseline.
    pub evaluation: Duration,
    /// How long a pool must stay calm before a ring is shrunk back.
    pub calm_before_shrink: Duration,
}

/// Grow and shrink thresholds (fractions 0..=1), kept apart for hysteresis.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Grow when the recycle-miss share is at or above this…
    pub grow_recycle_miss: f64,
    /// …or the slow-refill share is at or above this while ring_full is the cause.
    pub grow_slow_refill: f64,
    /// Shrink only when the recycle-miss share stays below this.
    pub shrink_recycle_miss: f64,
    /// Ignore a window with fewer returned pages than this (ratios of tiny
    /// numbers mean nothing).
    pub min_pages_per_window: u64,
    /// A severe miss: a queue whose recycle-miss share is at or above this
    /// in `severe_samples` samples in a row (each over its share of
    /// `min_pages_per_window`) closes its window early and may grow the
    /// ring without waiting for `windows_for_finding` windows.
    #[serde(default = "default_severe_recycle_miss")]
    pub severe_recycle_miss: f64,
    /// Samples in a row that make a severe miss; 0 turns the early path off.
    #[serde(default = "default_severe_samples")]
    pub severe_samples: u32,
}

fn default_severe_recycle_miss() -> f64 {
    0.2
}

fn default_severe_samples() -> u32 {
    2
}

/// How rounding drivers treat a requested ring size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rounding {
    /// Use driver knowledge (mlx5/fbnic: power of two; ice/idpf: multiple of 32).
    #[default]
    Auto,
    PowerOfTwo,
    MultipleOf32,
    None,
}

/// Ring sizing rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RingPolicy {
    pub enabled: bool,
    pub min: u32,
    pub max: u32,
    pub rounding: Rounding,
    /// At most this many changes to reach the ring the bursts need
    /// (1 or 2: few disruptive steps rather than doubling four times).
    pub max_steps_to_target: u32,
    /// Extra room over the estimated burst, as a factor (1.25 = 25 %).
    pub headroom: f64,
    /// Shrink back toward the original when calm.
    pub shrink_when_calm: bool,
    /// Right-sizing: a calm ring may shrink below its recorded original
    /// (a ring an operator or a `.link` file set to max) to what the load
    /// needs, never below [`Self::right_size_floor`] (docs/decisions.md §7).
    #[serde(default)]
    pub right_size: bool,
    /// The smallest ring right-sizing shrinks to (and never above the
    /// original); `rings.min` and the driver's minimum apply too.
    #[serde(default = "default_right_size_floor")]
    pub right_size_floor: u32,
}

/// `rings.right_size_floor` when a recorded policy predates it: 512
/// entries, what normal processing rarely needs more than by a netdev
/// maintainer's account.
fn default_right_size_floor() -> u32 {
    512
}

/// Channel (queue count) rules; off unless enabled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChannelPolicy {
    pub enabled: bool,
    pub min: u32,
    pub max: u32,
    /// Add queues when rx drops persist while recycling is healthy.
    pub grow_on_drops_when_healthy: bool,
    /// Remove queues when the slow path stays high with rings at their limit.
    pub shrink_when_contended: bool,
    /// Step in queues per change.
    pub step: u32,
    /// Harm (drops / received packets over a window) at or above which
    /// more queues are considered while recycling is healthy.
    pub grow_drop_share: f64,
    /// A trial queue cut (the ring cannot help a contended slow path) is
    /// kept only when the device's delivered rate (qstats rx-packets per
    /// second) rose by more than this share over equal windows; otherwise
    /// it is put back and not tried again.
    #[serde(default = "default_trial_gain")]
    pub trial_gain: f64,
}

/// `channels.trial_gain` when a recorded policy predates it.
fn default_trial_gain() -> f64 {
    0.05
}

/// Memory budgets in bytes (computed as in design.md: (posted buffers +
/// pool ring + 128 cached) × page bytes, per queue, summed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryBudget {
    pub per_device_bytes: Option<u64>,
    pub per_host_bytes: Option<u64>,
}

/// How often the daemon may change things.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeLimits {
    pub max_changes_per_hour: u32,
    /// Allowed change windows; empty = any time.
    pub windows: Vec<ChangeWindow>,
    /// Never change two members of one bond or team at once.
    pub one_bond_member_at_a_time: bool,
}

/// A weekly window in local time, minutes since midnight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeWindow {
    /// 0 = Monday … 6 = Sunday; empty = every day.
    pub days: Vec<u8>,
    pub start_minute: u16,
    pub end_minute: u16,
}

/// How disruptive a ring/channel change is on a driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisruptionClass {
    /// Make-before-break or per-queue swap: a brief carrier blip (mlx5).
    Brief,
    /// Full down/up of the queues, carrier off for a moment (ice, bnxt, idpf).
    Restart,
    /// Link renegotiation or device reset, seconds of outage (tg3, iavf).
    LinkDown,
}

/// Per-driver disruption classes and which may change while the link is up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disruption {
    /// driver name → class; drivers not listed use `default_class`.
    pub drivers: Vec<(String, DisruptionClass)>,
    pub default_class: DisruptionClass,
    /// Classes that may be changed while the link is up.
    pub allowed_while_up: Vec<DisruptionClass>,
}

/// Staged enforcement: a stable hash of (salt, host identity) below
/// `fraction` enforces; at or above `1 - holdout` is the control group,
/// which only observes; the rest observe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rollout {
    pub fraction: f64,
    pub salt: String,
    /// The share of hosts held out (0 = none); never overlapping the
    /// fraction.
    #[serde(default)]
    pub holdout: f64,
}

/// Daemon settings that are not decisions (kept in the same file so one
/// `--config` means the same everywhere).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonSettings {
    /// Prometheus listen address (loopback by default).
    pub metrics_listen: Option<SocketAddr>,
    /// What `run` does when another process holds the metrics port.
    pub metrics_port_taken: PortTaken,
    /// exporter-toolkit web configuration (TLS, basic auth) for it.
    pub metrics_web_config: Option<std::path::PathBuf>,
    /// Which per-queue series `/metrics` exports.
    pub queue_series: QueueSelection,
    /// Size cap of the daemon's rolling recording (0 = none).
    pub recording_max_bytes: u64,
}

/// `daemon.metrics_port_taken`: the metrics endpoint is optional to the
/// daemon's work, and any local user can bind a port above 1023 first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortTaken {
    /// Start without the endpoint, say so (a warning naming the address
    /// and who to look for), and bind it as soon as the port is free.
    #[default]
    Retry,
    /// Refuse to start (exit 1): for a deployment whose probes need it.
    Exit,
}

/// `daemon.recording_max_bytes` when the policy does not say (about 6 h
/// of a host whose 2048 pools are all busy, at a 10 s interval;
/// docs/recording.md, "Size").
pub const DEFAULT_RECORDING_MAX_BYTES: u64 = 64 << 20;

/// Which per-queue series `/metrics` exports; the per-device sums of the
/// same counters and gauges are exported in every case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueSelection {
    /// Every queue.
    #[default]
    All,
    /// The `count` queues of each device with the highest recycle-miss
    /// share over the last interval.
    Worst { count: u32 },
    /// None: device sums only.
    None,
}
