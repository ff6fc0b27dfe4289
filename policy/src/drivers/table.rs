//! The driver table: docs/drivers.md's rows, one function a driver whose
//! facts depend on its mode, and the page arithmetic they cite.

use super::rounding::DriverRounding;
use super::{DriverInfo, DriverMode, POOL_RING_DEFAULT, PoolMapping, PoolResize};
use crate::plan::RingField;
use crate::policy::DisruptionClass;
use crate::snapshot::Device;

/// Driver knowledge for `dev` in the mode it shows (docs/drivers.md).
#[must_use]
pub fn driver_info(dev: &Device) -> DriverInfo {
    let rx_mini = dev.rings.available().and_then(|r| r.rx_mini).unwrap_or(0);
    driver_row(
        dev.driver.as_deref().unwrap_or(""),
        &DriverMode::of(dev),
        rx_mini,
    )
}

/// The drivers [`driver_row`] has a row for, by the name `ethtool -i`
/// gives: docs/drivers.md's table, in its order. The policy's check warns
/// about a selector's driver pattern that matches none of them.
pub const KNOWN_DRIVERS: &[&str] = &[
    "ice",
    "iavf",
    "idpf",
    "gve",
    "bnxt_en",
    "mlx5_core",
    "mlx4_en",
    "mana",
    "ionic",
    "eea",
    "rvu_nicpf",
    "rvu_nicvf",
    "rvu-nicvf",
    "enic",
    "fbnic",
    "virtio_net",
    "netdevsim",
];

/// One row of docs/drivers.md: the driver's facts in `mode`.
#[must_use]
#[allow(clippy::too_many_lines)]
pub fn driver_row(driver: &str, mode: &DriverMode, rx_mini: u32) -> DriverInfo {
    use DisruptionClass::Restart;
    use DriverRounding as R;
    let p = PoolMapping::times;
    let mtu = mode.mtu.unwrap_or(1500);
    match driver {
        "ice" => DriverInfo::row(p(1.0), R::UpMultiple(32), "ice (libeth): pool = rx ring, aligned up to 32")
            .min(64)
            .class(Restart),
        "iavf" => DriverInfo::row(p(1.0), R::UpMultiple(32), "iavf (libeth): pool = rx ring, aligned up to 32")
            .min(64),
        "idpf" => idpf_row(mode),
        "gve" => gve_row(),
        "bnxt_en" => bnxt_row(mode),
        "mlx5_core" => mlx5_row(mtu),
        "mlx4_en" => DriverInfo::row(
            p(f64::from(mlx4_pages_per_frame(mtu))),
            R::UpPowerOfTwo,
            "mlx4: pool = rx x pages per frame, ring a power of two",
        )
        .min(256)
        .class(Restart),
        "mana" => DriverInfo::row(
            PoolMapping::Proportional {
                factor: 1.0 / f64::from(mana_frag_count(mtu)),
                extra: 1,
                floor: 0,
                cap: u32::MAX,
            },
            R::UpPowerOfTwo,
            "mana: pool = rx / buffers per page + 1, ring rounded up to a power of two; each change detaches and re-attaches the port",
        )
        .min(128)
        .class(Restart),
        "ionic" => DriverInfo::row(p(1.0), R::PowerOfTwoOrRefuse, "ionic: pool = rx ring, a power of two or EINVAL")
            .min(64)
            .class(Restart),
        "eea" => DriverInfo::row(p(1.0), R::PowerOfTwoOrRefuse, "eea: pool = rx ring, a power of two or EINVAL")
            .min(64)
            .class(Restart),
        "rvu_nicpf" | "rvu_nicvf" | "rvu-nicvf" => DriverInfo::row(
            PoolMapping::Proportional {
                factor: 1.0,
                extra: 0,
                floor: 0,
                cap: 2048,
            },
            R::QuarterPowers,
            "octeontx2: pool = min(2048, rx), ring only 16, 64, 256, 1K, 4K …",
        )
        .min(16)
        .class(Restart),
        "enic" => DriverInfo::row(p(1.0), R::DownMultiple(32), "enic: pool = rx ring, aligned down to 32; every change closes and opens the device")
            .min(64)
            .class(Restart),
        "fbnic" => fbnic_row(rx_mini),
        "netdevsim" => netdevsim_row(),
        "virtio_net" => virtio_net_row(),
        _ => unknown_row(),
    }
}

/// [`driver_row`]'s row for idpf: split or single queue model.
fn idpf_row(mode: &DriverMode) -> DriverInfo {
    use DisruptionClass::Restart;
    use DriverRounding as R;
    let p = PoolMapping::times;
    // Split queue model: two buffer queues per RX group, each rx/2
    // and each with its own pool; single queue: one pool = rx.
    let split = mode.pools_per_queue != 1;
    let mut row = if split {
        DriverInfo::row(
            p(0.5),
            R::UpMultiple(64),
            "idpf split queue: two buffer queues of rx/2, one pool each; rx aligned up to 64",
        )
    } else {
        DriverInfo::row(
            p(1.0),
            R::UpMultiple(64),
            "idpf single queue: pool = rx ring, aligned up to 64",
        )
    };
    row.pools_per_queue = if split {
        mode.pools_per_queue.max(2)
    } else {
        1
    };
    row.mode_known = mode.pools_per_queue > 0;
    row.min(64).class(Restart)
}

/// [`driver_row`]'s row for gve DQO RDA.
fn gve_row() -> DriverInfo {
    use DisruptionClass::Restart;
    use DriverRounding as R;
    let p = PoolMapping::times;
    let mut row = DriverInfo::row(
        p(4.0),
        R::PowerOfTwoOrRefuse,
        "gve DQO RDA: pool = 4 x rx ring, ring a power of two; a live change sizes the new pool from the old ring",
    );
    row.resize = PoolResize::NextReconfiguration;
    row.class(Restart)
}

/// [`driver_row`]'s row for bnxt_en: with or without aggregation rings.
fn bnxt_row(mode: &DriverMode) -> DriverInfo {
    use DisruptionClass::Restart;
    use DriverRounding as R;
    match (mode.rx_jumbo, mode.rx) {
        (Some(agg), Some(rx)) if agg > 0 && rx > 0 => {
            // The agg ring is rx × agg_factor (4 with TPA/HDS, or the
            // MTU's page count), capped at 8191; the pool is its fill.
            #[allow(clippy::cast_precision_loss)]
            let factor = (f64::from(agg) / f64::from(rx)).round().max(1.0);
            DriverInfo::row(
            PoolMapping::Proportional {
                factor,
                extra: 0,
                floor: 0,
                cap: 8191,
            },
            R::None,
            "bnxt with aggregation rings: pool = agg ring = rx x agg factor (read from rx-jumbo), capped at 8191",
        )
        .class(Restart)
        }
        _ => {
            let mut row = DriverInfo::row(
                PoolMapping::Fixed {
                    entries: Some(POOL_RING_DEFAULT),
                },
                R::None,
                "bnxt without aggregation rings: pool_size 0, so the page_pool default of 1024 whatever the ring",
            );
            row.resize = PoolResize::Never;
            row.mode_known = mode.rx_jumbo.is_some() || mode.rx.is_some();
            row.class(Restart)
        }
    }
}

/// [`driver_row`]'s row for mlx5_core (striding RQ assumed).
fn mlx5_row(mtu: u32) -> DriverInfo {
    use DisruptionClass::Brief;
    use DriverRounding as R;
    // The RQ type is an ethtool private flag (rx_striding_rq) that
    // pptune does not read yet: assume striding, the default where
    // the device supports it, and say so.
    let mut row = DriverInfo::row(
        PoolMapping::Proportional {
            factor: mlx5_striding_factor(mtu, false),
            extra: 0,
            floor: 256,
            cap: u32::MAX,
        },
        R::UpPowerOfTwo,
        "mlx5 striding RQ (assumed): pool = rx x stride/page (0.5 at MTU 1500, 4 at 9000), floor 256; ring a power of two",
    );
    row.mode_known = false;
    row.min(16).class(Brief)
}

/// [`driver_row`]'s row for fbnic: the pool follows rx-jumbo.
fn fbnic_row(rx_mini: u32) -> DriverInfo {
    use DisruptionClass::Restart;
    use DriverRounding as R;
    let mut row = DriverInfo::row(
        PoolMapping::Proportional {
            factor: 1.0,
            extra: rx_mini,
            floor: 0,
            cap: u32::MAX,
        },
        R::UpPowerOfTwo,
        "fbnic: pool = rx-mini + rx-jumbo, power of two",
    );
    row.field = RingField::RxJumbo;
    row.class(Restart)
}

/// [`driver_row`]'s row for netdevsim.
fn netdevsim_row() -> DriverInfo {
    use DriverRounding as R;
    let mut row = DriverInfo::row(
        PoolMapping::Fixed { entries: Some(256) },
        R::None,
        "netdevsim: pool fixed at 256, the ring only stores the number",
    );
    row.resize = PoolResize::Never;
    row
}

/// [`driver_row`]'s row for virtio_net.
fn virtio_net_row() -> DriverInfo {
    use DriverRounding as R;
    let mut row = DriverInfo::row(
        PoolMapping::Fixed { entries: None },
        R::None,
        "virtio_net: pool keeps its probe-time vring size",
    );
    row.resize = PoolResize::Never;
    row
}

/// [`driver_row`]'s row for a driver docs/drivers.md does not know.
fn unknown_row() -> DriverInfo {
    use DriverRounding as R;
    let mut row = DriverInfo::row(
        PoolMapping::Unknown,
        R::None,
        "ring-to-pool mapping unknown for this driver: assumed 1x, outcomes will tell",
    );
    row.mode_known = false;
    row
}

/// mlx5 striding RQ: pages per ring entry = the linear stride
/// (`roundup_pow_of_two(MLX5_SKB_FRAG_SZ(headroom + hw_mtu))`) over the
/// page: 0.5 at MTU 1500, 1 with XDP, 4 at MTU 9000.
#[must_use]
pub fn mlx5_striding_factor(mtu: u32, xdp: bool) -> f64 {
    // hw_mtu = MTU + ETH_HLEN + VLAN_HLEN + ETH_FCS_LEN; headroom =
    // NET_SKB_PAD (64) or XDP_PACKET_HEADROOM (256); + skb_shared_info (320).
    let headroom = if xdp { 256 } else { 64 };
    let frag = (mtu + 22 + headroom).next_multiple_of(64) + 320;
    f64::from(frag.next_power_of_two()) / 4096.0
}

/// mlx4: `DIV_ROUND_UP(rx_skb_size, PAGE_SIZE)` with
/// `rx_skb_size = MTU + ETH_HLEN + 2 × VLAN_HLEN`.
#[must_use]
pub fn mlx4_pages_per_frame(mtu: u32) -> u32 {
    (mtu + 14 + 8).div_ceil(4096).max(1)
}

/// mana: buffers per page, `PAGE_SIZE / buf_size` when two fit, else 1.
/// The buffer is `MTU + skb_shared_info + ETH_HLEN + headroom`, aligned to
/// 64; the headroom (`LL_RESERVED_SPACE`) is taken as 64 (estimated).
#[must_use]
pub fn mana_frag_count(mtu: u32) -> u32 {
    let buf = (mtu + 320 + 14 + 64).next_multiple_of(64);
    let n = 4096 / buf.max(1);
    if n >= 2 { n } else { 1 }
}
