//! What a kernel refusal of a ring change teaches about the driver, and
//! the limits all past refusals of one ring add up to.

use super::rounding::DriverRounding;

const EINVAL: i32 = 22;
const ERANGE: i32 = 34;
const EOPNOTSUPP: i32 = 95;

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
