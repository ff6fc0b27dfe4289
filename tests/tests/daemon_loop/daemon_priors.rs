//! Fleet priors in the loop: a daemon whose policy has a prior for the
//! device's class sets the ring there first, once, through the actuator
//! (the real path: set, read back, evaluation), and then the rules go on.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use policy::policy::Prior;
use pptune_tests::daemon;
use pptune_tests::fake::{self, FakeKernel};

#[tokio::test(start_paused = true)]
async fn a_new_device_starts_at_its_class_prior_once() {
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Enforce);
    p.priors = vec![Prior {
        driver: "ice".into(),
        mtu: Some(1500),
        speed_mbps: Some(25_000),
        model: Some(fake::FAKE_MODEL.into()),
        firmware: None,
        ring_rx: 4096,
    }];
    let running = daemon::start(&k, p, None, None);
    let metrics = Arc::clone(&running.metrics);
    tokio::time::sleep(Duration::from_secs(30)).await;
    running.stop().await.unwrap();
    let sets = k.sets();
    // The prior covers the bursts (2048 pages): nothing more to do.
    assert_eq!(sets, [("ring.Rx".to_owned(), 4096)]);
    let text = metrics.encode().unwrap();
    assert!(
        text.contains("reason=\"fleet_prior\",mode=\"enforce\"} 1\n"),
        "{text}"
    );
}
