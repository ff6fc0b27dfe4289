//! The service loop (`pptune::service::run`) on the fake kernel, in-process:
//! the start-up every loop-level test repeats, written once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use policy::Policy;
use pptune::act::rollout::HostId;
use pptune::act::state::StateStore;
use pptune::publish::metrics::Metrics;
use pptune::publish::notify::Notifier;
use pptune::service::{Options, PolicyEngine, PolicyNotLoaded, PolicySource, RunError, run};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::fake::FakeKernel;

/// A policy source that loads the same policy every time.
#[derive(Debug)]
pub struct Fixed(pub Policy);

impl PolicySource for Fixed {
    fn load(&self) -> Result<Policy, PolicyNotLoaded> {
        Ok(self.0.clone())
    }
}

/// A running loop: send on `reload` for a SIGHUP, [`Running::stop`] for
/// SIGTERM.
#[derive(Debug)]
pub struct Running {
    pub reload: mpsc::UnboundedSender<()>,
    pub metrics: Arc<Metrics>,
    stop: oneshot::Sender<()>,
    pub task: JoinHandle<Result<(), RunError>>,
}

impl Running {
    /// Stops the loop and returns its result.
    ///
    /// # Panics
    /// When the loop's task panicked.
    pub async fn stop(self) -> Result<(), RunError> {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(r) => r,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

/// Starts the loop on `kernel` with `policy` (also what reloads load), the
/// given state store and control socket, and a 30 s backoff base.
#[must_use]
pub fn start(
    kernel: &Arc<FakeKernel>,
    policy: Policy,
    store: Option<StateStore>,
    control_socket: Option<PathBuf>,
) -> Running {
    let metrics = Arc::new(Metrics::new());
    start_on_host(kernel, policy, (store, control_socket), "h", metrics)
}

/// [`start`] with the host identity the rollout draws by, exporting into
/// `metrics` (which may be served before the loop starts).
#[must_use]
pub fn start_on_host(
    kernel: &Arc<FakeKernel>,
    policy: Policy,
    (store, control_socket): (Option<StateStore>, Option<PathBuf>),
    host: &str,
    metrics: Arc<Metrics>,
) -> Running {
    let (reload, rx) = mpsc::unbounded_channel();
    let opts = Options {
        notifier: Notifier::off(),
        store,
        host_id: HostId {
            source: "test",
            value: host.into(),
        },
        control_socket,
        metrics: Arc::clone(&metrics),
        reload: rx,
        backoff_base: Duration::from_secs(30),
        coexist: pptune::act::coexist::Roots::none(),
        recording: None,
    };
    let (stop, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(run(
        Arc::clone(kernel),
        PolicyEngine::default(),
        Box::new(Fixed(policy.clone())),
        policy,
        opts,
        async move {
            let _ = stop_rx.await;
        },
    ));
    Running {
        reload,
        metrics,
        stop,
        task,
    }
}
