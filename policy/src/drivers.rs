//! Driver knowledge: which ring field sizes the page pool and how (as a
//! function of the ring and the mode the kernel shows), how the driver rounds
//! or refuses a requested ring, whether a ring change resizes the pool now,
//! at the next reconfiguration or never, and what a refusal teaches.
//!
//! Every row cites the Linux 7.3 source in `docs/drivers.md`. The mode a row
//! depends on (bnxt aggregation rings, idpf split queues, mlx5 RQ type, MTU)
//! is read from the snapshot; where it cannot be read the row says so
//! ([`DriverInfo::mode_known`]) and the closed loop judges the outcome.
//!
//! All functions here are pure: no I/O, table-tested below.

use crate::plan::RingField;
use crate::policy::DisruptionClass;
use crate::snapshot::{Device, Rings};

mod learn;
mod rounding;
mod table;

pub use learn::{Learned, LearnedRule, learn_from_refusal};
pub use rounding::{DriverRounding, round_down, round_up};
pub use table::{
    KNOWN_DRIVERS, driver_info, driver_row, mana_frag_count, mlx4_pages_per_frame,
    mlx5_striding_factor,
};

/// The page_pool ring clamp: `page_pool_init()` clamps `pool_size` to 16384
/// (net/core/page_pool.c:211-212). Growing the RX ring so the driver asks for
/// more than this buys nothing.
pub const POOL_RING_CLAMP: u32 = 16384;

/// The ring a pool gets when the driver passes `pool_size` 0
/// (net/core/page_pool.c:195).
pub const POOL_RING_DEFAULT: u32 = 1024;

/// `PP_ALLOC_CACHE_SIZE` on 4 KiB pages: pages an idle pool can hold beyond
/// its ring.
pub const POOL_CACHE_PAGES: u64 = 128;

/// Page bytes assumed when `inflight_mem / inflight` cannot be observed.
pub const DEFAULT_PAGE_BYTES: u64 = 4096;

/// How the driver derives `pool_size` from its ring.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PoolMapping {
    /// `pool = min(cap, max(floor, round(factor × ring) + extra))`.
    Proportional {
        factor: f64,
        /// Entries added whatever the ring (mana's `+ 1`, fbnic's rx-mini
        /// when rx-jumbo is tuned).
        extra: u32,
        /// Smallest pool the driver creates (mlx5 striding: 4 WQEs).
        floor: u32,
        /// Largest pool the driver creates (octeontx2 2048, bnxt's agg ring
        /// 8191); `u32::MAX` when only the page_pool clamp applies.
        cap: u32,
    },
    /// The pool does not follow the ring (netdevsim 256, virtio_net keeps
    /// its probe-time size, bnxt without aggregation rings 1024).
    Fixed { entries: Option<u32> },
    /// Not known for this driver: assume 1× and let outcomes tell.
    Unknown,
}

impl PoolMapping {
    /// `factor × ring` with no floor, cap or extra.
    #[must_use]
    pub const fn times(factor: f64) -> Self {
        Self::Proportional {
            factor,
            extra: 0,
            floor: 0,
            cap: u32::MAX,
        }
    }
}

/// When a ring change resizes the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolResize {
    /// The rebuilt queues get a pool sized from the new ring.
    Now,
    /// The rebuilt queues get a pool sized from the *old* ring; the new size
    /// applies at the next reconfiguration (gve).
    NextReconfiguration,
    /// The pool does not follow the ring at all.
    Never,
}

/// Driver facts the engine needs for one device, for the mode it is in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverInfo {
    /// The ring field pptune changes for this driver.
    pub field: RingField,
    pub mapping: PoolMapping,
    /// How the driver rounds or refuses a requested size.
    pub rounding: DriverRounding,
    /// Smallest ring the driver accepts.
    pub driver_min: u32,
    /// Whether a ring change resizes the pool.
    pub resize: PoolResize,
    /// Pools per RX queue that each follow the mapping (idpf split queue: two
    /// buffer queues).
    pub pools_per_queue: u32,
    /// What a ring change does to traffic, where the source says.
    pub disruption: Option<DisruptionClass>,
    /// Whether the mode the mapping depends on was read from the kernel
    /// (false: assumed, see `note`).
    pub mode_known: bool,
    /// A short note for messages ("ice: pool = rx ring").
    pub note: &'static str,
}

impl DriverInfo {
    const fn row(mapping: PoolMapping, rounding: DriverRounding, note: &'static str) -> Self {
        Self {
            field: RingField::Rx,
            mapping,
            rounding,
            driver_min: 1,
            resize: PoolResize::Now,
            pools_per_queue: 1,
            disruption: None,
            mode_known: true,
            note,
        }
    }

    const fn min(mut self, m: u32) -> Self {
        self.driver_min = m;
        self
    }

    const fn class(mut self, c: DisruptionClass) -> Self {
        self.disruption = Some(c);
        self
    }

    /// Pool entries a ring value gives (before the 16384 clamp); `None` when
    /// the pool does not follow the ring.
    #[must_use]
    pub fn pool_for_ring(&self, ring: u32) -> Option<u32> {
        match self.mapping {
            PoolMapping::Proportional {
                factor,
                extra,
                floor,
                cap,
            } => Some(
                scale(ring, factor)
                    .saturating_add(extra)
                    .max(floor)
                    .min(cap),
            ),
            PoolMapping::Unknown => Some(ring),
            PoolMapping::Fixed { .. } => None,
        }
    }

    /// The largest pool a ring change can give (the driver's cap or the
    /// page_pool clamp); `None` when the pool does not follow the ring.
    #[must_use]
    pub fn max_pool(&self) -> Option<u32> {
        match self.mapping {
            PoolMapping::Proportional { cap, .. } => Some(cap.min(POOL_RING_CLAMP)),
            PoolMapping::Unknown => Some(POOL_RING_CLAMP),
            PoolMapping::Fixed { .. } => None,
        }
    }

    /// Smallest ring value whose pool reaches `pool` entries (inverse of
    /// [`Self::pool_for_ring`]), before rounding. Asking for more than
    /// [`Self::max_pool`] gives the ring that reaches the maximum.
    #[must_use]
    pub fn ring_for_pool(&self, pool: u32) -> Option<u32> {
        let pool = pool.min(self.max_pool()?);
        match self.mapping {
            PoolMapping::Proportional {
                factor,
                extra,
                floor,
                ..
            } => {
                if pool <= floor {
                    return Some(1);
                }
                let mut r = unscale(pool.saturating_sub(extra), factor).max(1);
                // `scale` rounds: step back while a smaller ring still reaches.
                while r > 1 && self.pool_for_ring(r - 1).is_some_and(|p| p >= pool) {
                    r -= 1;
                }
                while self.pool_for_ring(r).is_some_and(|p| p < pool) && r < u32::MAX {
                    r += 1;
                }
                Some(r)
            }
            PoolMapping::Unknown => Some(pool),
            PoolMapping::Fixed { .. } => None,
        }
    }

    /// The factor as a number for evidence (0 = fixed, 1 = unknown/1×).
    #[must_use]
    pub fn factor(&self) -> f64 {
        match self.mapping {
            PoolMapping::Proportional { factor, .. } => factor,
            PoolMapping::Unknown => 1.0,
            PoolMapping::Fixed { .. } => 0.0,
        }
    }

    /// Why growing this driver's ring for the pool is pointless, if it is.
    #[must_use]
    pub fn ring_does_not_resize_pool(&self) -> Option<&'static str> {
        match self.resize {
            PoolResize::Now => None,
            PoolResize::NextReconfiguration => Some(
                "the rebuilt queues get a pool sized from the old ring; the new size applies only at the next reconfiguration",
            ),
            PoolResize::Never => Some("resizing the ring would not change the pool"),
        }
    }
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]
fn scale(v: u32, f: f64) -> u32 {
    (f64::from(v) * f).round().clamp(0.0, f64::from(u32::MAX)) as u32
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]
fn unscale(v: u32, f: f64) -> u32 {
    if f <= 0.0 {
        return v;
    }
    (f64::from(v) / f).ceil().clamp(0.0, f64::from(u32::MAX)) as u32
}

/// What the kernel shows that a row's mode depends on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverMode {
    pub mtu: Option<u32>,
    /// bnxt: `rx-jumbo` (the aggregation ring) and its maximum.
    pub rx_jumbo: Option<u32>,
    pub rx: Option<u32>,
    /// Most pools seen on one RX queue (idpf split queue: ≥ 2); 0 = none
    /// mapped to a queue.
    pub pools_per_queue: u32,
}

impl DriverMode {
    /// The mode as `dev` shows it.
    #[must_use]
    pub fn of(dev: &Device) -> Self {
        let rings = dev.rings.available().copied().unwrap_or_default();
        Self {
            mtu: dev.mtu,
            rx_jumbo: rings.rx_jumbo_max.and(rings.rx_jumbo),
            rx: rings.rx,
            pools_per_queue: dev
                .rx_queues
                .iter()
                .map(|q| u32::try_from(q.pools.len()).unwrap_or(u32::MAX))
                .max()
                .unwrap_or(0),
        }
    }
}

/// The current value of `field` in `rings`, and its maximum.
#[must_use]
pub fn ring_value(rings: &Rings, field: RingField) -> (Option<u32>, Option<u32>) {
    crate::knobs::desc(crate::plan::Knob::Ring(field)).pair_in_rings(rings)
}

#[cfg(test)]
mod tests;
