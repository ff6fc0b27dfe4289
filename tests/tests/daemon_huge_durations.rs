//! A policy whose durations are past `Instant`'s range must not crash the
//! loop (issue 14). `pptune check` accepted `interval: 2600000000000000h`
//! and `pptune run` panicked "overflow when adding duration to instant" on
//! its first timer. The policy loader now bounds durations (config's
//! `hostile` tests); this test gives the loop such a policy directly, as a
//! library user could, and holds its timers to checked arithmetic.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use policy::{Mode, Policy};
use pptune::metrics::Metrics;
use pptune::notify::Notifier;
use pptune::rollout::HostId;
use pptune::run::{Options, PolicyEngine, PolicySource, run};
use pptune::state::StateStore;
use pptune_tests::fake::{self, FakeKernel};
use tokio::sync::mpsc;

struct Fixed(Policy);

impl PolicySource for Fixed {
    fn load(&self) -> Result<Policy, String> {
        Ok(self.0.clone())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn durations_past_instant_range_do_not_panic_the_loop() {
    let huge = Duration::from_secs(2_600_000_000_000_000 * 3600);
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Enforce);
    p.timing.interval = huge;
    p.timing.window = huge;
    p.timing.calm_before_shrink = huge;
    p.timing.cooldown = huge;
    p.timing.evaluation = huge;
    let (reload_tx, rx) = mpsc::unbounded_channel();
    let opts = Options {
        notifier: Notifier::off(),
        store: Some(StateStore::open(dir.path(), "b".into()).unwrap()),
        host_id: HostId {
            source: "test",
            value: "h".into(),
        },
        control_socket: Some(pptune::control::socket_path(dir.path())),
        metrics: Arc::new(Metrics::new()),
        reload: rx,
        backoff_base: Duration::from_secs(30),
        coexist: pptune::coexist::Roots::none(),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(run(
        Arc::clone(&k),
        PolicyEngine::default(),
        Box::new(Fixed(p.clone())),
        p,
        opts,
        async move {
            let _ = stop_rx.await;
        },
    ));
    // First sample, a reload (re-arms every timer), a device event.
    tokio::time::sleep(Duration::from_millis(300)).await;
    reload_tx.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!daemon.is_finished(), "the loop ended: {:?}", daemon.await);
    assert!(k.state.lock().unwrap().samples >= 1);
    stop_tx.send(()).unwrap();
    daemon.await.unwrap().unwrap();
}
