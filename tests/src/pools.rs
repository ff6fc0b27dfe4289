//! A device's page pools, and a ppsim device's rings and channels, as the
//! VM tests and the outcome benchmark (`daemon/benches/outcome.rs`) measure
//! them: over pptune's own netlink client, with the counters converted
//! exactly as the daemon converts them (`pptune::sample::kernel_netlink::pool_stats`).

use std::collections::BTreeSet;

use netlink::Client;
use netlink::ethtool::{Header, Rings};
use netlink::netdev::PagePool;
use policy::snapshot::PoolStats;
use pptune::sample::kernel_netlink::pool_stats;

use crate::ppsim::PpsimDev;

/// `d`'s RX ring as the kernel reports it (ethtool rings-get).
///
/// # Panics
/// When the device is gone or reports no RX ring: the test's own failure.
#[allow(clippy::expect_used)]
pub async fn rx_ring(c: &Client, d: &PpsimDev) -> u32 {
    let ifx = d.ifindex().expect("ifindex");
    c.rings(ifx, Some(d.name()))
        .await
        .expect("rings-get")
        .rx
        .expect("rx ring reported")
}

/// `d`'s combined channels as the kernel reports them (channels-get).
///
/// # Panics
/// When the device is gone or reports no combined count.
#[allow(clippy::expect_used)]
pub async fn combined(c: &Client, d: &PpsimDev) -> u32 {
    let ifx = d.ifindex().expect("ifindex");
    c.channels(ifx, Some(d.name()))
        .await
        .expect("channels-get")
        .combined_count
        .expect("combined reported")
}

/// Sets `d`'s RX ring to `ring` (ethtool rings-set).
///
/// # Panics
/// When the device is gone or the kernel refuses.
#[allow(clippy::expect_used)]
pub async fn set_rx_ring(c: &Client, d: &PpsimDev, ring: u32) {
    let ifx = d.ifindex().expect("ifindex");
    c.set_rings(
        Rings {
            header: Some(Header::ifindex(ifx)),
            rx: Some(ring),
            ..Rings::default()
        },
        Some(d.name()),
    )
    .await
    .expect("rings-set");
}

/// The pools attached to `ifindex` (listed and not detached).
async fn attached(c: &Client, ifindex: u32) -> netlink::Result<Vec<PagePool>> {
    let mut pools = c.page_pools().await?;
    pools.retain(|p| p.ifindex == Some(ifindex) && p.detach_time.is_none());
    Ok(pools)
}

/// Ids of the pools attached to `ifindex`.
pub async fn attached_pools(c: &Client, ifindex: u32) -> netlink::Result<BTreeSet<u64>> {
    Ok(attached(c, ifindex)
        .await?
        .iter()
        .filter_map(|p| p.id)
        .collect())
}

/// Summed `inflight-mem` of the pools attached to `ifindex`, in bytes.
pub async fn attached_inflight_mem(c: &Client, ifindex: u32) -> netlink::Result<u64> {
    Ok(attached(c, ifindex)
        .await?
        .iter()
        .filter_map(|p| p.inflight_mem)
        .sum())
}

/// Summed counters of the pools in `ids` that the stats dump still lists.
pub async fn stats_of(c: &Client, ids: &BTreeSet<u64>) -> netlink::Result<PoolStats> {
    Ok(c.page_pool_stats()
        .await?
        .into_iter()
        .filter(|s| {
            s.info
                .as_ref()
                .and_then(|i| i.id)
                .is_some_and(|id| ids.contains(&id))
        })
        .fold(PoolStats::default(), |acc, s| {
            acc.add(&pool_stats(&s.counters))
        }))
}
