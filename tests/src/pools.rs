//! A device's page pools as the VM tests and the outcome benchmark measure
//! them: over pptune's own netlink client, with the counters converted
//! exactly as the daemon converts them (`pptune::sample::kernel_netlink::pool_stats`).
//! `daemon/benches/outcome.rs` includes this file by path.

use std::collections::BTreeSet;

use netlink::Client;
use netlink::netdev::PagePool;
use policy::snapshot::PoolStats;
use pptune::sample::kernel_netlink::pool_stats;

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
