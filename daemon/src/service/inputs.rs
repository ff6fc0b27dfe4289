//! What the loop is given: the decision engine (and the memory it takes
//! over from the state record), where the policy comes
//! from (and how long a reload may take), and the rest of its options.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use policy::Policy;
use policy::engine::Observation;
use policy::plan::Plan;
use tokio::sync::mpsc;

use crate::act::rollout;
use crate::act::state::{StateFile, StateStore};
use crate::clock::unix_ms;
use crate::publish::metrics::Metrics;
use crate::publish::notify::Notifier;

/// The decision engine as the loop uses it. The production implementation
/// is the policy crate's pure `decide` with its state carried here; tests of
/// loop mechanics may script plans.
pub trait Engine: Send {
    fn decide(&mut self, policy: &Policy, obs: &Observation<'_>) -> Plan;
    /// [`Engine::decide`] into last pass's plan, which it may reuse.
    fn decide_into(&mut self, policy: &Policy, obs: &Observation<'_>, plan: &mut Plan) {
        *plan = self.decide(policy, obs);
    }
    /// Forget accumulated windows (after a reload).
    fn reset(&mut self);
    /// The memory to persist in the state file (`None`: nothing to keep).
    fn saved_state(&self) -> Option<policy::engine::EngineState> {
        None
    }
    /// Takes over the memory a previous run persisted.
    fn restore_state(&mut self, _state: policy::engine::EngineState) {}
}

/// The policy crate's engine, with its state carried between ticks.
#[derive(Debug, Default)]
pub struct PolicyEngine {
    pub state: policy::engine::EngineState,
    /// The same plan and next state as `decide`, without copying every
    /// device's memory each tick, with its buffers kept.
    engine: policy::engine::Engine,
}

impl Engine for PolicyEngine {
    fn decide(&mut self, policy: &Policy, obs: &Observation<'_>) -> Plan {
        let mut plan = Plan::default();
        self.engine
            .decide_into(policy, &mut self.state, obs, &mut plan);
        plan
    }

    fn decide_into(&mut self, policy: &Policy, obs: &Observation<'_>, plan: &mut Plan) {
        self.engine.decide_into(policy, &mut self.state, obs, plan);
    }

    fn reset(&mut self) {
        self.state = policy::engine::EngineState::default();
    }

    fn saved_state(&self) -> Option<policy::engine::EngineState> {
        Some(self.state.clone())
    }

    fn restore_state(&mut self, state: policy::engine::EngineState) {
        self.state = state;
    }
}

/// Where the policy comes from, re-read on SIGHUP.
///
/// A load reads files and parses them: it runs on a blocking thread with a
/// deadline ([`RELOAD_DEADLINE`]), never on the thread that serves
/// `/healthz`, signals and the watchdog, so no policy can stop those.
pub trait PolicySource: Send + Sync {
    /// The validated policy, or why there is none.
    fn load(&self) -> Result<Policy, PolicyNotLoaded>;
}

/// Why a policy load gave no policy: the problems the source found, or that
/// the load failed or ran late; rendered for a person (the log, `/readyz`
/// and the control socket's view show it as is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyNotLoaded(pub String);

/// How long a reload may take before the last good policy is kept (the
/// load itself goes on in its thread and its result is dropped). Loads are
/// bounded in size (config::MAX_POLICY_TOTAL_BYTES) and take milliseconds.
pub const RELOAD_DEADLINE: Duration = Duration::from_secs(10);

/// Everything the loop needs besides the kernel, the engine and the policy.
#[derive(Debug)]
pub struct Options {
    pub notifier: Notifier,
    /// The locked state record; `None` runs without one (tests of pure
    /// loop logic).
    pub store: Option<StateStore>,
    /// Host identity for the rollout.
    pub host_id: rollout::HostId,
    /// Control socket to bind, if any.
    pub control_socket: Option<PathBuf>,
    pub metrics: Arc<Metrics>,
    /// One message per SIGHUP.
    pub reload: mpsc::UnboundedReceiver<()>,
    /// First backoff after a failure; doubles per failure up to an hour.
    pub backoff_base: Duration,
    /// Where other owners of the knobs (systemd `.link`, NetworkManager,
    /// TuneD) keep their files.
    pub coexist: crate::act::coexist::Roots,
    /// The state directory for the recording and the change journal
    /// (docs/recording.md); `None` keeps neither.
    pub recording: Option<PathBuf>,
}

/// Picks up the engine's memory from the state record, and closes the
/// evaluations the previous run could not finish (`now`: the loop's clock).
pub(super) fn restore_engine<E: Engine>(state: &mut StateFile, engine: &mut E, now: Duration) {
    let closed = state.close_pending();
    if closed > 0 {
        tracing::info!(
            closed,
            "changes still under evaluation when the last run stopped: recorded as inconclusive"
        );
    }
    let Some(stored) = state.engine.take() else {
        return;
    };
    match stored.restore(now, unix_ms()) {
        Ok(restored) => {
            tracing::info!(
                devices = restored.devices.len(),
                "engine state restored: open windows, streaks and ring probes continue"
            );
            engine.restore_state(restored);
        }
        Err(why) => tracing::info!("ignoring the stored engine state: {why}"),
    }
}
