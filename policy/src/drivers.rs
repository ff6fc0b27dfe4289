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
use crate::policy::{DisruptionClass, Rounding};
use crate::snapshot::{Device, Rings};

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

const EINVAL: i32 = 22;
const ERANGE: i32 = 34;
const EOPNOTSUPP: i32 = 95;

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

/// How the driver treats a requested ring size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverRounding {
    /// Any value in range is used as asked.
    None,
    /// Rounded up to a power of two (mlx5, mlx4, mana, fbnic).
    UpPowerOfTwo,
    /// Must be a power of two, else EINVAL (gve, ionic, eea).
    PowerOfTwoOrRefuse,
    /// Aligned up to a multiple (ice/iavf 32, idpf 64).
    UpMultiple(u32),
    /// Aligned down to a multiple (enic 32).
    DownMultiple(u32),
    /// octeontx2: `Q_COUNT(Q_SIZE(x, 3))` = 16·4^⌊(⌊log2 x⌋ − 3) / 2⌋, so
    /// only 16, 64, 256, 1K, 4K … exist and [8·4^k, 32·4^k) → 16·4^k.
    QuarterPowers,
}

impl DriverRounding {
    /// What the driver sets for a request: `None` = it refuses (EINVAL).
    #[must_use]
    pub fn applied(self, req: u32) -> Option<u32> {
        match self {
            Self::None => Some(req),
            Self::UpPowerOfTwo => req.checked_next_power_of_two(),
            Self::PowerOfTwoOrRefuse => req.is_power_of_two().then_some(req),
            Self::UpMultiple(n) => req.checked_next_multiple_of(n.max(1)),
            Self::DownMultiple(n) => Some(req / n.max(1) * n.max(1)),
            Self::QuarterPowers => {
                if req < 8 {
                    return Some(16);
                }
                let k = (req.ilog2().saturating_sub(3)) / 2;
                16u32.checked_shl(2 * k)
            }
        }
    }

    /// Whether the driver keeps `v` as asked.
    #[must_use]
    pub fn keeps(self, v: u32) -> bool {
        self.applied(v) == Some(v)
    }

    /// The smallest value ≥ `v` the driver keeps as asked (what the planner
    /// requests so the plan shows the ring the driver will use).
    #[must_use]
    pub fn up(self, v: u32) -> u32 {
        match self {
            Self::None => v,
            Self::UpPowerOfTwo | Self::PowerOfTwoOrRefuse => {
                v.max(1).checked_next_power_of_two().unwrap_or(1 << 31)
            }
            Self::UpMultiple(n) | Self::DownMultiple(n) => {
                let n = n.max(1);
                v.checked_next_multiple_of(n).unwrap_or(u32::MAX / n * n)
            }
            Self::QuarterPowers => {
                let mut q: u32 = 16;
                while q < v {
                    match q.checked_mul(4) {
                        Some(n) => q = n,
                        None => return q,
                    }
                }
                q
            }
        }
    }

    /// The largest value ≤ `v` the driver keeps as asked (0 if none).
    #[must_use]
    pub fn down(self, v: u32) -> u32 {
        match self {
            Self::None => v,
            Self::UpPowerOfTwo | Self::PowerOfTwoOrRefuse => {
                if v == 0 {
                    0
                } else {
                    1 << v.ilog2()
                }
            }
            Self::UpMultiple(n) | Self::DownMultiple(n) => v / n.max(1) * n.max(1),
            Self::QuarterPowers => {
                if v < 16 {
                    return 0;
                }
                16 << (2 * ((v.ilog2() - 4) / 2))
            }
        }
    }

    /// The ring to ask for above `current`: `wanted` (the estimate with
    /// headroom) rounded up to a value the driver keeps, unless rounding
    /// down still reaches `needed` (the estimate without headroom) and is a
    /// growth: the headroom is a margin, not worth doubling a power-of-two
    /// ring for.
    #[must_use]
    pub fn target(self, wanted: u32, needed: u32, current: u32) -> u32 {
        let down = self.down(wanted);
        if down >= needed.max(1) && down > current {
            down
        } else {
            self.up(wanted)
        }
    }

    /// The driver's rule combined with the policy's `rings.rounding`: `auto`
    /// and `none` add nothing to the driver's own rule (which is not
    /// optional); `power_of_two` and `multiple_of_32` add theirs where the
    /// driver's values are not already such.
    #[must_use]
    pub fn with_policy(self, policy: Rounding) -> Self {
        match (policy, self) {
            (Rounding::Auto | Rounding::None, d) => d,
            (Rounding::PowerOfTwo, d @ (Self::PowerOfTwoOrRefuse | Self::QuarterPowers)) => d,
            (Rounding::PowerOfTwo, _) => Self::UpPowerOfTwo,
            (Rounding::MultipleOf32, Self::None) => Self::UpMultiple(32),
            (Rounding::MultipleOf32, d) => d,
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

/// The current value of `field` in `rings`, and its maximum.
#[must_use]
pub fn ring_value(rings: &Rings, field: RingField) -> (Option<u32>, Option<u32>) {
    crate::knobs::desc(crate::plan::Knob::Ring(field)).pair_in_rings(rings)
}

/// What a kernel refusal of a ring change teaches about the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LearnedRule {
    /// Only powers of two are accepted.
    PowerOfTwo,
    /// Nothing above this is accepted.
    Max(u32),
    /// Nothing below this is accepted.
    Min(u32),
    /// The ring cannot be changed at all (EOPNOTSUPP).
    NotSettable,
}

/// The rule a refusal of `from → to` (errno, extack or kernel message)
/// teaches, so the next estimate is not refused again for the same reason.
/// Without words, an EINVAL for a value that is not a power of two teaches
/// "powers of two" (gve, ionic and eea answer so without an extack);
/// otherwise it teaches that the value is out of range in the direction of
/// the change.
#[must_use]
pub fn learn_from_refusal(errno: i32, message: &str, from: u32, to: u32) -> Option<LearnedRule> {
    let m = message.to_ascii_lowercase();
    let out_of_range = || {
        if to > from {
            LearnedRule::Max(to - 1)
        } else {
            LearnedRule::Min(to + 1)
        }
    };
    if errno == EOPNOTSUPP || m.contains("not supported") {
        return Some(LearnedRule::NotSettable);
    }
    if errno != EINVAL && errno != ERANGE {
        return None;
    }
    if m.contains("power of 2") || m.contains("power of two") {
        return Some(LearnedRule::PowerOfTwo);
    }
    if m.contains("exceeds maximum") || m.contains("max") || m.contains("too large") {
        return Some(LearnedRule::Max(to.saturating_sub(1)));
    }
    if m.contains("less than")
        || m.contains("at least")
        || m.contains("min")
        || m.contains("too small")
    {
        return Some(LearnedRule::Min(to.saturating_add(1)));
    }
    if m.contains("range") {
        return Some(out_of_range());
    }
    if !to.is_power_of_two() {
        return Some(LearnedRule::PowerOfTwo);
    }
    Some(out_of_range())
}

/// The limits every past refusal of one ring taught, combined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Learned {
    pub power_of_two: bool,
    pub max: Option<u32>,
    pub min: Option<u32>,
    pub not_settable: bool,
}

impl Learned {
    /// Combine the rules of several refusals: `(errno, message, from, to)`.
    #[must_use]
    pub fn from_refusals<'a>(refusals: impl IntoIterator<Item = (i32, &'a str, u32, u32)>) -> Self {
        let mut l = Self::default();
        for (errno, msg, from, to) in refusals {
            match learn_from_refusal(errno, msg, from, to) {
                Some(LearnedRule::PowerOfTwo) => l.power_of_two = true,
                Some(LearnedRule::Max(m)) => l.max = Some(l.max.map_or(m, |x| x.min(m))),
                Some(LearnedRule::Min(m)) => l.min = Some(l.min.map_or(m, |x| x.max(m))),
                Some(LearnedRule::NotSettable) => l.not_settable = true,
                None => {}
            }
        }
        l
    }

    /// The driver rounding with what was learned applied.
    #[must_use]
    pub fn rounding(&self, r: DriverRounding) -> DriverRounding {
        match r {
            DriverRounding::None
            | DriverRounding::UpMultiple(_)
            | DriverRounding::DownMultiple(_)
                if self.power_of_two =>
            {
                DriverRounding::PowerOfTwoOrRefuse
            }
            r => r,
        }
    }
}

/// Round `v` up per the policy's `rings.rounding` alone (no driver).
#[must_use]
pub fn round_up(v: u32, rounding: Rounding) -> u32 {
    DriverRounding::None.with_policy(rounding).up(v)
}

/// Round `v` down per the policy's `rings.rounding` alone (no driver).
#[must_use]
pub fn round_down(v: u32, rounding: Rounding) -> u32 {
    DriverRounding::None.with_policy(rounding).down(v)
}

#[cfg(test)]
mod tests;
