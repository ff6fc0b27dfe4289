//! Driver knowledge: which ring field sizes the page pool, by what factor,
//! how the driver rounds a requested size, and where that is not known.
//!
//! Source: kernel-interfaces.md §4 (Linux 7.3 driver reading). Where the
//! mapping is unknown the engine still acts (assuming 1×) and says so; the
//! closed loop then learns from outcomes: a change that did not move the
//! signal is recorded as `Ineffective` and stops further growth.

use crate::plan::RingField;
use crate::policy::Rounding;
use crate::snapshot::{Device, Rings};

/// The page_pool ring clamp: `page_pool_init()` clamps `pool_size` to 16384
/// on 6.18+ (older kernels failed with E2BIG above 32768). Growing the RX
/// ring so the driver asks for more than this buys nothing.
pub const POOL_RING_CLAMP: u32 = 16384;

/// `PP_ALLOC_CACHE_SIZE` on 4 KiB pages: pages an idle pool can hold beyond
/// its ring.
pub const POOL_CACHE_PAGES: u64 = 128;

/// Page bytes assumed when `inflight_mem / inflight` cannot be observed.
pub const DEFAULT_PAGE_BYTES: u64 = 4096;

/// How the driver derives `pool_size` from its rings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PoolMapping {
    /// `pool_size ≈ factor × ring` (plus `extra`, the ring fields the engine
    /// does not change, e.g. fbnic's rx-mini when rx-jumbo is tuned).
    Proportional { factor: f64, extra: u32 },
    /// The pool size does not follow the ring (netdevsim 256, virtio_net
    /// keeps its probe-time size): resizing the ring is pointless.
    Fixed,
    /// Not known for this driver: assume 1× and let outcomes tell.
    Unknown,
}

/// Driver facts the engine needs for one device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverInfo {
    /// The ring field pptune changes for this driver.
    pub field: RingField,
    pub mapping: PoolMapping,
    /// How the driver rounds a requested size.
    pub rounding: Rounding,
    /// Smallest ring the driver accepts.
    pub driver_min: u32,
    /// A short note for messages ("ice: pool = rx ring").
    pub note: &'static str,
}

impl DriverInfo {
    /// Pool entries a ring value gives (before the 16384 clamp).
    #[must_use]
    pub fn pool_for_ring(&self, ring: u32) -> Option<u32> {
        match self.mapping {
            PoolMapping::Proportional { factor, extra } => {
                Some(scale(ring, factor).saturating_add(extra))
            }
            PoolMapping::Unknown => Some(ring),
            PoolMapping::Fixed => None,
        }
    }

    /// Smallest ring value whose pool reaches `pool` entries (inverse of
    /// [`Self::pool_for_ring`]), before rounding.
    #[must_use]
    pub fn ring_for_pool(&self, pool: u32) -> Option<u32> {
        match self.mapping {
            PoolMapping::Proportional { factor, extra } => {
                Some(unscale(pool.saturating_sub(extra), factor))
            }
            PoolMapping::Unknown => Some(pool),
            PoolMapping::Fixed => None,
        }
    }

    /// The factor as a number for evidence (0 = fixed, 1 = unknown/1×).
    #[must_use]
    pub fn factor(&self) -> f64 {
        match self.mapping {
            PoolMapping::Proportional { factor, .. } => factor,
            PoolMapping::Unknown => 1.0,
            PoolMapping::Fixed => 0.0,
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

/// Driver knowledge for `dev` (kernel-interfaces.md §4).
#[must_use]
pub fn driver_info(dev: &Device) -> DriverInfo {
    let driver = dev.driver.as_deref().unwrap_or("");
    let rings = dev.rings.available().copied().unwrap_or_default();
    let p = |factor: f64| PoolMapping::Proportional { factor, extra: 0 };
    match driver {
        "ice" | "idpf" | "iavf" => DriverInfo {
            field: RingField::Rx,
            mapping: p(1.0),
            rounding: Rounding::MultipleOf32,
            driver_min: 64,
            note: "libeth: pool = rx ring, aligned to 32",
        },
        "gve" => DriverInfo {
            field: RingField::Rx,
            mapping: p(4.0),
            rounding: Rounding::None,
            driver_min: 1,
            note: "gve DQO: pool = 4 x rx ring (may keep the old size until the next reconfiguration)",
        },
        "bnxt_en" => DriverInfo {
            field: RingField::Rx,
            mapping: p(4.0),
            rounding: Rounding::None,
            driver_min: 1,
            note: "bnxt: pool follows the aggregation ring, about 4 x rx (capped near 8191)",
        },
        "mlx5_core" => DriverInfo {
            field: RingField::Rx,
            mapping: p(mlx5_factor(dev.mtu)),
            rounding: Rounding::PowerOfTwo,
            driver_min: 64,
            note: "mlx5: pool proportional to rx ring, factor from RQ mode and MTU (estimated), power of two",
        },
        "fbnic" => DriverInfo {
            field: RingField::RxJumbo,
            mapping: PoolMapping::Proportional {
                factor: 1.0,
                extra: rings.rx_mini.unwrap_or(0),
            },
            rounding: Rounding::PowerOfTwo,
            driver_min: 1,
            note: "fbnic: pool = rx-mini + rx-jumbo, power of two, capped at 32768",
        },
        "netdevsim" => DriverInfo {
            field: RingField::Rx,
            mapping: PoolMapping::Fixed,
            rounding: Rounding::None,
            driver_min: 1,
            note: "netdevsim: pool fixed at 256, the ring only stores the number",
        },
        "virtio_net" => DriverInfo {
            field: RingField::Rx,
            mapping: PoolMapping::Fixed,
            rounding: Rounding::None,
            driver_min: 1,
            note: "virtio_net: pool keeps its probe-time vring size",
        },
        _ => DriverInfo {
            field: RingField::Rx,
            mapping: PoolMapping::Unknown,
            rounding: Rounding::None,
            driver_min: 1,
            note: "ring-to-pool mapping unknown for this driver: assumed 1x, outcomes will tell",
        },
    }
}

/// mlx5's pool per ring entry: one page per frame in legacy (cyclic) RQ for
/// MTUs that fit a page, more for jumbo MTUs; striding RQ uses
/// pages_per_wqe per WQE. Without the RQ mode in the snapshot, estimate from
/// the MTU: pages a frame spans (at least 1).
fn mlx5_factor(mtu: Option<u32>) -> f64 {
    let mtu = f64::from(mtu.unwrap_or(1500));
    // 256 bytes of headroom + skb_shared_info, as mlx5e_rx_get_linear_sz_skb.
    ((mtu + 256.0 + 320.0) / 4096.0).ceil().max(1.0)
}

/// The current value of `field` in `rings`, and its maximum.
#[must_use]
pub fn ring_value(rings: &Rings, field: RingField) -> (Option<u32>, Option<u32>) {
    match field {
        RingField::Rx => (rings.rx, rings.rx_max),
        RingField::RxMini => (rings.rx_mini, rings.rx_mini_max),
        RingField::RxJumbo => (rings.rx_jumbo, rings.rx_jumbo_max),
    }
}

/// Round `v` up per `rounding` (policy `auto` uses the driver's rule).
#[must_use]
pub fn round_up(v: u32, rounding: Rounding) -> u32 {
    match rounding {
        Rounding::PowerOfTwo => v.checked_next_power_of_two().unwrap_or(1 << 31),
        Rounding::MultipleOf32 => v.div_ceil(32).saturating_mul(32),
        Rounding::None | Rounding::Auto => v,
    }
}

/// Round `v` down per `rounding` (used when a limit cuts a rounded target).
#[must_use]
pub fn round_down(v: u32, rounding: Rounding) -> u32 {
    match rounding {
        Rounding::PowerOfTwo => {
            if v == 0 {
                0
            } else {
                1 << (31 - v.leading_zeros())
            }
        }
        Rounding::MultipleOf32 => v / 32 * 32,
        Rounding::None | Rounding::Auto => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Availability;

    fn dev(driver: &str, mtu: u32) -> Device {
        Device {
            driver: Some(driver.into()),
            mtu: Some(mtu),
            rings: Availability::Available(Rings {
                rx_mini: Some(256),
                ..Rings::default()
            }),
            ..Device::default()
        }
    }

    #[test]
    fn mapping_table() {
        // (driver, mtu, ring, expected pool)
        let cases: [(&str, u32, u32, Option<u32>); 8] = [
            ("ice", 1500, 2048, Some(2048)),
            ("idpf", 1500, 512, Some(512)),
            ("gve", 1500, 1024, Some(4096)),
            ("bnxt_en", 1500, 511, Some(2044)),
            ("mlx5_core", 1500, 1024, Some(1024)),
            ("mlx5_core", 9000, 1024, Some(3072)),
            ("fbnic", 1500, 1024, Some(1280)),
            ("netdevsim", 1500, 1024, None),
        ];
        for (drv, mtu, ring, pool) in cases {
            let info = driver_info(&dev(drv, mtu));
            assert_eq!(info.pool_for_ring(ring), pool, "{drv} mtu {mtu}");
            if let Some(pool) = pool {
                assert_eq!(info.ring_for_pool(pool), Some(ring), "{drv} inverse");
            }
        }
        assert_eq!(driver_info(&dev("fbnic", 1500)).field, RingField::RxJumbo);
        assert_eq!(
            driver_info(&dev("weird", 1500)).mapping,
            PoolMapping::Unknown
        );
    }

    #[test]
    fn rounding_table() {
        let cases = [
            (1000, Rounding::PowerOfTwo, 1024, 512),
            (1024, Rounding::PowerOfTwo, 1024, 1024),
            (1000, Rounding::MultipleOf32, 1024, 992),
            (64, Rounding::MultipleOf32, 64, 64),
            (1000, Rounding::None, 1000, 1000),
        ];
        for (v, r, up, down) in cases {
            assert_eq!(round_up(v, r), up, "{v} {r:?} up");
            assert_eq!(round_down(v, r), down, "{v} {r:?} down");
        }
    }
}
