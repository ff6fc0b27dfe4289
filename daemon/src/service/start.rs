//! The service from its inputs to its stop: the state record read, the
//! control socket bound, the engine given back its memory, the loop run
//! until the shutdown, then the stop and the socket removed.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use policy::Policy;
use policy::observer::Observer;
use policy::plan::Plan;
use tokio::sync::mpsc;

use super::devices::DeviceMap;
use super::inputs::{Engine, Options, PolicySource, restore_engine};
use super::keep::{self, Acting};
use super::loading::Reloads;
use super::{Daemon, shadow};
use crate::act::actuator::Actuator;
use crate::act::events::Events;
use crate::act::rollout;
use crate::clock::Clock;
use crate::publish::control::{self, DaemonView, RestoreRequest};
use crate::publish::logging::DecisionLog;
use crate::sample::Kernel;

/// Why the loop stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the kernel's notification sockets closed")]
    EventsClosed,
    #[error(transparent)]
    Control(#[from] control::ControlError),
    #[error("the state record cannot be kept")]
    State(#[from] crate::act::state::StateError),
}

/// Runs the service until `shutdown` resolves; then finishes the action in
/// progress, keeps or restores per policy, writes state and returns.
pub async fn run<K: Kernel, E: Engine>(
    kernel: Arc<K>,
    mut engine: E,
    source: Box<dyn PolicySource>,
    policy: Policy,
    opts: Options,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let Options {
        notifier,
        store,
        host_id,
        control_socket,
        metrics,
        mut reload,
        backoff_base,
        coexist,
        recording,
    } = opts;
    let recording = recording.map(|dir| {
        crate::publish::recording::LiveRecording::open(
            &dir,
            policy.daemon.recording_max_bytes,
            &policy,
        )
    });
    let mut state = keep::load_record(store.as_ref())?;
    let (restore_tx, mut restore_rx) = mpsc::channel::<RestoreRequest>(4);
    let view = Arc::new(Mutex::new(DaemonView::default()));
    let control_task = match &control_socket {
        Some(path) => {
            let l = control::bind(path)?;
            Some(tokio::spawn(control::serve(
                l,
                Arc::clone(&view),
                restore_tx.clone(),
            )))
        }
        None => None,
    };
    let clock = Clock::start();
    restore_engine(&mut state, &mut engine, clock.now());
    let mut d = Daemon {
        kernel,
        engine,
        draw: rollout::draw(policy.rollout.as_ref(), &host_id.value),
        shadow: shadow::Shadow::start(&policy, &metrics),
        policy,
        reloads: Reloads::new(Arc::from(source)),
        policy_error: None,
        metrics,
        notifier,
        acting: Acting {
            actuator: Actuator::new(backoff_base, &state, clock),
            state,
            store,
            events: Events::default(),
        },
        devices: DeviceMap::default(),
        observer: Observer::default(),
        host_id,
        log: DecisionLog::new(Duration::from_secs(3600)),
        last_decisions: BTreeMap::new(),
        key: String::new(),
        plan: Plan::default(),
        view,
        ready: false,
        clock,
        last_sample: None,
        coexist: crate::act::coexist::Tracker::new(coexist),
        recording,
    };
    let hashes = d.metrics.policy_in_force(&d.policy);
    tracing::info!(policy_hash = %hashes.policy, shadow_hash = hashes.shadow.as_deref().unwrap_or(""), "policy loaded: {hashes}");
    d.export_rollout();
    let result = d.main_loop(&mut reload, &mut restore_rx, shutdown).await;
    d.stop().await;
    if let Some(t) = control_task {
        t.abort();
    }
    if let Some(p) = &control_socket {
        let _ = std::fs::remove_file(p);
    }
    result
}
