//! The engine's entry points: [`decide`] and the [`Engine`] that decides
//! pass after pass, and the pass over the selected devices, each of them
//! one [`DeviceRun`].

use crate::reuse::Reused as _;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::memory::current_bytes;
use super::{DeviceRun, PlanCtx};
use crate::drivers;
use crate::observation::Observation;
use crate::plan::{Decision, Plan};
use crate::policy::{Mode, Policy};
use crate::state::{DeviceState, EngineState};

/// The engine: a pure function of (policy, state, observation).
///
/// Returns the plan (one decision per selected device, ordered by ifindex)
/// and the state to pass to the next call. Same input, same output.
#[must_use]
pub fn decide(policy: &Policy, state: &EngineState, obs: &Observation<'_>) -> (Plan, EngineState) {
    let mut next = EngineState {
        devices: state.devices.clone(),
    };
    let mut plan = Plan::default();
    Engine::default().decide_into(policy, &mut next, obs, &mut plan);
    (plan, next)
}

/// [`decide`] for a caller that decides pass after pass (the daemon, a
/// replay): the state is updated in place instead of copied, and the plan
/// is written over the last one, reusing its decisions' buffers, with the
/// engine's own buffers refilled instead of allocated. The same plan and
/// the same next state as [`decide`], whatever the buffers held before.
#[derive(Default)]
pub struct Engine {
    scratch: Scratch,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// Decides one pass: `plan` is overwritten with the plan [`decide`]
    /// would return and `state` becomes the state it would return.
    pub fn decide_into(
        &mut self,
        policy: &Policy,
        state: &mut EngineState,
        obs: &Observation<'_>,
        plan: &mut Plan,
    ) {
        run_into(policy, obs, &mut state.devices, plan, &mut self.scratch);
    }
}

/// The buffers of one pass, kept in the [`Engine`] so that the next pass
/// refills them instead of allocating: the selected devices and their
/// identity keys. Nothing in them outlives
/// a pass but capacity.
#[derive(Default)]
struct Scratch {
    /// The devices of the observation, by position, in ifindex order.
    order: Vec<usize>,
    /// Every selected device's identity key, one after another.
    keys: String,
    /// (position, mode, its key in `keys`), in ifindex order.
    selected: Vec<(usize, Mode, std::ops::Range<usize>)>,
    /// The keys of `selected`, sorted.
    sorted: Vec<std::ops::Range<usize>>,
}

/// Fills `plan` and leaves in `states` the next memory of exactly the
/// selected devices. A device's memory is updated where it lies; a key two
/// selected devices share (no bus address, no permanent MAC and one name
/// reused) makes each of them start from the memory before the plan, the
/// later one's result kept, as [`decide`] always did.
fn run_into(
    policy: &Policy,
    obs: &Observation<'_>,
    states: &mut BTreeMap<String, DeviceState>,
    plan: &mut Plan,
    scratch: &mut Scratch,
) {
    let Scratch {
        order,
        keys,
        selected,
        sorted,
    } = scratch;
    let devs = &obs.pass.current.devices;
    order.clear();
    order.extend(0..devs.len());
    // By ifindex, ties in snapshot order (what a stable sort gives,
    // without its buffer).
    order.sort_unstable_by_key(|&i| (devs[i].ifindex, i));
    // Every selected device's key, written into one buffer.
    keys.clear();
    selected.clear();
    for &i in order.iter() {
        if let Some(m) = policy.mode_for(&devs[i]) {
            let start = keys.len();
            // Writing to a String cannot fail.
            let _ = devs[i].id.write_key(keys);
            selected.push((i, m, start..keys.len()));
        }
    }
    order.let_go();
    keys.let_go();
    selected.let_go();
    let keys = &*keys;
    let key = |r: &std::ops::Range<usize>| &keys[r.clone()];
    sorted.clear();
    sorted.extend(selected.iter().map(|(_, _, r)| r.clone()));
    sorted.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    sorted.let_go();
    states.retain(|k, _| sorted.binary_search_by(|r| key(r).cmp(k)).is_ok());
    let shared: BTreeMap<&str, DeviceState> = sorted
        .windows(2)
        .filter(|w| key(&w[0]) == key(&w[1]))
        .map(|w| {
            let k = key(&w[0]);
            (k, states.get(k).cloned().unwrap_or_default())
        })
        .collect();
    let mut ctx = PlanCtx {
        // Saturating: a pool reporting inflight-mem near u64::MAX saturates
        // its device's figure, and two such devices must not wrap the sum.
        host_bytes: selected
            .iter()
            .map(|(i, _, _)| current_bytes(&devs[*i]))
            .fold(0, u64::saturating_add),
        ..PlanCtx::default()
    };
    plan.decisions.truncate(selected.len());
    plan.decisions.let_go();
    for (i, (at, mode, r)) in selected.iter().enumerate() {
        let dev = &devs[*at];
        let k = key(r);
        if i == plan.decisions.len() {
            plan.decisions.push(Decision::blank());
        }
        let out = &mut plan.decisions[i];
        let cost = crate::price::MissCost::of(dev);
        let run = DeviceRun {
            policy,
            th: policy.thresholds.priced(cost),
            cost,
            obs,
            dev,
            info: drivers::driver_info(dev),
            queues: obs.pass.deltas.queues(*at),
            scratch: std::cell::Cell::new(std::mem::take(&mut out.message)),
            window: std::cell::RefCell::new(None),
        };
        if let Some(before) = shared.get(k) {
            let mut ds = before.clone();
            run.run_into(*mode, &mut ds, &mut ctx, out);
            states.insert(k.to_owned(), ds);
        } else if let Some(ds) = states.get_mut(k) {
            run.run_into(*mode, ds, &mut ctx, out);
        } else {
            let mut ds = DeviceState::default();
            run.run_into(*mode, &mut ds, &mut ctx, out);
            states.insert(k.to_owned(), ds);
        }
    }
}

/// How many samples and how much time `pptune plan` needs for a finding:
/// one sample to start from, then `windows_for_finding` windows of
/// `window / interval` samples each.
#[must_use]
pub fn findings_needed(policy: &Policy) -> (u32, Duration) {
    let t = &policy.timing;
    let per_window = samples_per_window(policy);
    let samples = per_window
        .saturating_mul(t.windows_for_finding.max(1))
        .saturating_add(1);
    let time = t.interval.saturating_mul(samples.saturating_sub(1));
    (samples, time)
}

fn samples_per_window(policy: &Policy) -> u32 {
    let t = &policy.timing;
    let iv = t.interval.as_millis().max(1);
    u32::try_from(t.window.as_millis().div_ceil(iv))
        .unwrap_or(u32::MAX)
        .max(1)
}
