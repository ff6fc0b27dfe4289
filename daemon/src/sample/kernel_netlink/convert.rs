//! netlink's decoded objects to the policy crate's snapshot types, and
//! kernel notifications to the loop's events.

use netlink::Event;
use netlink::netdev::{PagePool, PagePoolStats, Qstats, cmd};
use netlink::rtnl::Link;
use policy::snapshot::{
    Availability, Capabilities, Channels, Device, LinkStats, MemoryProvider, OperState, Pool,
    PoolStats, QueueStats, Rings,
};

use crate::sample::KernelEvent;

/// The policy's capability flags from the probe.
#[must_use]
pub fn convert_caps(c: &netlink::Capabilities) -> Capabilities {
    Capabilities {
        kernel_release: c.kernel_release.clone(),
        netdev_family: c.netdev_ops.is_some(),
        page_pool_get: c.netdev_op(cmd::PAGE_POOL_GET).is_some(),
        page_pool_stats: c.netdev_op(cmd::PAGE_POOL_STATS_GET).is_some(),
        queue_get: c.netdev_op(cmd::QUEUE_GET).is_some(),
        napi_get: c.netdev_op(cmd::NAPI_GET).is_some(),
        qstats_get: c.netdev_op(cmd::QSTATS_GET).is_some(),
        ethtool_family: c.ethtool_ops.is_some(),
        cap_net_admin: c.cap_net_admin,
    }
}

/// A device from its link (rings, channels and the join's parts still
/// empty).
#[must_use]
pub fn base_device(link: &Link, driver: Option<String>) -> Device {
    let mut dev = Device::default();
    fill_device(&mut dev, link);
    dev.driver = driver;
    dev
}

/// Overwrite `dev` with what `link` says, reusing its strings' buffers:
/// every field but `driver` (the caller's: it is not in the link) and the
/// join's `rx_queues`/`unmapped_pools` ([`join_into`] refills those), with
/// rings, channels and device qstats back to not sampled.
pub fn fill_device(dev: &mut Device, link: &Link) {
    dev.ifindex = link.ifindex;
    dev.name.clone_from(&link.name);
    dev.id.bus.clone_from(&link.parent_bus);
    dev.id.parent.clone_from(&link.parent_dev);
    if !link.write_perm_addr(dev.id.perm_addr.get_or_insert_default()) {
        dev.id.perm_addr = None;
    }
    if dev.id.bus.is_none() && dev.id.parent.is_none() && dev.id.perm_addr.is_none() {
        dev.id
            .name_fallback
            .get_or_insert_default()
            .clone_from(&link.name);
    } else {
        dev.id.name_fallback = None;
    }
    dev.kind.clone_from(&link.kind);
    dev.oper_state = match link.oper_state {
        netlink::rtnl::OperState::Unknown => OperState::Unknown,
        netlink::rtnl::OperState::NotPresent => OperState::NotPresent,
        netlink::rtnl::OperState::Down => OperState::Down,
        netlink::rtnl::OperState::LowerLayerDown => OperState::LowerLayerDown,
        netlink::rtnl::OperState::Testing => OperState::Testing,
        netlink::rtnl::OperState::Dormant => OperState::Dormant,
        netlink::rtnl::OperState::Up => OperState::Up,
    };
    dev.admin_up = link.admin_up;
    dev.master = link.master;
    dev.mtu = link.mtu;
    dev.num_rx_queues = link.num_rx_queues;
    dev.rings = Availability::NotSampled;
    dev.channels = Availability::NotSampled;
    dev.link_stats = link.stats64.map(|s| LinkStats {
        rx_packets: s.rx_packets,
        rx_bytes: s.rx_bytes,
        rx_dropped: s.rx_dropped,
        rx_missed_errors: s.rx_missed_errors,
        rx_fifo_errors: s.rx_fifo_errors,
    });
    dev.qstats = None;
}

pub(super) fn provider(
    dmabuf: Option<u32>,
    io_uring: Option<&netlink::netdev::IoUringProviderInfo>,
) -> Option<MemoryProvider> {
    match (dmabuf, io_uring) {
        (Some(id), _) => Some(MemoryProvider::Dmabuf { id }),
        (None, Some(io)) => Some(MemoryProvider::IoUring {
            rx_buf_len: io.rx_buf_len,
        }),
        (None, None) => None,
    }
}

/// A netlink pool (and its stats entry, if any) as the policy sees it.
#[must_use]
pub fn convert_pool(p: &PagePool, stats: Option<&PagePoolStats>) -> Pool {
    Pool {
        id: p.id.unwrap_or(0),
        ifindex: p.ifindex,
        napi_id: p.napi_id,
        inflight: p.inflight,
        inflight_mem: p.inflight_mem,
        detach_time: p.detach_time,
        provider: provider(p.dmabuf, p.io_uring.as_ref()),
        stats: stats.map(|s| pool_stats(&s.counters)),
    }
}

/// The kernel's page-pool counters as the policy's `PoolStats`, field by
/// field from the one counter table (`policy::counters`). A counter the
/// kernel omitted reads 0 (the stats reply carries all of them or none).
#[must_use]
pub fn pool_stats(c: &netlink::netdev::PoolCounters) -> PoolStats {
    macro_rules! convert {
        ($($field:ident, $unit:literal, $help:literal;)*) => {
            PoolStats {
                $($field: c.$field.unwrap_or(0),)*
            }
        };
    }
    policy::pool_counters!(convert)
}

pub(super) fn convert_qstats(q: &Qstats) -> QueueStats {
    let c = &q.counters;
    QueueStats {
        rx_packets: c.rx_packets,
        rx_bytes: c.rx_bytes,
        rx_alloc_fail: c.rx_alloc_fail,
        rx_hw_drops: c.rx_hw_drops,
        rx_hw_drop_overruns: c.rx_hw_drop_overruns,
    }
}

/// ethtool rings as the policy sees them.
#[must_use]
pub fn convert_rings(r: &netlink::ethtool::Rings) -> Rings {
    Rings {
        rx: r.rx,
        rx_max: r.rx_max,
        rx_mini: r.rx_mini,
        rx_mini_max: r.rx_mini_max,
        rx_jumbo: r.rx_jumbo,
        rx_jumbo_max: r.rx_jumbo_max,
        tx: r.tx,
        tx_max: r.tx_max,
        rx_buf_len: r.rx_buf_len,
        tcp_data_split: r.tcp_data_split,
        hds_thresh: r.hds_thresh,
        hds_thresh_max: r.hds_thresh_max,
    }
}

/// ethtool channels as the policy sees them.
#[must_use]
pub fn convert_channels(c: &netlink::ethtool::Channels) -> Channels {
    Channels {
        rx: c.rx_count,
        rx_max: c.rx_max,
        tx: c.tx_count,
        tx_max: c.tx_max,
        other: c.other_count,
        other_max: c.other_max,
        combined: c.combined_count,
        combined_max: c.combined_max,
    }
}

pub(super) fn convert_event(e: Event) -> Option<KernelEvent> {
    Some(match e {
        Event::PagePool { pool, .. } => KernelEvent::PoolsChanged {
            ifindex: pool.ifindex,
        },
        Event::Rings(r) => KernelEvent::RingsChanged {
            ifindex: r.header.as_ref()?.dev_index?,
            rings: convert_rings(&r),
        },
        Event::Channels(c) => KernelEvent::ChannelsChanged {
            ifindex: c.header.as_ref()?.dev_index?,
            channels: convert_channels(&c),
        },
        Event::LinkNew(l) => KernelEvent::LinkChanged { ifindex: l.ifindex },
        Event::LinkDel(l) => KernelEvent::LinkRemoved { ifindex: l.ifindex },
        Event::Overflow { source } => KernelEvent::Overflow { source },
        Event::Dev { .. } => return None,
    })
}
