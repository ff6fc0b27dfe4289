//! The recording's on-disk records (docs/recording.md): pptune's own,
//! versioned structs, converted to and from the engine's types here and
//! nowhere else, so a change of `policy::snapshot` changes this file (at
//! compile time), never silently the format.
//!
//! Pool counters are delta-coded against the same pool id in the previous
//! pass of the same segment, and a device's slowly changing facts
//! (identity, rings, channels, link state) are written only when they
//! change: [`Coder`] holds that memory, identically on both sides.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use policy::counters::{COUNT, NAMES};
use policy::engine::{ActionRecord, LocalTime, Original};
use policy::gates::Backoff;
use policy::plan::{Action, Decision, Knob};
use policy::snapshot::{
    Availability, Capabilities, Channels, Device, DeviceId, LinkStats, MemoryProvider, OperState,
    Pool, PoolStats, QueueStats, Rings, RxQueue, Snapshot,
};
use serde::{Deserialize, Serialize};

/// The format version in every segment header and `Start` record. Bumped on
/// any incompatible change; a reader refuses other versions by name.
pub const FORMAT_VERSION: u32 = 1;

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

/// A snapshot, delta-coded against the previous one in the segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapRec {
    pub taken_at_ms: u64,
    /// `None`: as in the previous pass.
    pub caps: Option<CapsRec>,
    pub devices: Vec<DevRec>,
    pub orphans: Vec<PoolRec>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapsRec {
    pub kernel_release: String,
    /// netdev, page_pool_get, page_pool_stats, queue_get, napi_get,
    /// qstats_get, ethtool, cap_net_admin.
    pub flags: [bool; 8],
}

/// A device in one pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevRec {
    pub ifindex: u32,
    /// `None`: as in the previous pass for this ifindex.
    pub meta: Option<Box<DevMeta>>,
    /// rx packets, bytes, dropped, missed errors, fifo errors.
    pub link_stats: Option<[u64; 5]>,
    pub qstats: Option<QStatsRec>,
    pub queues: Vec<QueueRec>,
    pub unmapped: Vec<PoolRec>,
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
}

/// rx, rx_max, rx_mini, rx_mini_max, rx_jumbo, rx_jumbo_max, tx, tx_max,
/// rx_buf_len, hds_thresh, hds_thresh_max; tcp_data_split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingsRec(pub [Option<u32>; 11], pub Option<u8>);

/// rx, rx_max, tx, tx_max, other, other_max, combined, combined_max.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelsRec(pub [Option<u32>; 8]);

/// rx packets, bytes, alloc fail, hw drops, hw drop overruns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QStatsRec(pub [Option<u64>; 5]);

/// id, napi id, provider, qstats, pools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRec(
    pub u32,
    pub Option<u32>,
    pub Option<ProviderRec>,
    pub Option<QStatsRec>,
    pub Vec<PoolRec>,
);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderRec {
    Dmabuf(u32),
    IoUring(Option<u64>),
}

/// id, ifindex, napi id, inflight, inflight_mem, detach time, provider,
/// counters (in `Start::counters` order; wrapping difference from the same
/// pool id in the previous pass of the segment, absolute for a pool the
/// segment has not seen).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRec(
    pub u64,
    pub Option<u32>,
    pub Option<u64>,
    pub Option<u64>,
    pub Option<u64>,
    pub Option<u64>,
    pub Option<ProviderRec>,
    pub Option<Vec<u64>>,
);

/// Why a record cannot be turned back into the engine's types.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("device ifindex {0} has no description earlier in the segment")]
    NoMeta(u32),
    #[error("the segment's first pass does not say the kernel's capabilities")]
    NoCaps,
}

/// The delta-coding memory of one segment. The writer and the reader each
/// keep one and update it the same way, pass by pass.
#[derive(Debug, Default)]
pub struct Coder {
    caps: Option<CapsRec>,
    meta: HashMap<u32, DevMeta>,
    pools: HashMap<u64, Vec<u64>>,
    next_pools: HashMap<u64, Vec<u64>>,
    /// Queue (ifindex, queue id) and device (ifindex, `u32::MAX`) qstats and
    /// link stats (ifindex, `u32::MAX - 1`), as last seen: delta-coded too.
    gauges: HashMap<(u32, u32), [Option<u64>; 5]>,
    next_gauges: HashMap<(u32, u32), [Option<u64>; 5]>,
    /// Reader side: the recorded counter index of each of this build's
    /// counters (`None`: the recording does not have it).
    map: Vec<Option<usize>>,
}

impl Coder {
    /// A reader for a segment whose `Start` listed `counters`.
    #[must_use]
    pub fn for_counters(counters: &[String]) -> Self {
        Self {
            map: NAMES
                .iter()
                .map(|n| counters.iter().position(|c| c == n))
                .collect(),
            ..Self::default()
        }
    }

    /// Whether a `Start` set this reader up.
    #[must_use]
    pub fn started(&self) -> bool {
        !self.map.is_empty()
    }

    /// This build's counter names, for a `Start`.
    #[must_use]
    pub fn counter_names() -> Vec<String> {
        NAMES.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Encodes `s`, updating the memory.
    pub fn encode(&mut self, s: &Snapshot) -> SnapRec {
        let caps = caps_rec(&s.capabilities);
        let caps = (self.caps.as_ref() != Some(&caps)).then(|| {
            self.caps = Some(caps.clone());
            caps
        });
        let devices = s
            .devices
            .iter()
            .map(|d| {
                let meta = dev_meta(d);
                let meta = (self.meta.get(&d.ifindex) != Some(&meta)).then(|| {
                    self.meta.insert(d.ifindex, meta.clone());
                    Box::new(meta)
                });
                DevRec {
                    ifindex: d.ifindex,
                    meta,
                    link_stats: d.link_stats.map(|l| {
                        let v = [
                            l.rx_packets,
                            l.rx_bytes,
                            l.rx_dropped,
                            l.rx_missed_errors,
                            l.rx_fifo_errors,
                        ]
                        .map(Some);
                        self.counters_out((d.ifindex, LINK), v)
                            .map(|x| x.unwrap_or(0))
                    }),
                    qstats: d.qstats.as_ref().map(|q| {
                        QStatsRec(self.counters_out((d.ifindex, DEVICE), qstats_rec(q).0))
                    }),
                    queues: d
                        .rx_queues
                        .iter()
                        .map(|q| {
                            QueueRec(
                                q.id,
                                q.napi_id,
                                q.provider.map(provider_rec),
                                q.qstats.as_ref().map(|x| {
                                    QStatsRec(self.counters_out((d.ifindex, q.id), qstats_rec(x).0))
                                }),
                                q.pools.iter().map(|p| self.pool_out(p)).collect(),
                            )
                        })
                        .collect(),
                    unmapped: d.unmapped_pools.iter().map(|p| self.pool_out(p)).collect(),
                }
            })
            .collect();
        let orphans = s.orphan_pools.iter().map(|p| self.pool_out(p)).collect();
        self.end_pass();
        SnapRec {
            taken_at_ms: s.taken_at_ms,
            caps,
            devices,
            orphans,
        }
    }

    /// Decodes `r`, updating the memory.
    ///
    /// # Errors
    /// A device or the capabilities refer to a description the segment
    /// never gave (a corrupt or truncated-at-the-front segment).
    pub fn decode(&mut self, r: &SnapRec) -> Result<Snapshot, DecodeError> {
        if let Some(c) = &r.caps {
            self.caps = Some(c.clone());
        }
        let caps = self.caps.as_ref().ok_or(DecodeError::NoCaps)?;
        let capabilities = Capabilities {
            kernel_release: caps.kernel_release.clone(),
            netdev_family: caps.flags[0],
            page_pool_get: caps.flags[1],
            page_pool_stats: caps.flags[2],
            queue_get: caps.flags[3],
            napi_get: caps.flags[4],
            qstats_get: caps.flags[5],
            ethtool_family: caps.flags[6],
            cap_net_admin: caps.flags[7],
        };
        let mut devices = Vec::with_capacity(r.devices.len());
        for d in &r.devices {
            if let Some(m) = &d.meta {
                self.meta.insert(d.ifindex, (**m).clone());
            }
            let m = self
                .meta
                .get(&d.ifindex)
                .ok_or(DecodeError::NoMeta(d.ifindex))?
                .clone();
            let rx_queues: Vec<RxQueue> = d
                .queues
                .iter()
                .map(|q| RxQueue {
                    id: q.0,
                    napi_id: q.1,
                    provider: q.2.map(provider),
                    qstats: q
                        .3
                        .map(|x| qstats(QStatsRec(self.counters_in((d.ifindex, q.0), x.0)))),
                    pools: q.4.iter().map(|p| self.pool_in(p)).collect(),
                })
                .collect();
            let unmapped_pools = d.unmapped.iter().map(|p| self.pool_in(p)).collect();
            devices.push(Device {
                ifindex: d.ifindex,
                name: m.name,
                id: m.id,
                driver: m.driver,
                kind: m.kind,
                oper_state: m.oper_state,
                admin_up: m.admin_up,
                master: m.master,
                mtu: m.mtu,
                num_rx_queues: m.num_rx_queues,
                rings: match m.rings {
                    Ok(r) => Availability::Available(rings(r)),
                    Err(Some(why)) => Availability::Unavailable(why),
                    Err(None) => Availability::NotSampled,
                },
                channels: match m.channels {
                    Ok(c) => Availability::Available(channels(c)),
                    Err(Some(why)) => Availability::Unavailable(why),
                    Err(None) => Availability::NotSampled,
                },
                link_stats: d.link_stats.map(|l| {
                    let l = self
                        .counters_in((d.ifindex, LINK), l.map(Some))
                        .map(|x| x.unwrap_or(0));
                    LinkStats {
                        rx_packets: l[0],
                        rx_bytes: l[1],
                        rx_dropped: l[2],
                        rx_missed_errors: l[3],
                        rx_fifo_errors: l[4],
                    }
                }),
                qstats: d
                    .qstats
                    .map(|x| qstats(QStatsRec(self.counters_in((d.ifindex, DEVICE), x.0)))),
                rx_queues,
                unmapped_pools,
            });
        }
        let orphan_pools = r.orphans.iter().map(|p| self.pool_in(p)).collect();
        self.end_pass();
        Ok(Snapshot {
            taken_at_ms: r.taken_at_ms,
            capabilities,
            devices,
            orphan_pools,
        })
    }

    fn end_pass(&mut self) {
        self.pools = std::mem::take(&mut self.next_pools);
        self.gauges = std::mem::take(&mut self.next_gauges);
    }

    /// Cumulative counters out: the wrapping difference from the same key
    /// in the previous pass (where both have a value), else as they are.
    fn counters_out(&mut self, key: (u32, u32), v: [Option<u64>; 5]) -> [Option<u64>; 5] {
        let prev = self.gauges.get(&key).copied();
        self.next_gauges.insert(key, v);
        match prev {
            Some(p) => delta5(v, p, u64::wrapping_sub),
            None => v,
        }
    }

    /// The inverse of [`Coder::counters_out`].
    fn counters_in(&mut self, key: (u32, u32), d: [Option<u64>; 5]) -> [Option<u64>; 5] {
        let v = match self.gauges.get(&key) {
            Some(p) => delta5(d, *p, u64::wrapping_add),
            None => d,
        };
        self.next_gauges.insert(key, v);
        v
    }

    fn pool_out(&mut self, p: &Pool) -> PoolRec {
        let stats = p.stats.map(|s| {
            let v = s.values().to_vec();
            let out = match self.pools.get(&p.id) {
                Some(prev) => v
                    .iter()
                    .zip(prev)
                    .map(|(c, b)| c.wrapping_sub(*b))
                    .collect(),
                None => v.clone(),
            };
            self.next_pools.insert(p.id, v);
            out
        });
        PoolRec(
            p.id,
            p.ifindex,
            p.napi_id,
            p.inflight,
            p.inflight_mem,
            p.detach_time,
            p.provider.map(provider_rec),
            stats,
        )
    }

    fn pool_in(&mut self, r: &PoolRec) -> Pool {
        let stats = r.7.as_ref().map(|d| {
            let v: Vec<u64> = match self.pools.get(&r.0) {
                Some(prev) if prev.len() == d.len() => d
                    .iter()
                    .zip(prev)
                    .map(|(x, b)| b.wrapping_add(*x))
                    .collect(),
                _ => d.clone(),
            };
            let mut mine = [0_u64; COUNT];
            for (slot, at) in mine.iter_mut().zip(&self.map) {
                if let Some(i) = at {
                    *slot = v.get(*i).copied().unwrap_or(0);
                }
            }
            self.next_pools.insert(r.0, v);
            PoolStats::from_values(mine)
        });
        Pool {
            id: r.0,
            ifindex: r.1,
            napi_id: r.2,
            inflight: r.3,
            inflight_mem: r.4,
            detach_time: r.5,
            provider: r.6.map(provider),
            stats,
        }
    }
}

/// Gauge-map keys of a device's own qstats and its link stats.
const DEVICE: u32 = u32::MAX;
const LINK: u32 = u32::MAX - 1;

fn delta5(v: [Option<u64>; 5], p: [Option<u64>; 5], f: fn(u64, u64) -> u64) -> [Option<u64>; 5] {
    let mut out = v;
    for (o, b) in out.iter_mut().zip(p) {
        if let (Some(x), Some(b)) = (*o, b) {
            *o = Some(f(x, b));
        }
    }
    out
}

fn caps_rec(c: &Capabilities) -> CapsRec {
    CapsRec {
        kernel_release: c.kernel_release.clone(),
        flags: [
            c.netdev_family,
            c.page_pool_get,
            c.page_pool_stats,
            c.queue_get,
            c.napi_get,
            c.qstats_get,
            c.ethtool_family,
            c.cap_net_admin,
        ],
    }
}

fn dev_meta(d: &Device) -> DevMeta {
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
        rings: match &d.rings {
            Availability::Available(r) => Ok(RingsRec(
                [
                    r.rx,
                    r.rx_max,
                    r.rx_mini,
                    r.rx_mini_max,
                    r.rx_jumbo,
                    r.rx_jumbo_max,
                    r.tx,
                    r.tx_max,
                    r.rx_buf_len,
                    r.hds_thresh,
                    r.hds_thresh_max,
                ],
                r.tcp_data_split,
            )),
            Availability::Unavailable(why) => Err(Some(why.clone())),
            Availability::NotSampled => Err(None),
        },
        channels: match &d.channels {
            Availability::Available(c) => Ok(ChannelsRec([
                c.rx,
                c.rx_max,
                c.tx,
                c.tx_max,
                c.other,
                c.other_max,
                c.combined,
                c.combined_max,
            ])),
            Availability::Unavailable(why) => Err(Some(why.clone())),
            Availability::NotSampled => Err(None),
        },
    }
}

fn rings(r: RingsRec) -> Rings {
    let [
        rx,
        rx_max,
        rx_mini,
        rx_mini_max,
        rx_jumbo,
        rx_jumbo_max,
        tx,
        tx_max,
        rx_buf_len,
        hds_thresh,
        hds_thresh_max,
    ] = r.0;
    Rings {
        rx,
        rx_max,
        rx_mini,
        rx_mini_max,
        rx_jumbo,
        rx_jumbo_max,
        tx,
        tx_max,
        rx_buf_len,
        tcp_data_split: r.1,
        hds_thresh,
        hds_thresh_max,
    }
}

fn channels(c: ChannelsRec) -> Channels {
    let [
        rx,
        rx_max,
        tx,
        tx_max,
        other,
        other_max,
        combined,
        combined_max,
    ] = c.0;
    Channels {
        rx,
        rx_max,
        tx,
        tx_max,
        other,
        other_max,
        combined,
        combined_max,
    }
}

fn qstats_rec(q: &QueueStats) -> QStatsRec {
    QStatsRec([
        q.rx_packets,
        q.rx_bytes,
        q.rx_alloc_fail,
        q.rx_hw_drops,
        q.rx_hw_drop_overruns,
    ])
}

fn qstats(q: QStatsRec) -> QueueStats {
    let [
        rx_packets,
        rx_bytes,
        rx_alloc_fail,
        rx_hw_drops,
        rx_hw_drop_overruns,
    ] = q.0;
    QueueStats {
        rx_packets,
        rx_bytes,
        rx_alloc_fail,
        rx_hw_drops,
        rx_hw_drop_overruns,
    }
}

fn provider_rec(p: MemoryProvider) -> ProviderRec {
    match p {
        MemoryProvider::Dmabuf { id } => ProviderRec::Dmabuf(id),
        MemoryProvider::IoUring { rx_buf_len } => ProviderRec::IoUring(rx_buf_len),
    }
}

fn provider(p: ProviderRec) -> MemoryProvider {
    match p {
        ProviderRec::Dmabuf(id) => MemoryProvider::Dmabuf { id },
        ProviderRec::IoUring(rx_buf_len) => MemoryProvider::IoUring { rx_buf_len },
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
            evidence: change.then(|| d.evidence.clone()),
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
