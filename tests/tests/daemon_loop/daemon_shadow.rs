//! The shadow policy (`shadow:`) on the fake kernel: a second engine on the
//! loop's samples that never acts, whatever its mode says, and exports
//! what it would do; its figures turn modelled once its ring differs from
//! the live one.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use policy::policy::Shadow;
use pptune_tests::daemon;
use pptune_tests::exposition::prefix_sum;
use pptune_tests::fake::{self, FakeKernel};

fn with_shadow(mut p: policy::Policy, shadow: policy::Policy) -> policy::Policy {
    p.shadow = Some(Shadow {
        path: "/etc/pptune/shadow.yaml".into(),
        policy: Some(Box::new(shadow)),
    });
    p
}

/// An enforcing shadow beside an observing policy: the bursty device's
/// ring is never set, while the shadow counts the growth it would have
/// made, targets a bigger ring and models its misses away.
#[tokio::test(start_paused = true)]
async fn an_enforcing_shadow_never_acts_and_says_what_it_would_do() {
    let k = Arc::new(FakeKernel::bursty());
    let p = with_shadow(
        fake::test_policy(Mode::Observe),
        fake::test_policy(Mode::Enforce),
    );
    let running = daemon::start(&k, p, None, None);
    let metrics = Arc::clone(&running.metrics);
    tokio::time::sleep(Duration::from_secs(60)).await;
    running.stop().await.unwrap();
    assert!(k.sets().is_empty(), "the shadow acted: {:?}", k.sets());
    assert_eq!(k.ring(), 256);
    let text = metrics.encode().unwrap();
    assert_eq!(prefix_sum(&text, "pptune_shadow_running "), 1.0, "{text}");
    let changes = prefix_sum(
        &text,
        "pptune_shadow_changes_total{device=\"eth0\",knob=\"ring.rx\"}",
    );
    assert!(changes >= 1.0, "{text}");
    let target = prefix_sum(
        &text,
        "pptune_shadow_target{device=\"eth0\",knob=\"ring.rx\"}",
    );
    assert!(target > 256.0, "shadow target {target}\n{text}");
    assert_eq!(
        prefix_sum(&text, "pptune_shadow_modelled{device=\"eth0\"}"),
        1.0,
        "{text}"
    );
    assert!(
        text.contains("pptune_shadow_recycle_miss_modelled_ratio{device=\"eth0\"}"),
        "{text}"
    );
    // The policy in force recommended, and did not act either.
    assert_eq!(prefix_sum(&text, "pptune_actions_total{"), 0.0, "{text}");
}

/// Both enforce: the policy in force acts as it would alone (the same
/// changes as a run without a shadow), and the shadow's counts are its own.
#[tokio::test(start_paused = true)]
async fn a_shadow_beside_an_enforcing_policy_changes_nothing_it_does() {
    let run = |shadow: bool| async move {
        let k = Arc::new(FakeKernel::bursty());
        let mut p = fake::test_policy(Mode::Enforce);
        if shadow {
            let mut s = fake::test_policy(Mode::Enforce);
            s.rings.max = 512;
            p = with_shadow(p, s);
        }
        let running = daemon::start(&k, p, None, None);
        let metrics = Arc::clone(&running.metrics);
        tokio::time::sleep(Duration::from_secs(60)).await;
        running.stop().await.unwrap();
        (k.sets(), metrics.encode().unwrap())
    };
    let (alone, _) = run(false).await;
    let (beside, text) = run(true).await;
    assert!(!alone.is_empty());
    assert_eq!(
        alone, beside,
        "the shadow changed what the policy in force did"
    );
    let target = prefix_sum(
        &text,
        "pptune_shadow_target{device=\"eth0\",knob=\"ring.rx\"}",
    );
    assert!(target <= 512.0, "the shadow's own limit: {target}\n{text}");
}

/// Without a shadow, no shadow series but `pptune_shadow_running 0`.
#[tokio::test(start_paused = true)]
async fn no_shadow_no_series() {
    let k = Arc::new(FakeKernel::bursty());
    let running = daemon::start(&k, fake::test_policy(Mode::Observe), None, None);
    let metrics = Arc::clone(&running.metrics);
    tokio::time::sleep(Duration::from_secs(5)).await;
    running.stop().await.unwrap();
    let text = metrics.encode().unwrap();
    assert!(text.contains("pptune_shadow_running 0\n"), "{text}");
    assert!(!text.contains("pptune_shadow_target{"), "{text}");
}
