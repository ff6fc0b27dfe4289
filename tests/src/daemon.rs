//! The service loop (`pptune::service::run`) on the fake kernel, in-process:
//! the start-up every loop-level test repeats, written once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use policy::{Mode, Policy};
use pptune::act::rollout::HostId;
use pptune::act::state::StateStore;
use pptune::publish::control;
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

/// The loop's options for a test on `host`, exporting into `metrics` and
/// reloading on `reload`: notifications off, no state store, no control
/// socket, no recording, no other owners' files, a 30 s backoff base. A
/// test sets what it needs over them (`Options { store, ..options(…) }`).
#[must_use]
pub fn options(host: &str, metrics: Arc<Metrics>, reload: mpsc::UnboundedReceiver<()>) -> Options {
    Options {
        notifier: Notifier::off(),
        store: None,
        host_id: HostId {
            source: "test",
            value: host.into(),
        },
        control_socket: None,
        metrics,
        reload,
        backoff_base: Duration::from_secs(30),
        coexist: pptune::act::coexist::Roots::none(),
        recording: None,
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
        store,
        control_socket,
        ..options(host, Arc::clone(&metrics), rx)
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

/// The control-socket tests' start: the loop on the bursty fake kernel
/// under an enforcing policy of 200 ms passes, with a state store and its
/// control socket in `dir`, returned once it has grown the ring (so there
/// is an original to restore). Returns the kernel, the socket's path and
/// the loop.
///
/// # Panics
/// When the state store cannot be opened in `dir`, or no change is made
/// within 10 s.
#[allow(clippy::expect_used)] // a store that cannot be opened fails the test
pub async fn start_enforcing_with_control(dir: &Path) -> (Arc<FakeKernel>, PathBuf, Running) {
    let sock = control::socket_path(dir);
    let k = Arc::new(FakeKernel::bursty());
    let mut p = crate::fake::test_policy(Mode::Enforce);
    p.timing.interval = Duration::from_millis(200);
    p.timing.window = Duration::from_millis(200);
    let store = StateStore::open(dir, "b".into()).expect("state store in a fresh directory");
    let d = start(&k, p, Some(store), Some(sock.clone()));
    for _ in 0..100 {
        if k.ring() > 256 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(k.ring() > 256, "no change made");
    (k, sock, d)
}
