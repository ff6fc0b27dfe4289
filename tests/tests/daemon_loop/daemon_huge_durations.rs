//! A policy whose durations are past `Instant`'s range must not crash the
//! loop. `pptune check` accepted `interval: 2600000000000000h`
//! and `pptune run` panicked "overflow when adding duration to instant" on
//! its first timer. The policy loader now bounds durations (config's
//! `hostile` tests); this test gives the loop such a policy directly, as a
//! library user could, and holds its timers to checked arithmetic.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use pptune::act::state::StateStore;
use pptune_tests::daemon;
use pptune_tests::fake::{self, FakeKernel};

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
    let d = daemon::start(
        &k,
        p,
        Some(StateStore::open(dir.path(), "b".into()).unwrap()),
        Some(pptune::publish::control::socket_path(dir.path())),
    );
    // First sample, a reload (re-arms every timer), a device event.
    tokio::time::sleep(Duration::from_millis(300)).await;
    d.reload.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!d.task.is_finished(), "the loop ended: {:?}", d.task.await);
    assert!(k.state.lock().unwrap().samples >= 1);
    d.stop().await.unwrap();
}
