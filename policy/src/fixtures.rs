//! The fixture kit for tests and benches (feature `fixtures`; the crate's
//! own tests have it too): a complete [`policy`], the [`capabilities`] of a
//! kernel with every interface pptune reads, and synthesised devices of one
//! pool per RX queue ([`Nic`], their queues [`rx_queues`]) in a
//! [`snapshot`]. A test or bench states only what differs:
//! `Policy { mode: Mode::Observe, ..fixtures::policy() }`.

use std::time::Duration;

use crate::policy::{
    ChangeLimits, ChannelPolicy, DEFAULT_RECORDING_MAX_BYTES, DaemonSettings, Disruption,
    DisruptionClass, MemoryBudget, QueueSelection, RingPolicy, Rounding, Selector, Thresholds,
    Timing,
};
use crate::snapshot::{
    Availability, Capabilities, Channels, Device, DeviceId, Field, OperState, Pool, PoolStats,
    QueueStats, Rings, RxQueue, Snapshot,
};
use crate::{Coexist, Mode, OnStop, Policy};

/// A complete policy: enforce, rings only (channels off), on every device
/// with page pools; the shipped thresholds, step rule and hourly budget
/// with 10 s interval and window, no memory budget, no change windows.
/// (The shipped defaults themselves are `config/src/default.yaml`: this
/// crate cannot read them.)
#[must_use]
pub fn policy() -> Policy {
    Policy {
        mode: Mode::Enforce,
        selectors: vec![Selector {
            require_pools: true,
            ..Selector::default()
        }],
        timing: Timing {
            interval: Duration::from_secs(10),
            window: Duration::from_secs(10),
            windows_for_finding: 2,
            cooldown: Duration::from_secs(300),
            evaluation: Duration::from_secs(120),
            calm_before_shrink: Duration::from_secs(3600),
        },
        thresholds: Thresholds {
            grow_recycle_miss: 0.05,
            grow_slow_refill: 0.25,
            shrink_recycle_miss: 0.005,
            min_pages_per_window: 1000,
            severe_recycle_miss: 0.2,
            severe_samples: 2,
        },
        rings: RingPolicy {
            enabled: true,
            min: 64,
            max: 16384,
            rounding: Rounding::Auto,
            max_steps_to_target: 2,
            headroom: 1.25,
            shrink_when_calm: true,
            right_size: false,
            right_size_floor: 512,
        },
        channels: ChannelPolicy {
            enabled: false,
            min: 1,
            max: 256,
            grow_on_drops_when_healthy: true,
            shrink_when_contended: true,
            step: 2,
            grow_drop_share: 0.001,
            trial_gain: 0.05,
        },
        budget: MemoryBudget {
            per_device_bytes: None,
            per_host_bytes: None,
        },
        limits: ChangeLimits {
            max_changes_per_hour: 6,
            windows: vec![],
            one_bond_member_at_a_time: true,
        },
        disruption: Disruption {
            drivers: vec![],
            default_class: DisruptionClass::Restart,
            allowed_while_up: vec![
                DisruptionClass::Brief,
                DisruptionClass::Restart,
                DisruptionClass::LinkDown,
            ],
        },
        on_stop: OnStop::Keep,
        coexist: Coexist::Defer,
        rollout: None,
        daemon: DaemonSettings {
            metrics_listen: None,
            metrics_port_taken: crate::policy::PortTaken::Retry,
            metrics_web_config: None,
            queue_series: QueueSelection::All,
            recording_max_bytes: DEFAULT_RECORDING_MAX_BYTES,
        },
        shadow: None,
        priors: Vec::new(),
    }
}

/// What a kernel with every interface pptune reads reports to a process
/// with CAP_NET_ADMIN: each capability present, `uname -r` as given.
#[must_use]
pub fn capabilities(kernel_release: &str) -> Capabilities {
    Capabilities {
        kernel_release: kernel_release.into(),
        netdev_family: true,
        page_pool_get: true,
        page_pool_stats: true,
        queue_get: true,
        napi_get: true,
        qstats_get: true,
        ethtool_family: true,
        cap_net_admin: true,
    }
}

/// A snapshot of `devices` taken at `taken_at_ms` on a kernel with every
/// [`capabilities`], no orphan pools.
#[must_use]
pub fn snapshot(taken_at_ms: u64, kernel_release: &str, devices: Vec<Device>) -> Snapshot {
    Snapshot {
        taken_at_ms,
        capabilities: capabilities(kernel_release),
        devices,
        orphan_pools: vec![],
    }
}

/// One NIC of `driver` ([`Nic::pci`] 1) at RX ring `ring` of `rx_max`
/// with `queues` queues, its counters zero: a device for a unit test.
#[must_use]
pub fn nic(driver: &str, ring: u32, rx_max: u32, queues: u32) -> Device {
    let mut n = Nic::pci(1, driver, queues);
    n.rings.rx = Some(ring);
    n.rings.rx_max = Some(rx_max);
    n.device(|_| QueueCounters::default())
}

/// What one RX queue of a [`Nic`] reports: its qstats, and its pool's
/// counters and pages in flight.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueCounters {
    pub qstats: QueueStats,
    pub pool: PoolStats,
    pub inflight: u64,
}

/// A synthesised NIC: up, MTU 1500, `queues` combined channels (of
/// `channels_max`) with one page pool per RX queue. Queue `q` has NAPI id
/// `first_napi + q` and pool id `first_pool + q`; [`Nic::device`] fills in
/// the counters.
#[derive(Debug, Clone)]
pub struct Nic {
    pub ifindex: u32,
    pub name: String,
    pub id: DeviceId,
    pub driver: String,
    pub rings: Rings,
    pub queues: u32,
    pub channels_max: u32,
    pub first_napi: u32,
    pub first_pool: u64,
}

impl Nic {
    /// PCI NIC `d` of a host of `queues`-queue NICs: `eth{d}` at ifindex
    /// `d + 2`, bus address `0000:{d:02x}:00.0`, a permanent MAC, RX and TX
    /// rings 256 of 8192, up to 256 channels; NAPI ids from
    /// `d × 1000 + 8192`, pool ids from `d × queues + 1`.
    #[must_use]
    pub fn pci(d: u32, driver: &str, queues: u32) -> Self {
        Self {
            ifindex: d + 2,
            name: format!("eth{d}"),
            id: DeviceId {
                bus: Some("pci".into()),
                parent: Some(format!("0000:{d:02x}:00.0")),
                perm_addr: Some(format!("0c:42:a1:00:{:02x}:{:02x}", d / 256, d % 256)),
                name_fallback: None,
            },
            driver: driver.into(),
            rings: Rings {
                rx: Some(256),
                rx_max: Some(8192),
                tx: Some(256),
                tx_max: Some(8192),
                ..Rings::default()
            },
            queues,
            channels_max: 256,
            first_napi: d * 1000 + 8192,
            first_pool: u64::from(d * queues + 1),
        }
    }

    /// netdevsim port `eni{d}np1` (device `netdevsim{d}`) of a host of
    /// `queues`-queue ports, as [`Nic::pci`] otherwise but for its rings
    /// (RX and TX 512 of 4096) and channels (all `queues` in use).
    #[must_use]
    pub fn netdevsim(d: u32, queues: u32) -> Self {
        Self {
            name: format!("eni{d}np1"),
            id: DeviceId {
                bus: Some("netdevsim".into()),
                parent: Some(format!("netdevsim{d}")),
                perm_addr: None,
                name_fallback: None,
            },
            driver: "netdevsim".into(),
            rings: Rings {
                rx: Some(512),
                rx_max: Some(4096),
                tx: Some(512),
                tx_max: Some(4096),
                ..Rings::default()
            },
            channels_max: queues,
            ..Self::pci(d, "netdevsim", queues)
        }
    }

    /// The device, with queue `q`'s counters from `counters(q)` (pages of
    /// 4 KiB in flight).
    pub fn device(self, counters: impl FnMut(u32) -> QueueCounters) -> Device {
        let rx_queues = rx_queues(
            self.ifindex,
            self.queues,
            self.first_napi,
            self.first_pool,
            counters,
        );
        Device {
            ifindex: self.ifindex,
            name: self.name,
            id: self.id,
            driver: Some(self.driver),
            oper_state: OperState::Up,
            admin_up: true,
            mtu: Some(1500),
            rings: Availability::Available(self.rings),
            channels: Availability::Available(Channels {
                combined: Some(self.queues),
                combined_max: Some(self.channels_max),
                ..Channels::default()
            }),
            rx_queues,
            ..Device::default()
        }
    }
}

/// A block (`Rings`, `Channels`) with every field its own number, counting
/// from `first` in the order of `fields` (its `FIELDS`), so a number seen
/// is its field's (a `u8` field's only while it fits).
#[must_use]
pub fn every_field<B: Default>(fields: &[Field<B>], first: u32) -> B {
    let mut b = B::default();
    for (v, f) in (first..).zip(fields) {
        (f.set)(&mut b, v);
    }
    b
}

/// The `count` RX queues of the device at `ifindex`, one page pool each:
/// queue `q` has NAPI id `first_napi + q`, its pool id `first_pool + q`,
/// and the counters `counters(q)` (pages of 4 KiB in flight). What
/// [`Nic::device`] builds, and what a test's driver builds again when a
/// ring or channel change rebuilds the pools.
pub fn rx_queues(
    ifindex: u32,
    count: u32,
    first_napi: u32,
    first_pool: u64,
    mut counters: impl FnMut(u32) -> QueueCounters,
) -> Vec<RxQueue> {
    (0..count)
        .map(|q| {
            let c = counters(q);
            let napi = first_napi + q;
            RxQueue {
                id: q,
                napi_id: Some(napi),
                provider: None,
                qstats: Some(c.qstats),
                pools: vec![Pool {
                    id: first_pool + u64::from(q),
                    ifindex: Some(ifindex),
                    napi_id: Some(u64::from(napi)),
                    inflight: Some(c.inflight),
                    inflight_mem: Some(c.inflight * 4096),
                    stats: Some(c.pool),
                    ..Pool::default()
                }],
            }
        })
        .collect()
}
