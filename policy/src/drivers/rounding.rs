//! How a driver treats a requested ring size (rounds it, or refuses it),
//! and the policy's `rings.rounding` applied on top.

use crate::policy::Rounding;

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
