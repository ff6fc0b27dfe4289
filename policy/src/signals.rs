//! The derived page_pool figures, defined once.
//!
//! `status`, `plan`, the metrics, the docs and the benchmarks all use these
//! functions. Each takes counters (cumulative or deltas over a window) and
//! returns `None` when the denominator is zero: "no traffic" is not 0 %.
//!
//! Units (see docs/decisions.md §1): `alloc_fast` and `recycle_*` count pages;
//! `alloc_slow` and `alloc_refill` count cache refills of up to 64 pages;
//! `recycle_ring_full` counts once per bulk on the bulk-return path, so the
//! recycle-miss share is a lower bound there.

use crate::snapshot::PoolStats;

/// ynltool's recycling percentage (`tools/net/ynl/ynltool/page-pool.c`):
/// `(recycle_ring + recycle_cached) / (alloc_fast + alloc_refill + alloc_slow) × 100`.
/// It mixes units exactly as upstream does, so the numbers match kernel tooling.
#[must_use]
pub fn recycling_pct(s: &PoolStats) -> Option<f64> {
    let den = s
        .alloc_fast
        .saturating_add(s.alloc_refill)
        .saturating_add(s.alloc_slow);
    ratio(s.recycle_ring.saturating_add(s.recycle_cached), den).map(|r| r * 100.0)
}

/// Recycle-miss share: `ring_full / (recycle_cached + recycle_ring + ring_full)`.
/// The pool ring was too small for the return bursts. Tunable by ring size.
#[must_use]
pub fn recycle_miss_share(s: &PoolStats) -> Option<f64> {
    let den = s
        .recycle_cached
        .saturating_add(s.recycle_ring)
        .saturating_add(s.recycle_ring_full);
    ratio(s.recycle_ring_full, den)
}

/// Slow-refill share: `alloc_slow / (alloc_slow + alloc_refill)`, both in
/// refills. For memory-provider pools (dmabuf, io_uring), which never count
/// `alloc_slow`, `alloc_empty` takes its place.
#[must_use]
pub fn slow_refill_share(s: &PoolStats, memory_provider: bool) -> Option<f64> {
    let slow = slow_refills(s, memory_provider);
    ratio(slow, slow.saturating_add(s.alloc_refill))
}

/// Refills that reached the page allocator, or the memory provider:
/// `alloc_slow`, or `alloc_empty` for memory-provider pools, whose
/// provider allocations page_pool does not count as slow.
#[must_use]
pub fn slow_refills(s: &PoolStats, memory_provider: bool) -> u64 {
    if memory_provider {
        s.alloc_empty
    } else {
        s.alloc_slow
    }
}

/// Pages the pool handed out: `alloc_fast` (from its cache) plus one page
/// per refill from its ring and per slow refill (`slow_refills`), which
/// each hand one page out directly and park the rest in the cache. It
/// counts every page the driver took, whatever way it came back, so it
/// does not share ring_full's undercount.
#[must_use]
pub fn pages_handed_out(s: &PoolStats, memory_provider: bool) -> u64 {
    s.alloc_fast
        .saturating_add(s.alloc_refill)
        .saturating_add(slow_refills(s, memory_provider))
}

/// ring_full per page the pool handed out. n bursts of B pages into a pool
/// ring of P free n (B − P) pages, of which the counters see 1/k; pages
/// handed out do not depend on P. So this is n (B − P) / (k × pages) — a
/// line in P whose zero is the burst, whatever k, and whatever the pool
/// also hands out for returns that never fill its ring (small ones add to
/// the pages on both sides of a ring step, not to the line's zero).
#[must_use]
pub fn freed_per_page_handed_out(s: &PoolStats, memory_provider: bool) -> Option<f64> {
    ratio(s.recycle_ring_full, pages_handed_out(s, memory_provider))
}

/// `num / den`, or `None` when `den` is 0 ("no traffic" is not 0 %).
/// The one ratio: every share in pptune is computed with it.
#[must_use]
#[allow(clippy::cast_precision_loss)]
pub fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// A page count as a float, for the figures computed on counts (exact
/// below 2⁵³ pages).
#[must_use]
#[allow(clippy::cast_precision_loss)]
pub(crate) fn n64(v: u64) -> f64 {
    v as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_traffic_is_no_data() {
        let s = PoolStats::default();
        assert_eq!(recycling_pct(&s), None);
        assert_eq!(recycle_miss_share(&s), None);
        assert_eq!(slow_refill_share(&s, false), None);
    }

    #[test]
    fn definitions() {
        let s = PoolStats {
            alloc_fast: 900,
            alloc_refill: 30,
            alloc_slow: 10,
            alloc_empty: 12,
            recycle_cached: 500,
            recycle_ring: 300,
            recycle_ring_full: 200,
            ..PoolStats::default()
        };
        assert_eq!(recycle_miss_share(&s), Some(0.2));
        assert_eq!(slow_refill_share(&s, false), Some(0.25));
        assert_eq!(slow_refill_share(&s, true), Some(12.0 / 42.0));
        let pct = recycling_pct(&s).unwrap();
        assert!((pct - 800.0 / 940.0 * 100.0).abs() < 1e-9);
    }
}
