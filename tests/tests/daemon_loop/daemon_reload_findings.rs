//! Reloads by configuration management: every successful
//! reload reset the finding windows and the backoff, so a daemon reloaded
//! more often than a finding takes never acted. An unchanged policy now
//! keeps them; a changed one still starts afresh.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use pptune::act::state::StateStore;
use pptune_tests::daemon;
use pptune_tests::fake::{self, FakeKernel};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn periodic_reloads_of_an_unchanged_policy_let_findings_mature() {
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Enforce);
    p.timing.interval = Duration::from_secs(10);
    p.timing.window = Duration::from_secs(10);
    p.timing.windows_for_finding = 3;
    let d = daemon::start(
        &k,
        p,
        Some(StateStore::open(dir.path(), "b".into()).unwrap()),
        None,
    );
    // A reload every 15 s (a finding needs 3 windows of 10 s) for 5 min.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(15)).await;
        d.reload.send(()).unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        k.ring() > 256,
        "no change in 5 min of reloads every 15 s: {:?}",
        k.sets()
    );
    d.stop().await.unwrap();
}
