//! The recording's on-disk records (docs/recording.md): pptune's own,
//! versioned structs, converted to and from the engine's types here and in
//! [`super::coder`] and nowhere else, so a change of `policy::snapshot`
//! changes these files (at compile time), never silently the format. The
//! rings and channels are written by field name instead ([`RingsRec`]), as
//! the pool counters are: a field added to those blocks is one more name,
//! which a reader that does not know it skips.
//!
//! A device's slowly changing facts (identity, rings, channels, link
//! state) are written only when they change; the pools' and queues' numbers
//! are delta-coded in a binary block ([`super::coder::Coder`] holds that
//! memory, identically on both sides).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use policy::engine::{ActionRecord, LocalTime, Original};
use policy::gates::Backoff;
use policy::plan::{Action, Decision, Knob};
use policy::snapshot::{
    Availability, Capabilities, Channels, Device, DeviceId, Field, OperState, Rings,
};
use serde::{Deserialize, Serialize};

/// The format version in every segment header and `Start` record. Bumped on
/// any incompatible change; a reader refuses versions it does not read by
/// name.
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format this build reads: format 2 differs from 3 only in a
/// device's rings and channels, which it wrote by position ([`RingsRec`],
/// [`ChannelsRec`]).
pub const OLDEST_READ: u32 = 2;

/// One framed record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// First record of every segment.
    Start(Box<Start>),
    /// One sampling pass: what was seen, what the engine was told, what it
    /// decided, what was changed.
    Pass(Box<Pass>),
}

/// Why a segment began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartReason {
    /// A new run of the writer (daemon start, `pptune record`).
    Run,
    /// The previous segment reached its share of the size cap.
    Rotate,
    /// The policy was reloaded with a change: the engine starts afresh.
    Reload,
}

/// A segment's opening record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub format: u32,
    pub reason: StartReason,
    /// Wall-clock time of the run's start (ms since the epoch): passes with
    /// the same `run` come from one process with one monotonic clock.
    pub run: u64,
    pub unix_ms: u64,
    /// `pptune <version> daemon` or `pptune <version> record`.
    pub writer: String,
    pub host: String,
    /// The pool counter names, in the order the passes list them.
    pub counters: Vec<String>,
    /// The policy in force (JSON of `policy::Policy`), when a daemon wrote it.
    pub policy: Option<String>,
    /// The engine's memory before the segment's first pass.
    pub engine: Option<EngineBlob>,
    /// The pass before the segment's first one (the engine's `previous`), so
    /// a segment replays on its own even when older ones were rotated out.
    pub previous: Option<PrevPass>,
}

/// `policy::engine::EngineState` as JSON with its own version
/// (`ENGINE_STATE_VERSION`): another version is not restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineBlob {
    pub version: u32,
    pub json: String,
}

/// The sample before a segment's first pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrevPass {
    pub now_ns: u64,
    pub snapshot: SnapRec,
}

/// One pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pass {
    pub unix_ms: u64,
    /// The writer's monotonic clock (`Observation::now`).
    pub now_ns: u64,
    /// `Observation::elapsed`.
    pub elapsed_ns: u64,
    /// `Observation::local_time`: (weekday 0 = Monday, minute of day).
    pub local_time: Option<(u8, u16)>,
    pub snapshot: SnapRec,
    /// What the engine was told besides the samples.
    pub inputs: Inputs,
    /// One per selected device.
    pub decisions: Vec<DecisionRec>,
    /// Changes made in this pass (enforce mode), with their outcome so far.
    pub changes: Vec<ChangeRec>,
}

/// The engine's other inputs, as the writer gave them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inputs {
    pub history: Vec<ChangeRec>,
    pub overrides: Vec<(DeviceId, Knob)>,
    pub originals: Vec<(DeviceId, Knob, u32)>,
    pub backoff: Vec<BackoffRec>,
}

/// A change: `policy::engine::ActionRecord`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRec {
    pub device: DeviceId,
    pub knob: Knob,
    pub from: u32,
    pub to: u32,
    pub at_ns: u64,
    pub outcome: policy::engine::Outcome,
}

/// A device's backoff: `policy::gates::Backoff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackoffRec {
    pub key: String,
    pub failures: u32,
    pub until_ns: u64,
    pub last_error: String,
}

/// A decision. `message` and `evidence` are kept for changes only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRec {
    pub ifindex: u32,
    pub device: String,
    pub device_id: DeviceId,
    pub mode: policy::Mode,
    pub action: Action,
    pub reason: String,
    pub id: String,
    pub message: Option<String>,
    pub evidence: Option<BTreeMap<String, f64>>,
}

/// A snapshot: what changes rarely, in CBOR; the layout of its queues and
/// pools and all its numbers in the binary block after the record
/// ([`super::coder`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapRec {
    pub taken_at_ms: u64,
    /// `None`: as in the previous pass.
    pub caps: Option<CapsRec>,
    /// One per device, in the block's order: its description when it
    /// differs from the previous pass's for the same ifindex.
    pub metas: Vec<Option<Box<DevMeta>>>,
    /// The binary block, written after the record's CBOR (not in it).
    #[serde(skip)]
    pub block: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapsRec {
    pub kernel_release: String,
    /// netdev, page_pool_get, page_pool_stats, queue_get, napi_get,
    /// qstats_get, ethtool, cap_net_admin.
    pub flags: [bool; 8],
}

/// What changes rarely: identity, link state, rings, channels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevMeta {
    pub name: String,
    pub id: DeviceId,
    pub driver: Option<String>,
    pub kind: Option<String>,
    pub oper_state: OperState,
    pub admin_up: bool,
    pub master: Option<u32>,
    pub mtu: Option<u32>,
    pub num_rx_queues: Option<u32>,
    pub rings: Result<RingsRec, Option<String>>,
    pub channels: Result<ChannelsRec, Option<String>>,
    /// Absent from recordings made before pptune read them (read as
    /// unknown).
    #[serde(default)]
    pub speed_mbps: Option<u32>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub firmware: Option<String>,
    #[serde(default)]
    pub iommu: policy::snapshot::Iommu,
}

/// A block's fields the driver reports, each under its name in the block's
/// table (`policy::snapshot::Rings::FIELDS`, `Channels::FIELDS`).
pub type Named = BTreeMap<Cow<'static, str>, u32>;

/// A device's rings, by field name: a field added to
/// `policy::snapshot::Rings` is recorded and read back with no change here.
/// A name this build does not know (a newer writer's field) is skipped; a
/// field the recording lacks reads as not reported. Format 2's positional
/// layout is told apart by its CBOR type (an array, not a map) and read as
/// the names it stood for ([`FORMAT2_RINGS`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RingsRec {
    ByName(Named),
    /// Format 2: the values of [`FORMAT2_RINGS`] in order, then
    /// `tcp_data_split`.
    Format2([Option<u32>; 11], Option<u8>),
}

/// A device's channels, by field name, as [`RingsRec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ChannelsRec {
    ByName(Named),
    /// Format 2: the values of [`FORMAT2_CHANNELS`] in order.
    Format2([Option<u32>; 8]),
}

/// The ring fields format 2 wrote, in its order (`tcp_data_split` apart,
/// after them).
pub const FORMAT2_RINGS: [&str; 11] = [
    "rx",
    "rx_max",
    "rx_mini",
    "rx_mini_max",
    "rx_jumbo",
    "rx_jumbo_max",
    "tx",
    "tx_max",
    "rx_buf_len",
    "hds_thresh",
    "hds_thresh_max",
];

/// The channel fields format 2 wrote, in its order.
pub const FORMAT2_CHANNELS: [&str; 8] = [
    "rx",
    "rx_max",
    "tx",
    "tx_max",
    "other",
    "other_max",
    "combined",
    "combined_max",
];

/// The fields of `b` the driver reports, by name.
fn named<B>(fields: &'static [Field<B>], b: &B) -> Named {
    fields
        .iter()
        .filter_map(|f| Some((Cow::Borrowed(f.name), (f.get)(b)?)))
        .collect()
}

/// A block from its fields by name; names not in `fields` are skipped.
fn from_named<'a, B: Default>(
    fields: &[Field<B>],
    values: impl IntoIterator<Item = (&'a str, u32)>,
) -> B {
    let mut b = B::default();
    for (name, v) in values {
        if let Some(f) = fields.iter().find(|f| f.name == name) {
            (f.set)(&mut b, v);
        }
    }
    b
}

/// Format 2's positional values with the names they stood for.
fn format2<'a>(
    names: &'a [&'a str],
    values: &'a [Option<u32>],
) -> impl Iterator<Item = (&'a str, u32)> + 'a {
    names
        .iter()
        .zip(values)
        .filter_map(|(n, v)| Some((*n, (*v)?)))
}

/// The capability flags in [`CapsRec::flags`] order.
pub(super) fn caps_flags(c: &mut Capabilities) -> [&mut bool; 8] {
    [
        &mut c.netdev_family,
        &mut c.page_pool_get,
        &mut c.page_pool_stats,
        &mut c.queue_get,
        &mut c.napi_get,
        &mut c.qstats_get,
        &mut c.ethtool_family,
        &mut c.cap_net_admin,
    ]
}

pub(super) fn caps_rec(c: &Capabilities) -> CapsRec {
    let mut c = c.clone();
    CapsRec {
        flags: caps_flags(&mut c).map(|f| *f),
        kernel_release: c.kernel_release,
    }
}

pub(super) fn dev_meta(d: &Device) -> DevMeta {
    DevMeta {
        name: d.name.clone(),
        id: d.id.clone(),
        driver: d.driver.clone(),
        kind: d.kind.clone(),
        oper_state: d.oper_state,
        admin_up: d.admin_up,
        master: d.master,
        mtu: d.mtu,
        num_rx_queues: d.num_rx_queues,
        speed_mbps: d.speed_mbps,
        model: d.model.clone(),
        firmware: d.firmware.clone(),
        iommu: d.iommu,
        rings: match &d.rings {
            Availability::Available(r) => Ok(RingsRec::ByName(named(Rings::FIELDS, r))),
            Availability::Unavailable(why) => Err(Some(why.clone())),
            Availability::NotSampled => Err(None),
        },
        channels: match &d.channels {
            Availability::Available(c) => Ok(ChannelsRec::ByName(named(Channels::FIELDS, c))),
            Availability::Unavailable(why) => Err(Some(why.clone())),
            Availability::NotSampled => Err(None),
        },
    }
}

pub(super) fn rings(r: &RingsRec) -> Rings {
    match r {
        RingsRec::ByName(m) => from_named(Rings::FIELDS, m.iter().map(|(k, v)| (k.as_ref(), *v))),
        RingsRec::Format2(values, split) => from_named(
            Rings::FIELDS,
            format2(&FORMAT2_RINGS, values).chain(split.map(|s| ("tcp_data_split", u32::from(s)))),
        ),
    }
}

pub(super) fn channels(c: &ChannelsRec) -> Channels {
    match c {
        ChannelsRec::ByName(m) => {
            from_named(Channels::FIELDS, m.iter().map(|(k, v)| (k.as_ref(), *v)))
        }
        ChannelsRec::Format2(values) => {
            from_named(Channels::FIELDS, format2(&FORMAT2_CHANNELS, values))
        }
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl ChangeRec {
    #[must_use]
    pub fn of(a: &ActionRecord) -> Self {
        Self {
            device: a.device.clone(),
            knob: a.knob,
            from: a.from,
            to: a.to,
            at_ns: ns(a.at),
            outcome: a.outcome.clone(),
        }
    }

    #[must_use]
    pub fn action(&self) -> ActionRecord {
        ActionRecord {
            device: self.device.clone(),
            knob: self.knob,
            from: self.from,
            to: self.to,
            at: Duration::from_nanos(self.at_ns),
            outcome: self.outcome.clone(),
        }
    }
}

impl Inputs {
    /// The engine's inputs besides the samples, as the loop hands them over.
    #[must_use]
    pub fn of(
        history: &[ActionRecord],
        overrides: &[(DeviceId, Knob)],
        originals: &[Original],
        backoff: &BTreeMap<String, Backoff>,
    ) -> Self {
        Self {
            history: history.iter().map(ChangeRec::of).collect(),
            overrides: overrides.to_vec(),
            originals: originals
                .iter()
                .map(|o| (o.device.clone(), o.knob, o.value))
                .collect(),
            backoff: backoff
                .iter()
                .map(|(k, b)| BackoffRec {
                    key: k.clone(),
                    failures: b.failures,
                    until_ns: ns(b.until),
                    last_error: b.last_error.clone(),
                })
                .collect(),
        }
    }

    /// Back to the engine's types: history, originals, backoff.
    #[must_use]
    pub fn engine_inputs(&self) -> (Vec<ActionRecord>, Vec<Original>, BTreeMap<String, Backoff>) {
        (
            self.history.iter().map(ChangeRec::action).collect(),
            self.originals
                .iter()
                .map(|(device, knob, value)| Original {
                    device: device.clone(),
                    knob: *knob,
                    value: *value,
                })
                .collect(),
            self.backoff
                .iter()
                .map(|b| {
                    (
                        b.key.clone(),
                        Backoff {
                            failures: b.failures,
                            until: Duration::from_nanos(b.until_ns),
                            last_error: b.last_error.clone(),
                        },
                    )
                })
                .collect(),
        )
    }
}

impl DecisionRec {
    #[must_use]
    pub fn of(d: &Decision) -> Self {
        let change = d.action != Action::Hold;
        Self {
            ifindex: d.ifindex,
            device: d.device.clone(),
            device_id: d.device_id.clone(),
            mode: d.mode,
            action: d.action,
            reason: d.reason.as_str().to_owned(),
            id: d.id.to_string(),
            message: change.then(|| d.message.clone()),
            evidence: change.then(|| d.evidence.to_map()),
        }
    }
}

/// `LocalTime` as recorded.
#[must_use]
pub fn local_time_rec(t: Option<LocalTime>) -> Option<(u8, u16)> {
    t.map(|t| (t.weekday, t.minute_of_day))
}

/// A recorded local time back.
#[must_use]
pub fn local_time(t: Option<(u8, u16)>) -> Option<LocalTime> {
    t.map(|(weekday, minute_of_day)| LocalTime {
        weekday,
        minute_of_day,
    })
}

/// Nanoseconds of a duration, saturating (the recording's time unit: exact,
/// so a replay sees the very instants the writer's engine saw).
#[must_use]
pub fn nanos(d: Duration) -> u64 {
    ns(d)
}
