//! THE table of page_pool counters.
//!
//! [`pool_counters!`](crate::pool_counters) lists every counter once: its
//! field name, the unit of its metric and the metric's help text. From that
//! one list come the [`PoolStats`](crate::snapshot::PoolStats) fields, their
//! field-wise delta and sum, their names ([`NAMES`]), their values in table
//! order ([`PoolStats::values`](crate::snapshot::PoolStats::values)) and the
//! metric descriptors ([`METRICS`]). The daemon's netlink conversion expands
//! the same list, so adding a counter is one line here plus its netlink
//! decode (`netlink/src/netdev/page_pool.rs`).

/// Calls `$cb! { field, "metric unit or empty", "help"; … }` with every
/// page_pool counter, in the kernel's attribute order.
#[macro_export]
macro_rules! pool_counters {
    ($cb:ident) => {
        $cb! {
            alloc_fast, "pages", "Pages allocated from the pool's cache (fast path)";
            alloc_slow, "refills", "Slow-path refills from the page allocator (up to 64 pages each)";
            alloc_slow_high_order, "refills", "Slow-path high-order allocations";
            alloc_empty, "", "Times the pool ring was empty on refill (memory-provider pools count their slow path here)";
            alloc_refill, "refills", "Cache refills from the pool ring";
            alloc_waive, "pages", "Pages waived because they were on the wrong NUMA node";
            recycle_cached, "pages", "Pages recycled into the per-CPU cache";
            recycle_cache_full, "pages", "Recycles that found the cache full";
            recycle_ring, "pages", "Pages recycled into the pool ring";
            recycle_ring_full, "", "Returns freed because the pool ring was full (once per bulk on the bulk path)";
            recycle_released_refcnt, "pages", "Pages released because the stack still held a reference";
        }
    };
}

/// A counter's metric: `pptune_pool_<name>` with its unit and help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterMetric {
    /// The counter's field name (`alloc_fast`).
    pub name: &'static str,
    /// `pptune_pool_<name>`.
    pub metric: &'static str,
    pub unit: Option<&'static str>,
    pub help: &'static str,
}

macro_rules! define_pool_stats {
    ($($field:ident, $unit:literal, $help:literal;)*) => {
        /// The page_pool counters, cumulative for the life of the pool
        /// (generated from [`pool_counters!`](crate::pool_counters)).
        ///
        /// Units differ: `alloc_fast` and the `recycle_*` counters count
        /// pages; `alloc_slow` and `alloc_refill` count cache refills (up to
        /// 64 pages each); `recycle_ring_full` counts once per bulk on the
        /// bulk-return path.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        pub struct PoolStats {
            $(#[doc = $help] pub $field: u64,)*
        }

        /// How many counters the table has.
        pub const COUNT: usize = [$(stringify!($field)),*].len();

        /// The counters' field names, in table order.
        pub const NAMES: [&str; COUNT] = [$(stringify!($field)),*];

        /// The counters' metric descriptors, in table order.
        pub const METRICS: [CounterMetric; COUNT] = [$(CounterMetric {
            name: stringify!($field),
            metric: concat!("pptune_pool_", stringify!($field)),
            unit: if $unit.is_empty() { None } else { Some($unit) },
            help: $help,
        }),*];

        impl PoolStats {
            /// Field-wise `self - earlier`; `None` if any counter went
            /// backwards (a reset is "no data", never a rate).
            #[must_use]
            pub fn delta(&self, earlier: &Self) -> Option<Self> {
                Some(Self {
                    $($field: self.$field.checked_sub(earlier.$field)?,)*
                })
            }

            /// Field-wise saturating sum (aggregating several pools).
            #[must_use]
            pub fn add(&self, o: &Self) -> Self {
                Self {
                    $($field: self.$field.saturating_add(o.$field),)*
                }
            }

            /// The counters in table order ([`NAMES`]).
            #[must_use]
            pub fn values(&self) -> [u64; COUNT] {
                [$(self.$field),*]
            }

            /// The inverse of [`values`](Self::values) (a recording read back).
            #[must_use]
            pub fn from_values(v: [u64; COUNT]) -> Self {
                let [$($field),*] = v;
                Self { $($field),* }
            }
        }
    };
}

pool_counters!(define_pool_stats);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let s = PoolStats {
            alloc_fast: 1,
            recycle_released_refcnt: 11,
            ..PoolStats::default()
        };
        let v = s.values();
        assert_eq!(v.first(), Some(&1));
        assert_eq!(v.last(), Some(&11));
        assert_eq!(NAMES.first(), Some(&"alloc_fast"));
        assert_eq!(METRICS[9].metric, "pptune_pool_recycle_ring_full");
        assert_eq!(METRICS[9].unit, None);
        assert_eq!(METRICS[0].unit, Some("pages"));
        let sum = s.add(&s);
        assert_eq!(sum.delta(&s), Some(s));
        assert_eq!(s.delta(&sum), None, "a counter that went back is no data");
    }
}
