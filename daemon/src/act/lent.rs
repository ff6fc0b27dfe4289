//! What the loop lends the actuator for one call: the kernel, the policy,
//! the outputs' events, the clock and the state record ([`Record`], which
//! the loop implements and writes), and the blocks of knob values the
//! kernel reported ([`Seen`]).

use std::collections::BTreeMap;
use std::time::Duration;

use policy::Policy;
use policy::plan::Knob;
use policy::snapshot::{Channels, Device, DeviceId, Rings, Snapshot};

use crate::act::events::Events;
use crate::act::state::StateFile;
use crate::clock::Clock;

/// The state record as the actuator uses it. The loop owns the file and
/// writes it together with what else it keeps there (the engine's memory).
pub(crate) trait Record: Send {
    /// The record of originals and actions.
    fn file(&mut self) -> &mut StateFile;
    /// Writes the record; `false` (logged, counted) when it could not.
    fn save(&mut self) -> bool;
}

/// What the loop lends the actuator for one call; it keeps none of it.
pub(crate) struct Lent<'a, K, R> {
    pub kernel: &'a K,
    pub policy: &'a Policy,
    /// Where acting notes what the outputs count.
    pub events: &'a Events,
    pub clock: Clock,
    /// The loop's device map (what restore falls back to when sampling
    /// fails).
    pub devices: &'a BTreeMap<u32, Device>,
    /// The previous sample and when it was taken: the baseline of a change
    /// not decided on a finding window ([`Decision::baseline_or`]).
    pub prev: Option<(&'a Snapshot, Duration)>,
    /// The knobs another configuration owns (`coexist: defer`).
    pub deferred: &'a [(DeviceId, Knob)],
    pub record: R,
}

/// A block of knob values the kernel reported (notification or sample).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seen<'a> {
    Rings(&'a Rings),
    Channels(&'a Channels),
}
