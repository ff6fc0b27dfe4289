//! The policy file's enums as the policy's: the loader's words mapped
//! one to one.

use policy::policy as p;

use crate::raw::{RawClass, RawDisruption, RawMode, Weekday};

/// `disruption`: the classes by driver.
pub(super) fn disruption(d: &RawDisruption) -> p::Disruption {
    p::Disruption {
        drivers: d
            .drivers
            .iter()
            .map(|(k, v)| (k.clone(), class(*v)))
            .collect(),
        default_class: class(d.default_class),
        allowed_while_up: d.allowed_while_up.iter().map(|c| class(*c)).collect(),
    }
}

pub(super) fn mode(m: RawMode) -> p::Mode {
    match m {
        RawMode::Observe => p::Mode::Observe,
        RawMode::Enforce => p::Mode::Enforce,
    }
}

fn class(c: RawClass) -> p::DisruptionClass {
    match c {
        RawClass::Brief => p::DisruptionClass::Brief,
        RawClass::Restart => p::DisruptionClass::Restart,
        RawClass::LinkDown => p::DisruptionClass::LinkDown,
    }
}

pub(super) fn weekday(d: Weekday) -> u8 {
    match d {
        Weekday::Mon => 0,
        Weekday::Tue => 1,
        Weekday::Wed => 2,
        Weekday::Thu => 3,
        Weekday::Fri => 4,
        Weekday::Sat => 5,
        Weekday::Sun => 6,
    }
}
