//! A hand-written fake kernel for the daemon's loop logic (never for
//! kernel-facing behaviour, which is tested against a real kernel).
//!
//! One device with a page pool per RX queue and a simple, deterministic
//! workload: every sample, `returned` pages come back in bursts of
//! `burst` pages; a pool ring (= the rx ring, like ice/idpf) smaller than
//! the burst frees the surplus (`recycle_ring_full`) and the next refills go
//! to the slow path. A ring change rebuilds the pools (new ids, counters from
//! zero) and emits the `RINGS_NTF` the kernel would, as the real kernel does
//! for pptune's own changes too.

use std::sync::Mutex;

use policy::snapshot::{
    Availability, Capabilities, Channels, Device, DeviceId, LinkStats, OperState, Pool, PoolStats,
    QueueStats, Rings, RxQueue, Snapshot,
};
use policy::{ChannelField, RingField};
use pptune::sample::{Kernel, KernelEvent, SampleError, SampleScope, SetError};
use tokio::sync::mpsc;

/// The workload and the device's knobs.
#[derive(Debug, Clone)]
pub struct FakeState {
    pub ring: u32,
    pub ring_max: u32,
    pub combined: u32,
    pub combined_max: u32,
    /// Pages returned per sample per queue.
    pub returned: u64,
    /// Pages per return burst.
    pub burst: u64,
    /// Refuse every set with this (errno, extack message).
    pub refuse: Option<(i32, String)>,
    /// Every set pptune made: (knob name, value).
    pub sets: Vec<(String, u32)>,
    /// Pool counters per queue (cumulative for the current pools).
    pub pools: Vec<PoolStats>,
    pub pool_ids: Vec<u64>,
    pub next_pool_id: u64,
    pub link: LinkStats,
    pub samples: u64,
    pub cap_net_admin: bool,
    /// The device is deleted in the middle of the next set (ENODEV) and
    /// is gone from every sample after it.
    pub vanish_on_set: bool,
    pub gone: bool,
    /// While set, every sample blocks (a wedged netlink socket); it
    /// completes once cleared.
    pub hang_sampling: bool,
    /// Held pages (ppsim's `queues-held`): instead of bursts, every page
    /// comes back still referenced (released_refcnt) and is refilled from
    /// the slow path whatever the ring; the device delivers
    /// `held(combined)` pages per sample in all, split over its queues.
    pub held: Option<fn(u32) -> u64>,
    /// Pages each pool reports in flight (`None`: twice the ring).
    pub inflight: Option<u64>,
    /// A file read at every set, before the knob moves: what a daemon
    /// killed at that instant leaves there (the state record).
    pub watched: Option<std::path::PathBuf>,
    /// Its contents at each set, in order (`None`: unreadable or absent).
    pub watched_at_set: Vec<Option<String>>,
}

/// The fake kernel.
#[derive(Debug)]
pub struct FakeKernel {
    pub state: Mutex<FakeState>,
    tx: mpsc::UnboundedSender<KernelEvent>,
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<KernelEvent>>,
}

pub const IFINDEX: u32 = 2;
pub const NAME: &str = "eth0";

/// The fake device's identity.
#[must_use]
pub fn device_id() -> DeviceId {
    DeviceId {
        bus: Some("pci".into()),
        parent: Some("0000:3b:00.0".into()),
        perm_addr: Some("0c:42:a1:00:00:01".into()),
        name_fallback: None,
    }
}

impl FakeKernel {
    /// A bursty device: 4 queues, ring 256 (max 8192), bursts of 2048 pages.
    #[must_use]
    pub fn bursty() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let queues = 4;
        Self {
            state: Mutex::new(FakeState {
                ring: 256,
                ring_max: 8192,
                combined: queues,
                combined_max: 16,
                returned: 200_000,
                burst: 2048,
                refuse: None,
                sets: Vec::new(),
                pools: vec![PoolStats::default(); queues as usize],
                pool_ids: (1..=u64::from(queues)).collect(),
                next_pool_id: u64::from(queues) + 1,
                link: LinkStats::default(),
                samples: 0,
                cap_net_admin: true,
                vanish_on_set: false,
                gone: false,
                hang_sampling: false,
                held: None,
                inflight: None,
                watched: None,
                watched_at_set: Vec::new(),
            }),
            tx,
            rx: tokio::sync::Mutex::new(rx),
        }
    }

    /// A device with `queues` queues whose pages are all held (see
    /// [`FakeState::held`]): it delivers `rate(queues)` pages per sample.
    #[must_use]
    pub fn held(queues: u32, rate: fn(u32) -> u64) -> Self {
        let k = Self::bursty();
        if let Ok(mut s) = k.state.lock() {
            s.combined = queues;
            s.held = Some(rate);
            rebuild(&mut s);
        }
        k
    }

    /// The current combined channel count.
    #[must_use]
    pub fn channels(&self) -> u32 {
        self.state.lock().map(|s| s.combined).unwrap_or(0)
    }

    /// The current rx ring.
    #[must_use]
    pub fn ring(&self) -> u32 {
        self.state.lock().map(|s| s.ring).unwrap_or(0)
    }

    /// Every set pptune made so far.
    #[must_use]
    pub fn sets(&self) -> Vec<(String, u32)> {
        self.state
            .lock()
            .map(|s| s.sets.clone())
            .unwrap_or_default()
    }

    /// An operator's `ethtool -G eth0 rx N`: changes the ring and emits the
    /// notification, exactly as a change by pptune would.
    pub fn operator_set_ring(&self, rx: u32) {
        let rings = {
            let Ok(mut s) = self.state.lock() else { return };
            s.ring = rx;
            rebuild(&mut s);
            rings(&s)
        };
        let _ = self.tx.send(KernelEvent::RingsChanged {
            ifindex: IFINDEX,
            rings,
        });
    }

    /// Emits an arbitrary event (e.g. an overflow).
    pub fn emit(&self, ev: KernelEvent) {
        let _ = self.tx.send(ev);
    }

    fn advance(s: &mut FakeState) {
        s.samples += 1;
        if let Some(rate) = s.held {
            let total = rate(s.combined);
            let per_q = total / s.pools.len().max(1) as u64;
            for p in &mut s.pools {
                p.alloc_fast += per_q;
                p.alloc_slow += per_q.div_ceil(64);
                p.recycle_released_refcnt += per_q;
            }
            s.link.rx_packets += per_q * s.pools.len() as u64;
            s.link.rx_bytes += per_q * 1500 * s.pools.len() as u64;
            return;
        }
        let ring = u64::from(s.ring);
        let returned = s.returned;
        let miss = returned * s.burst.saturating_sub(ring) / s.burst.max(1);
        for p in &mut s.pools {
            p.alloc_fast += returned;
            p.recycle_cached += returned / 2;
            p.recycle_ring += returned / 2 - miss.min(returned / 2);
            p.recycle_ring_full += miss.min(returned / 2);
            p.alloc_refill += returned / 64;
            p.alloc_slow += miss / 64;
        }
        s.link.rx_packets += returned * s.pools.len() as u64;
        s.link.rx_bytes += returned * 1500 * s.pools.len() as u64;
    }

    fn device(s: &FakeState) -> Device {
        let inflight = s.inflight.unwrap_or(u64::from(s.ring) * 2);
        let rx_queues = s
            .pools
            .iter()
            .zip(&s.pool_ids)
            .enumerate()
            .map(|(i, (st, id))| {
                let q = u32::try_from(i).unwrap_or(0);
                RxQueue {
                    id: q,
                    napi_id: Some(100 + q),
                    provider: None,
                    qstats: Some(QueueStats {
                        rx_packets: Some(s.link.rx_packets / s.pools.len() as u64),
                        rx_bytes: None,
                        rx_alloc_fail: Some(0),
                        rx_hw_drops: Some(0),
                        rx_hw_drop_overruns: None,
                    }),
                    pools: vec![Pool {
                        id: *id,
                        ifindex: Some(IFINDEX),
                        napi_id: Some(u64::from(100 + q)),
                        inflight: Some(inflight),
                        inflight_mem: Some(inflight * 4096),
                        detach_time: None,
                        provider: None,
                        stats: Some(*st),
                    }],
                }
            })
            .collect();
        Device {
            ifindex: IFINDEX,
            name: NAME.into(),
            id: device_id(),
            driver: Some("ice".into()),
            kind: None,
            oper_state: OperState::Up,
            admin_up: true,
            master: None,
            mtu: Some(1500),
            // An E810 at 25G, as `ethtool` and `ethtool -i` would say.
            speed_mbps: Some(25_000),
            model: Some(FAKE_MODEL.into()),
            firmware: Some(FAKE_FIRMWARE.into()),
            // Its PCI function in no IOMMU group: misses at the reference
            // price (policy::price).
            iommu: policy::snapshot::Iommu::NoGroup,
            num_rx_queues: Some(s.combined_max),
            rings: Availability::Available(rings(s)),
            channels: Availability::Available(Channels {
                combined: Some(s.combined),
                combined_max: Some(s.combined_max),
                ..Channels::default()
            }),
            link_stats: Some(s.link),
            qstats: None,
            rx_queues,
            unmapped_pools: Vec::new(),
        }
    }
}

/// The fake NIC's model (PCI `vendor:device`, an Intel E810-XXV) and
/// firmware version.
pub const FAKE_MODEL: &str = "8086:159b";
pub const FAKE_FIRMWARE: &str = "4.40 0x8001c967 1.3534.0";

fn rings(s: &FakeState) -> Rings {
    Rings {
        rx: Some(s.ring),
        rx_max: Some(s.ring_max),
        tx: Some(1024),
        tx_max: Some(8192),
        ..Rings::default()
    }
}

/// A ring or channel change rebuilds every pool: new ids, zero counters.
pub fn rebuild(s: &mut FakeState) {
    let n = s.combined as usize;
    s.pools = vec![PoolStats::default(); n];
    s.pool_ids = (0..n as u64).map(|i| s.next_pool_id + i).collect();
    s.next_pool_id += n as u64;
}

/// A set begins: the state locked, the set noted as `what` = `value`,
/// the watched file read.
fn set_begins<'a>(
    state: &'a Mutex<FakeState>,
    what: String,
    value: u32,
) -> Result<std::sync::MutexGuard<'a, FakeState>, SetError> {
    let mut s = state
        .lock()
        .map_err(|_| SetError::Other("poisoned".into()))?;
    s.sets.push((what, value));
    if let Some(path) = &s.watched {
        let text = std::fs::read_to_string(path).ok();
        s.watched_at_set.push(text);
    }
    Ok(s)
}

/// The refusal a test scripted (`refuse`), naming `attr`.
fn scripted_refusal(s: &FakeState, attr: Option<&str>) -> Result<(), SetError> {
    match s.refuse.clone() {
        Some((errno, message)) => Err(SetError::Refused {
            errno,
            message,
            attr: attr.map(Into::into),
        }),
        None => Ok(()),
    }
}

fn poisoned() -> SampleError {
    SampleError {
        context: "fake kernel state poisoned".into(),
        source: None,
    }
}

impl Kernel for FakeKernel {
    async fn sample(&self, _scope: &SampleScope) -> Result<Snapshot, SampleError> {
        while self.state.lock().map_err(|_| poisoned())?.hang_sampling {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let mut s = self.state.lock().map_err(|_| poisoned())?;
        Self::advance(&mut s);
        Ok(Snapshot {
            taken_at_ms: s.samples * 1000,
            capabilities: Capabilities {
                cap_net_admin: s.cap_net_admin,
                ..policy::fixtures::capabilities("fake")
            },
            devices: if s.gone {
                Vec::new()
            } else {
                vec![Self::device(&s)]
            },
            orphan_pools: Vec::new(),
        })
    }

    async fn sample_device(&self, ifindex: u32) -> Result<Option<Device>, SampleError> {
        let s = self.state.lock().map_err(|_| poisoned())?;
        Ok((ifindex == IFINDEX && !s.gone).then(|| Self::device(&s)))
    }

    async fn set_ring(
        &self,
        ifindex: u32,
        field: RingField,
        value: u32,
    ) -> Result<Rings, SetError> {
        let rings = {
            let mut s = set_begins(&self.state, format!("ring.{field:?}"), value)?;
            if s.vanish_on_set {
                s.gone = true;
            }
            if ifindex != IFINDEX || s.gone {
                return Err(SetError::DeviceGone(ifindex));
            }
            scripted_refusal(&s, Some("ETHTOOL_A_RINGS_RX"))?;
            if value > s.ring_max {
                return Err(SetError::Refused {
                    errno: 22,
                    message: "requested ring size exceeds maximum".into(),
                    attr: Some("ETHTOOL_A_RINGS_RX".into()),
                });
            }
            // ice aligns to 32.
            s.ring = value.div_ceil(32) * 32;
            rebuild(&mut s);
            rings(&s)
        };
        let _ = self.tx.send(KernelEvent::RingsChanged { ifindex, rings });
        let _ = self.tx.send(KernelEvent::PoolsChanged {
            ifindex: Some(ifindex),
        });
        Ok(rings)
    }

    async fn set_channels(
        &self,
        ifindex: u32,
        field: ChannelField,
        value: u32,
    ) -> Result<Channels, SetError> {
        let ch = {
            let mut s = set_begins(&self.state, format!("channels.{field:?}"), value)?;
            scripted_refusal(&s, None)?;
            s.combined = value;
            rebuild(&mut s);
            Channels {
                combined: Some(s.combined),
                combined_max: Some(s.combined_max),
                ..Channels::default()
            }
        };
        let _ = self.tx.send(KernelEvent::ChannelsChanged {
            ifindex,
            channels: ch,
        });
        Ok(ch)
    }

    async fn next_event(&self) -> Option<KernelEvent> {
        self.rx.lock().await.recv().await
    }
}

/// A policy for loop tests: the fixture policy in seconds instead of
/// minutes, every driver class allowed while up, rings enabled (at most
/// 8192, never shrunk), channels off (1..=16 in steps of 1 where a test
/// turns them on), 10 changes an hour.
#[must_use]
pub fn test_policy(mode: policy::Mode) -> policy::Policy {
    use policy::policy::{ChangeLimits, ChannelPolicy, RingPolicy, Timing};
    use std::time::Duration;
    let base = policy::fixtures::policy();
    policy::Policy {
        mode,
        timing: Timing {
            interval: Duration::from_secs(1),
            window: Duration::from_secs(1),
            cooldown: Duration::from_secs(10),
            evaluation: Duration::from_secs(3),
            ..base.timing
        },
        rings: RingPolicy {
            max: 8192,
            shrink_when_calm: false,
            ..base.rings
        },
        channels: ChannelPolicy {
            max: 16,
            grow_on_drops_when_healthy: false,
            shrink_when_contended: false,
            step: 1,
            grow_drop_share: 0.01,
            ..base.channels
        },
        limits: ChangeLimits {
            max_changes_per_hour: 10,
            ..base.limits
        },
        ..base
    }
}
