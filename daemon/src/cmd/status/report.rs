//! `pptune status`'s report: everything it shows, built from one
//! snapshot ([`Report::build`]); serialized, it is the `--json` output,
//! and `render.rs` writes it for a person.

use policy::signals;
use policy::snapshot::{
    Availability, Capabilities, Channels, Device, LinkStats, MemoryProvider, OperState, Pool,
    PoolStats, QueueStats, Rings, Snapshot,
};
use serde::Serialize;

use crate::publish::notes::{capability_words, no_pools_note};

/// Version of the `--json` layout. Bump on any rename or removal.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything `status` shows; serialized as the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub kernel_release: String,
    pub capabilities: CapabilitiesView,
    /// CLOCK_BOOTTIME seconds at sampling (for `detach_time`).
    pub boottime_secs: Option<u64>,
    pub interfaces: Vec<InterfaceView>,
    /// Pools destroyed with pages still out: orphaned (device gone) and
    /// detached pools still listed under a device.
    pub detached_pools: Vec<DetachedPoolView>,
    /// `--interface` names that do not exist.
    pub missing_interfaces: Vec<String>,
    /// The running daemon's view (managed devices, originals, decisions,
    /// overrides, backoffs); `null` when no daemon answered.
    pub daemon: Option<crate::publish::control::DaemonView>,
    /// What right-sizing could reclaim on the selected devices
    /// ([`crate::cmd::reclaim`]); `null` when it was not computed…
    pub reclaimable: Option<crate::cmd::reclaim::Reclaimable>,
    /// …and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimable_not_computed: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CapabilitiesView {
    pub netdev_family: bool,
    pub page_pool_get: bool,
    pub page_pool_stats: bool,
    pub queue_get: bool,
    pub napi_get: bool,
    pub qstats_get: bool,
    pub ethtool_family: bool,
    pub cap_net_admin: bool,
    /// The same, in words.
    pub summary: Vec<String>,
}

/// A value or the reason it is missing.
#[derive(Debug, Clone, Serialize)]
pub struct Avail<T> {
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl<T: Clone> Avail<T> {
    fn from(a: &Availability<T>) -> Self {
        match a {
            Availability::Available(v) => Self {
                available: true,
                value: Some(v.clone()),
                reason: None,
            },
            Availability::Unavailable(r) => Self {
                available: false,
                value: None,
                reason: Some(r.clone()),
            },
            Availability::NotSampled => Self {
                available: false,
                value: None,
                reason: Some("not sampled".to_owned()),
            },
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct InterfaceView {
    pub ifindex: u32,
    pub name: String,
    pub driver: Option<String>,
    pub kind: Option<String>,
    pub oper_state: OperState,
    pub admin_up: bool,
    pub mtu: Option<u32>,
    /// Stable identity (bus/parent/permanent MAC).
    pub device_key: String,
    pub num_rx_queues_allocated: Option<u32>,
    pub rings: Avail<Rings>,
    pub channels: Avail<Channels>,
    /// What a recycle miss costs on it, by what the host says.
    pub miss_cost: MissCostView,
    pub link_stats: Option<LinkStats>,
    pub qstats: Option<QueueStats>,
    pub rx_queues: Vec<QueueView>,
    pub unmapped_pools: Vec<PoolView>,
    /// Why a section is empty, in words.
    pub notes: Vec<String>,
    /// Knobs another configuration sets (systemd `.link`, NetworkManager,
    /// TuneD): `coexist` in the policy says whether pptune defers.
    pub owners: Vec<OwnerView>,
}

/// What a recycle miss costs on a device (`policy::price`).
#[derive(Debug, Clone, Serialize)]
pub struct MissCostView {
    /// `policy::price::MissCost`'s name (`iommu-strict`, `unknown` …).
    pub class: &'static str,
    /// In page-allocator misses: the policy's shares are divided by it.
    pub factor: f64,
    /// The parent device's IOMMU domain, as sysfs says it.
    pub iommu: policy::snapshot::Iommu,
    pub what: &'static str,
}

impl MissCostView {
    #[must_use]
    pub fn of(d: &policy::snapshot::Device) -> Self {
        let c = policy::price::MissCost::of(d);
        Self {
            class: c.name(),
            factor: c.factor(),
            iommu: d.iommu,
            what: c.describe(),
        }
    }

    /// `iommu-strict ×1.84 — a page from the allocator, …`.
    #[must_use]
    pub fn words(&self) -> String {
        format!("{} ×{:.2} — {}", self.class, self.factor, self.what)
    }
}

/// One knob and the other configuration that sets it.
#[derive(Debug, Clone, Serialize)]
pub struct OwnerView {
    pub knob: String,
    #[serde(flatten)]
    pub owner: crate::act::coexist::Owner,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueView {
    pub id: u32,
    pub napi_id: Option<u32>,
    pub provider: Option<MemoryProvider>,
    pub qstats: Option<QueueStats>,
    pub pools: Vec<PoolView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PoolView {
    pub id: u64,
    pub napi_id: Option<u64>,
    pub inflight_pages: Option<u64>,
    pub inflight_bytes: Option<u64>,
    pub provider: Option<MemoryProvider>,
    pub detach_time: Option<u64>,
    /// Seconds since detach (CLOCK_BOOTTIME now − detach_time).
    pub detached_for_secs: Option<u64>,
    /// `null` when the kernel has no page-pool stats.
    pub counters: Option<PoolStats>,
    pub derived: Option<Derived>,
}

/// The figures defined in `policy::signals`, over the pool's lifetime.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Derived {
    pub recycling_pct: Option<f64>,
    pub recycle_miss_share: Option<f64>,
    pub slow_refill_share: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DetachedPoolView {
    /// The device it still hangs off; `None` once orphaned.
    pub ifindex: Option<u32>,
    pub orphaned: bool,
    pub pool: PoolView,
}

fn pool_view(p: &Pool, boottime: Option<u64>) -> PoolView {
    PoolView {
        id: p.id,
        napi_id: p.napi_id,
        inflight_pages: p.inflight,
        inflight_bytes: p.inflight_mem,
        provider: p.provider,
        detach_time: p.detach_time,
        detached_for_secs: match (p.detach_time, boottime) {
            (Some(t), Some(now)) => Some(now.saturating_sub(t)),
            _ => None,
        },
        counters: p.stats,
        derived: p.stats.map(|s| Derived {
            recycling_pct: signals::recycling_pct(&s),
            recycle_miss_share: signals::recycle_miss_share(&s),
            slow_refill_share: signals::slow_refill_share(&s, p.provider.is_some()),
        }),
    }
}

fn device_notes(d: &Device, c: &Capabilities) -> Vec<String> {
    let mut notes = Vec::new();
    let driver = d.driver.as_deref().unwrap_or("(unknown)");
    if d.rx_queues.is_empty() {
        notes.push(if !c.queue_get {
            "no RX queue list: the kernel lacks queue-get (needs Linux 6.8+)".to_owned()
        } else if !d.admin_up {
            "no RX queues listed: the device is administratively down (the kernel lists queues only for devices that are up)".to_owned()
        } else {
            "no RX queues listed by queue-get".to_owned()
        });
    }
    if let Some(note) = no_pools_note(d, c) {
        notes.push(note);
    } else if !c.page_pool_stats {
        notes.push(
            "pool counters unavailable: kernel built without CONFIG_PAGE_POOL_STATS".to_owned(),
        );
    }
    if d.qstats.is_none() && c.qstats_get {
        notes.push(format!(
            "no qstats: driver {driver} does not report queue stats (link counters shown instead)"
        ));
    }
    notes
}

impl Report {
    /// Build the report from a snapshot. `boottime` is CLOCK_BOOTTIME now
    /// in seconds, to say how long pools have been detached.
    #[must_use]
    pub fn build(snap: &Snapshot, boottime: Option<u64>, missing: Vec<String>) -> Self {
        let c = &snap.capabilities;
        let mut detached = Vec::new();
        let interfaces = snap
            .devices
            .iter()
            .map(|d| {
                for p in d.pools().filter(|p| p.detach_time.is_some()) {
                    detached.push(DetachedPoolView {
                        ifindex: Some(d.ifindex),
                        orphaned: false,
                        pool: pool_view(p, boottime),
                    });
                }
                InterfaceView {
                    ifindex: d.ifindex,
                    name: d.name.clone(),
                    driver: d.driver.clone(),
                    kind: d.kind.clone(),
                    oper_state: d.oper_state,
                    admin_up: d.admin_up,
                    mtu: d.mtu,
                    device_key: d.id.key(),
                    num_rx_queues_allocated: d.num_rx_queues,
                    rings: Avail::from(&d.rings),
                    channels: Avail::from(&d.channels),
                    miss_cost: MissCostView::of(d),
                    link_stats: d.link_stats,
                    qstats: d.qstats,
                    rx_queues: d
                        .rx_queues
                        .iter()
                        .map(|q| QueueView {
                            id: q.id,
                            napi_id: q.napi_id,
                            provider: q.provider,
                            qstats: q.qstats,
                            pools: q.pools.iter().map(|p| pool_view(p, boottime)).collect(),
                        })
                        .collect(),
                    unmapped_pools: d
                        .unmapped_pools
                        .iter()
                        .filter(|p| p.detach_time.is_none())
                        .map(|p| pool_view(p, boottime))
                        .collect(),
                    notes: device_notes(d, c),
                    owners: Vec::new(),
                }
            })
            .collect();
        detached.extend(snap.orphan_pools.iter().map(|p| DetachedPoolView {
            ifindex: None,
            orphaned: true,
            pool: pool_view(p, boottime),
        }));
        Self {
            schema_version: SCHEMA_VERSION,
            kernel_release: c.kernel_release.clone(),
            capabilities: CapabilitiesView {
                netdev_family: c.netdev_family,
                page_pool_get: c.page_pool_get,
                page_pool_stats: c.page_pool_stats,
                queue_get: c.queue_get,
                napi_get: c.napi_get,
                qstats_get: c.qstats_get,
                ethtool_family: c.ethtool_family,
                cap_net_admin: c.cap_net_admin,
                summary: capability_words(c),
            },
            boottime_secs: boottime,
            interfaces,
            detached_pools: detached,
            missing_interfaces: missing,
            daemon: None,
            reclaimable: None,
            reclaimable_not_computed: None,
        }
    }

    /// The human-readable rendering.
    #[must_use]
    pub fn render_text(&self) -> String {
        super::render::text(self)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::sample::kernel_netlink::NetlinkKernel;
    use crate::sample::{Kernel, SampleScope};
    use policy::snapshot::{DeviceId, RxQueue};

    /// Two devices (one with a queue, a pool and a detached pool, one
    /// without rings) and an orphaned pool.
    pub(in crate::cmd::status) fn snapshot() -> Snapshot {
        let stats = PoolStats {
            alloc_fast: 900,
            alloc_refill: 30,
            alloc_slow: 10,
            recycle_cached: 500,
            recycle_ring: 300,
            recycle_ring_full: 200,
            ..PoolStats::default()
        };
        let pool = |id, napi: Option<u64>, detach: Option<u64>| Pool {
            id,
            ifindex: Some(2),
            napi_id: napi,
            inflight: Some(4),
            inflight_mem: Some(16384),
            detach_time: detach,
            provider: None,
            stats: Some(stats),
        };
        Snapshot {
            taken_at_ms: 0,
            capabilities: Capabilities {
                cap_net_admin: false,
                ..policy::fixtures::capabilities("7.3.4")
            },
            devices: vec![
                Device {
                    ifindex: 2,
                    name: "eni0".to_owned(),
                    id: DeviceId {
                        bus: Some("netdevsim".to_owned()),
                        ..DeviceId::default()
                    },
                    driver: Some("netdevsim".to_owned()),
                    oper_state: OperState::Up,
                    admin_up: true,
                    rings: Availability::Available(Rings {
                        rx: Some(512),
                        rx_max: Some(4096),
                        ..Rings::default()
                    }),
                    channels: Availability::Available(Channels {
                        combined: Some(2),
                        combined_max: Some(2),
                        ..Channels::default()
                    }),
                    rx_queues: vec![RxQueue {
                        id: 0,
                        napi_id: Some(8193),
                        pools: vec![pool(5, Some(8193), None)],
                        ..RxQueue::default()
                    }],
                    unmapped_pools: vec![pool(3, None, Some(100))],
                    ..Device::default()
                },
                Device {
                    ifindex: 3,
                    name: "veth0".to_owned(),
                    driver: Some("veth".to_owned()),
                    admin_up: true,
                    oper_state: OperState::Up,
                    rings: Availability::Unavailable("not supported by driver veth".to_owned()),
                    ..Device::default()
                },
            ],
            orphan_pools: vec![Pool {
                ifindex: None,
                ..pool(1, None, Some(40))
            }],
        }
    }

    #[test]
    fn text_says_why_and_uses_the_signals() {
        let r = Report::build(&snapshot(), Some(160), Vec::new());
        let t = r.render_text();
        assert!(
            t.starts_with("kernel 7.3.4 · page-pool introspection: available"),
            "{t}"
        );
        assert!(t.contains("rx 512/4096 (current/max)"), "{t}");
        assert!(t.contains("combined 2/2"), "{t}");
        assert!(
            t.contains("rings:    unavailable — not supported by driver veth"),
            "{t}"
        );
        assert!(
            t.contains("driver veth creates its pools without a netdev"),
            "{t}"
        );
        // recycle-miss share 200/1000 from policy::signals.
        assert!(t.contains("recycle-miss share 20.0%"), "{t}");
        assert!(
            t.contains(
                "pool 3: detached from ifindex 2, inflight 4 pages / 16.0 KiB, detached 60 s ago"
            ),
            "{t}"
        );
        assert!(t.contains("pool 1: orphaned (its device is gone)"), "{t}");
        assert!(t.contains("detached 2 min ago"), "{t}");
    }

    #[test]
    fn json_has_schema_and_stable_names() {
        let r = Report::build(&snapshot(), Some(160), vec!["nope".to_owned()]);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["missing_interfaces"][0], "nope");
        assert_eq!(v["interfaces"][0]["rings"]["value"]["rx_max"], 4096);
        assert_eq!(v["interfaces"][1]["rings"]["available"], false);
        let p = &v["interfaces"][0]["rx_queues"][0]["pools"][0];
        assert_eq!(p["id"], 5);
        assert_eq!(p["derived"]["recycle_miss_share"], 0.2);
        assert_eq!(v["detached_pools"][1]["orphaned"], true);
        assert_eq!(v["detached_pools"][1]["pool"]["detached_for_secs"], 120);
    }

    /// Live: the whole path (netlink → Snapshot → text/JSON) in a throwaway
    /// netns with a veth pair. Root only.
    #[test]
    #[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
    fn live_status_in_netns() {
        assert!(
            netlink::netns::is_root(),
            "live_status_in_netns: needs root (creates a network namespace)"
        );
        let ns = netlink::netns::TempNetns::with_veth("status", 2).unwrap();
        let (text, json) = ns
            .run(|| async {
                let k = NetlinkKernel::connect().await.unwrap();
                let snap = k.sample(&SampleScope::default()).await.unwrap();
                let r = Report::build(&snap, netlink::caps::boottime_secs().ok(), Vec::new());
                (r.render_text(), serde_json::to_value(&r).unwrap())
            })
            .unwrap();
        crate::say!("{text}");
        assert!(text.contains("veth0 (ifindex"), "{text}");
        assert!(
            text.contains("rings:    unavailable — not supported by driver veth"),
            "{text}"
        );
        assert!(text.contains("channels: rx 2/2, tx "), "{text}");
        assert!(!text.contains("lo (ifindex"), "{text}");
        let v0 = json["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "veth0")
            .unwrap();
        assert_eq!(v0["driver"], "veth");
        assert_eq!(v0["rx_queues"].as_array().unwrap().len(), 2);
        assert_eq!(json["schema_version"], 1);
    }

    #[test]
    fn without_stats_the_capability_line_says_so() {
        let mut s = snapshot();
        s.capabilities.page_pool_stats = false;
        let w = capability_words(&s.capabilities).join(" · ");
        assert!(w.contains(
            "page-pool stats: unavailable — kernel built without CONFIG_PAGE_POOL_STATS"
        ));
    }
}
