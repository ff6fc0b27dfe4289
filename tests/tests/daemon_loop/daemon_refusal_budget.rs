//! A kernel that refuses every set for an hour: changes attempted per
//! hour stay within the policy budget. A refusal that teaches nothing (EBUSY: a busy
//! firmware, a device in recovery) puts the device in backoff and the
//! refused target stands for an hour (`policy::gates::HOUR`): refusals do
//! not count as changes for the budget, so this checks that what bounds
//! them keeps them within it (one attempt per hour here). The VM form is
//! `tests/tests/vm_faults.rs::a_kernel_that_refuses_every_set`.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use pptune_tests::daemon;
use pptune_tests::fake::{self, FakeKernel};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn refusals_for_two_hours_stay_within_the_hourly_budget() {
    let k = Arc::new(FakeKernel::bursty());
    k.state.lock().unwrap().refuse = Some((16, "device or resource busy".into()));
    let mut p = fake::test_policy(Mode::Enforce);
    p.limits.max_changes_per_hour = 4;
    let budget = p.limits.max_changes_per_hour as usize;
    let d = daemon::start(&k, p, None, None);
    let mut per_hour = Vec::new();
    for _ in 0..2 {
        let before = k.sets().len();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        per_hour.push(k.sets().len() - before);
    }
    d.stop().await.unwrap();
    println!("attempts per hour: {per_hour:?}: {:?}", k.sets());
    assert!(per_hour[0] >= 1, "the daemon never tried: {per_hour:?}");
    assert!(
        per_hour.iter().all(|n| *n <= budget),
        "attempts per hour {per_hour:?} exceed the policy's budget of {budget}: {:?}",
        k.sets()
    );
    assert_eq!(k.ring(), 256);
}
