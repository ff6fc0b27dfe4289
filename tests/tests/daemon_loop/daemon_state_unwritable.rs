//! A state directory that cannot be written (full, read-only, gone): the
//! original of a knob must be on disk before the knob moves, so the daemon
//! keeps observing and does not act. Before this
//! test the write error was logged and the SET went ahead: a kill then
//! lost the original.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use pptune::act::state::StateStore;
use pptune_tests::daemon;
use pptune_tests::fake::{self, FakeKernel};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn no_change_without_the_original_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let store = StateStore::open(&run_dir, "b".into()).unwrap();
    // The directory goes away under the daemon: every write fails (as on
    // a full or read-only file system), the lock it holds stays valid.
    std::fs::remove_dir_all(&run_dir).unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Enforce);
    p.timing.interval = Duration::from_secs(10);
    p.timing.window = Duration::from_secs(10);
    let d = daemon::start(&k, p, Some(store), None);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(
        k.sets(),
        vec![],
        "a knob moved without its original on disk"
    );
    assert!(
        k.state.lock().unwrap().samples > 10,
        "the daemon stopped observing"
    );
    d.stop().await.unwrap();
}
