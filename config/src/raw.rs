//! The policy file's shape. These types generate the JSON Schema (shipped
//! for editors and used for the structural pass over every file), then
//! carry the merged, schema-valid document into [`crate::convert`].
//!
//! Every field is optional in a file: the embedded default policy is the
//! base layer of the merge, so a missing key keeps its documented default.
//! The `Default` impls below only matter for list items (selectors, change
//! windows), where each item stands alone.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A pptune policy file (`/etc/pptune/policy.yaml`, drop-ins in
/// `/etc/pptune/policy.d/*.yaml`). See docs/policy.md.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawPolicy {
    /// `observe` (plan, log, export) or `enforce` (act). Selectors may override it.
    pub mode: RawMode,
    /// Interface selection, evaluated in order; the first match wins. A device
    /// no selector matches is not looked at.
    pub selectors: Vec<RawSelector>,
    pub timing: RawTiming,
    pub thresholds: RawThresholds,
    pub rings: RawRings,
    pub channels: RawChannels,
    pub budget: RawBudget,
    pub limits: RawLimits,
    pub disruption: RawDisruption,
    /// What to do with tuned devices when the daemon stops: `keep` or `restore`.
    pub on_stop: RawOnStop,
    /// A knob another configuration sets (systemd `.link`, NetworkManager,
    /// TuneD): `defer` leaves it to that owner, `warn` manages it anyway.
    pub coexist: RawCoexist,
    /// Staged enforcement across a fleet; `null` = every host as `mode` says.
    pub rollout: Option<RawRollout>,
    pub daemon: RawDaemon,
    /// An absolute path to a second policy file the daemon runs on the same
    /// samples without acting, exporting what it would do; `null` = none.
    pub shadow: Option<String>,
    /// Starting rings per device class (`pptune fleet suggest` writes
    /// them): a device pptune has not changed yet starts there.
    pub priors: Vec<RawPrior>,
}

/// One device class's starting ring.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPrior {
    /// The driver name (`ethtool -i`).
    pub driver: String,
    /// The MTU; absent = any.
    #[serde(default)]
    #[schemars(range(min = 68))]
    pub mtu: Option<u32>,
    /// The link speed in Mb/s (`ethtool`'s Speed); absent = any.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub speed: Option<u32>,
    /// The PCI `vendor:device` of the NIC (`lspci -n`), e.g. `8086:159b`;
    /// absent = any.
    #[serde(default)]
    pub model: Option<String>,
    /// The firmware version (`ethtool -i`'s firmware-version); absent =
    /// any.
    #[serde(default)]
    pub firmware: Option<String>,
    /// The RX ring to start at.
    #[schemars(range(min = 1))]
    pub ring_rx: u32,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawMode {
    #[default]
    Observe,
    Enforce,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawOnStop {
    #[default]
    Keep,
    Restore,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawCoexist {
    #[default]
    Defer,
    Warn,
}

/// Which interfaces a rule applies to.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawSelector {
    /// Shell globs on the interface name (`eth*`, `ens1f?`, `en[ps]*`); empty = any name.
    pub names: Vec<String>,
    /// Driver names or globs (`mlx5_core`, `ice`); empty = any driver.
    pub drivers: Vec<String>,
    /// Name globs excluded even when the rest matches.
    pub exclude: Vec<String>,
    /// Mode for matching interfaces; `null` = the global `mode`.
    pub mode: Option<RawMode>,
    /// Only interfaces that expose page pools (default true: without pools
    /// there is nothing to observe).
    pub require_pools: bool,
}

impl Default for RawSelector {
    fn default() -> Self {
        Self {
            names: vec![],
            drivers: vec![],
            exclude: vec![],
            mode: None,
            require_pools: true,
        }
    }
}

/// A duration: a number with a unit, `ms`, `s`, `m` or `h`, parts may be
/// combined (`1m30s`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DurationText(pub String);

impl JsonSchema for DurationText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9]+(ms|s|m|h))+$",
            "description": "A duration: digits with a unit (ms, s, m, h), parts may be combined, e.g. 10s, 5m, 1h30m."
        })
    }
}

/// Every timing term, defined here and nowhere else.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawTiming {
    /// Time between samples.
    pub interval: DurationText,
    /// The span one finding window covers (a multiple of `interval`).
    pub window: DurationText,
    /// Consecutive windows over a threshold that make a finding.
    #[schemars(range(min = 1, max = 100))]
    pub windows_for_finding: u32,
    /// Minimum time after a change before the next change on that device.
    pub cooldown: DurationText,
    /// After a change: how long it is evaluated against the pre-change baseline.
    pub evaluation: DurationText,
    /// How long a pool must stay calm before its ring is shrunk back.
    pub calm_before_shrink: DurationText,
}

/// Grow and shrink thresholds, as fractions between 0 and 1.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawThresholds {
    /// Grow when the recycle-miss share (ring_full / returned pages) is at or above this.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub grow_recycle_miss: f64,
    /// …or when the slow-refill share is at or above this while ring_full is the cause.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub grow_slow_refill: f64,
    /// Calm (shrink may follow) only while the recycle-miss share stays below this.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub shrink_recycle_miss: f64,
    /// Ignore a queue with fewer returned pages than this in a window.
    pub min_pages_per_window: u64,
    /// A severe miss: a queue's recycle-miss share at or above this in
    /// `severe_samples` samples in a row closes its window early, and the
    /// ring may grow without waiting for `timing.windows_for_finding`.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub severe_recycle_miss: f64,
    /// Samples in a row that make a severe miss; 0 turns the early path off.
    #[schemars(range(max = 100))]
    pub severe_samples: u32,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawRounding {
    /// Driver knowledge: mlx5/fbnic powers of two, ice/idpf multiples of 32.
    #[default]
    Auto,
    PowerOfTwo,
    MultipleOf32,
    None,
}

/// RX ring sizing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawRings {
    /// Manage RX ring sizes at all.
    pub enabled: bool,
    /// Never set a ring below this.
    #[schemars(range(min = 1, max = 65536))]
    pub min: u32,
    /// Never set a ring above this (the driver's rx-max and the page_pool clamp also apply).
    #[schemars(range(min = 1, max = 65536))]
    pub max: u32,
    pub rounding: RawRounding,
    /// Changes to reach the ring the bursts need: the first goes to the
    /// estimate, later ones to an estimate calibrated against the previous
    /// step; a step past this count goes straight to the limit.
    #[schemars(range(min = 1, max = 8))]
    pub max_steps_to_target: u32,
    /// Room over the estimated burst, as a factor (1.25 = 25 % more).
    #[schemars(range(min = 1.0, max = 4.0))]
    pub headroom: f64,
    /// Give memory back when calm: shrink toward the recorded original in
    /// steps, each judged under the load and put back (then not retried)
    /// when recycle misses come back.
    pub shrink_when_calm: bool,
    /// Right-sizing: a calm ring may shrink below its recorded original (a
    /// ring set to max) to what the load needs, down to right_size_floor.
    pub right_size: bool,
    /// The smallest ring right-sizing shrinks to (never above the original).
    #[schemars(range(min = 1, max = 65536))]
    pub right_size_floor: u32,
}

/// RX queue count management; off unless enabled.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawChannels {
    pub enabled: bool,
    #[schemars(range(min = 1, max = 4096))]
    pub min: u32,
    #[schemars(range(min = 1, max = 4096))]
    pub max: u32,
    /// Queues added or removed per change.
    #[schemars(range(min = 1, max = 64))]
    pub step: u32,
    /// Add queues when drops persist while recycling is healthy.
    pub grow_on_drops_when_healthy: bool,
    /// Remove queues when the slow path stays high with rings at their limit,
    /// or, as a trial judged on the delivered rate, when the ring cannot help.
    pub shrink_when_contended: bool,
    /// Drops per received packet at or above which more queues are considered.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub grow_drop_share: f64,
    /// A trial queue cut on a contended slow path the ring cannot fix is kept
    /// only when the delivered rate (qstats rx-packets/s) rose by more than
    /// this share over equal windows before and after; else it is put back.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub trial_gain: f64,
}

/// A byte count: an integer, or a string with a binary unit (`512MiB`, `2GiB`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ByteSize {
    Bytes(u64),
    Text(String),
}

/// Memory budgets: (posted RX buffers + pool ring + 128 cached) × page bytes
/// per queue, summed; `null` = no budget.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawBudget {
    pub per_device_bytes: Option<ByteSize>,
    pub per_host_bytes: Option<ByteSize>,
}

/// How often and when pptune may change things.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawLimits {
    /// Changes per host in any sliding hour.
    #[schemars(range(min = 0, max = 1000))]
    pub max_changes_per_hour: u32,
    /// Never change two members of one bond or team at once.
    pub one_bond_member_at_a_time: bool,
    /// Allowed change windows in local time; empty = any time.
    pub windows: Vec<RawWindow>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Weekday {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

/// A weekly change window. `end` before `start` wraps past midnight; the
/// days name the day the window opens.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWindow {
    /// Days the window opens; empty or missing = every day.
    #[serde(default)]
    pub days: Vec<Weekday>,
    /// `HH:MM`, local time.
    pub start: String,
    /// `HH:MM`, local time.
    pub end: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum RawClass {
    /// Make-before-break: a brief carrier blip (mlx5).
    Brief,
    /// Queues restart, carrier off for a moment (ice, bnxt, idpf, gve, fbnic).
    #[default]
    Restart,
    /// Device reset or renegotiation: seconds of outage (iavf).
    LinkDown,
}

/// Per-driver disruption classes and which may be changed while the link is up.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawDisruption {
    /// Class of drivers not listed in `drivers`.
    pub default_class: RawClass,
    /// Classes that may be changed while the link is up.
    pub allowed_while_up: Vec<RawClass>,
    /// Driver name → class.
    pub drivers: BTreeMap<String, RawClass>,
}

/// Staged enforcement: hosts whose stable hash of (salt, host identity) falls
/// below `fraction` enforce; those at or above `1 - holdout` are the control
/// group and only observe; the others observe.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRollout {
    #[schemars(range(min = 0.0, max = 1.0))]
    pub fraction: f64,
    pub salt: String,
    /// Share of hosts held out as a control group (0 = none).
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub holdout: f64,
}

/// Daemon settings that are not decisions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawDaemon {
    /// Prometheus listen address (`host:port`, or `:port` for every
    /// address); `null` = no metrics endpoint.
    pub metrics_listen: Option<String>,
    /// When another process holds the metrics port: `retry` starts without
    /// the endpoint and binds it when the port is free (a warning says
    /// so); `exit` refuses to start.
    pub metrics_port_taken: RawPortTaken,
    /// A web configuration file (exporter-toolkit's format: TLS and basic
    /// auth) for the metrics endpoint; none = plain HTTP.
    pub metrics_web_config: Option<String>,
    /// Which per-queue series `/metrics` exports (per-device sums are
    /// always exported).
    pub queue_metrics: RawQueueMetrics,
    /// Size cap of the rolling recording under the state directory
    /// (docs/recording.md); `0` records nothing. Default 64 MiB.
    pub recording_max_bytes: Option<ByteSize>,
}

/// `daemon.metrics_port_taken`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawPortTaken {
    #[default]
    Retry,
    Exit,
}

/// `daemon.queue_metrics`: bounds the per-queue series a host exports.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RawQueueMetrics {
    /// `all`: every queue; `worst`: the `worst` queues of each device with
    /// the highest recycle-miss share; `none`: per-device sums only.
    pub series: RawQueueSeries,
    /// With `series: worst`, how many queues per device.
    #[schemars(range(min = 1))]
    pub worst: u32,
}

impl Default for RawQueueMetrics {
    fn default() -> Self {
        Self {
            series: RawQueueSeries::Worst,
            worst: 4,
        }
    }
}

/// The per-queue series setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawQueueSeries {
    All,
    Worst,
    None,
}
