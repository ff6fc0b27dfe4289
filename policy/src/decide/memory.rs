//! What a ring costs: the memory estimate the budget gates on
//! (`docs/decisions.md` §4), per device at a given ring.

use crate::drivers::{
    self, DEFAULT_PAGE_BYTES, DriverInfo, POOL_CACHE_PAGES, POOL_RING_CLAMP, PoolMapping,
};
use crate::policy::Policy;
use crate::snapshot::{Device, Pool};

/// RX buffers a queue keeps posted per pool at `ring` (design.md): the pool
/// size where the mapping is known (ring × the driver's factor), else the
/// larger of pool and ring.
pub(super) fn posted_pages(info: &DriverInfo, ring: u32) -> u32 {
    let pool = info.pool_for_ring(ring).unwrap_or(ring);
    match info.mapping {
        PoolMapping::Proportional { .. } => pool,
        PoolMapping::Fixed { .. } | PoolMapping::Unknown => pool.max(ring),
    }
}

pub(super) fn queue_count(dev: &Device) -> u32 {
    let active = u32::try_from(dev.rx_queues.len()).unwrap_or(u32::MAX);
    let chans = dev
        .channels
        .available()
        .map_or(0, crate::snapshot::Channels::rx_queues);
    active.max(chans).max(1)
}

/// Bytes per page for the device: `inflight_mem / inflight` where observable.
fn page_bytes(dev: &Device) -> u64 {
    dev.pools()
        .filter_map(Pool::page_bytes)
        .max()
        .unwrap_or(DEFAULT_PAGE_BYTES)
}

/// design.md: per pool ≈ (posted RX buffers + pool ring + 128 cached) ×
/// page bytes, times the pools of a queue (idpf split queue: two). Posted
/// buffers ≈ the pool size where the mapping is known (ring × the driver's
/// factor: exact for libeth, mlx5, bnxt's agg ring; an overestimate for gve),
/// the ring where it is not; the pool ring is clamped at 16384.
#[must_use]
pub fn device_bytes(dev: &Device, info: &DriverInfo, ring: u32) -> u64 {
    let pool = info.pool_for_ring(ring).unwrap_or(ring);
    let posted = u64::from(posted_pages(info, ring));
    let per_queue = posted
        .saturating_add(u64::from(pool.min(POOL_RING_CLAMP)))
        .saturating_add(POOL_CACHE_PAGES)
        .saturating_mul(u64::from(info.pools_per_queue.max(1)));
    per_queue
        .saturating_mul(page_bytes(dev))
        .saturating_mul(u64::from(queue_count(dev)))
}

/// What the device's rings cost now by the estimate the memory budget
/// gates on ([`device_bytes`] at the ring that sizes its pool); `None`
/// when that ring is not known.
#[must_use]
pub fn current_device_bytes(dev: &Device) -> Option<u64> {
    let info = drivers::driver_info(dev);
    let ring = dev
        .rings
        .available()
        .and_then(|r| drivers::ring_value(r, info.field).0)?;
    Some(device_bytes(dev, &info, ring))
}

/// [`current_device_bytes`], 0 when the ring is not known (the budget's sum).
pub(super) fn current_bytes(dev: &Device) -> u64 {
    current_device_bytes(dev).unwrap_or(0)
}

/// The ring whose pool takes a return burst of `burst` pages with the
/// policy's headroom (`None`: the driver's mapping cannot say): what a
/// growth step asks for, and what a calm pool's mark keeps.
pub(super) fn ring_for_burst(info: &DriverInfo, policy: &Policy, burst: f64) -> Option<u32> {
    info.ring_for_pool(to_u32(burst * policy.rings.headroom))
}

/// A queue's pages out (`inflight`, summed over its pools) beyond what it
/// keeps posted at `ring`; `None` when nothing is.
pub(super) fn held_beyond(info: &DriverInfo, ring: u32, inflight: u64) -> Option<u64> {
    let posted =
        u64::from(posted_pages(info, ring)).saturating_mul(u64::from(info.pools_per_queue.max(1)));
    inflight.checked_sub(posted).filter(|h| *h > 0)
}

/// A pool's pages in flight (`inflight`) had its ring been `to` rather
/// than `from`: the part within the buffers it keeps posted scales with
/// the posted buffers; the pages out beyond them are the load's (held by
/// the stack, or parked after a burst: `inflight` is a high-water mark
/// while the pool lives) and stay as they are. What a counterfactual ring
/// holds, never the high-water mark scaled by the ring.
#[must_use]
pub fn inflight_at_ring(info: &DriverInfo, (from, to): (u32, u32), inflight: u64) -> u64 {
    let (was, now) = (
        u64::from(posted_pages(info, from)),
        u64::from(posted_pages(info, to)),
    );
    let within = inflight.min(was);
    let scaled = match was {
        0 => within,
        // Rounded to nearest, in u128: no overflow, no float.
        _ => u64::try_from(
            (u128::from(within) * u128::from(now) + u128::from(was / 2)) / u128::from(was),
        )
        .unwrap_or(u64::MAX),
    };
    scaled.saturating_add(inflight - within)
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(super) fn to_u32(v: f64) -> u32 {
    v.ceil().clamp(0.0, f64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring change moves the posted part of a pool's pages in flight,
    /// not the pages out beyond it: ice at 8160 with 600 pages out beyond
    /// the posted ring holds 768 + 600 at 768, not (8160 + 600) × 768 / 8160.
    #[test]
    fn inflight_at_another_ring_keeps_the_pages_beyond_the_posted() {
        let d = crate::fixtures::nic("ice", 8160, 8160, 2);
        let info = drivers::driver_info(&d);
        assert_eq!(posted_pages(&info, 8160), 8160);
        assert_eq!(inflight_at_ring(&info, (8160, 768), 8160 + 600), 768 + 600);
        assert_eq!(inflight_at_ring(&info, (768, 8160), 768 + 600), 8160 + 600);
        // A pool not yet filled to its posted ring scales as a whole.
        assert_eq!(inflight_at_ring(&info, (1024, 512), 512), 256);
        assert_eq!(inflight_at_ring(&info, (1024, 1024), 5000), 5000);
    }
}
