//! The control socket: `pptune status`'s daemon view and a restore asked of
//! the running daemon (which holds the state lock).

// Test helpers may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use pptune::act::state::{StateError, StateStore};
use pptune::publish::control::{self, Reply, Request};
use pptune_tests::daemon;
use pptune_tests::fake::{self, FakeKernel};

#[tokio::test(flavor = "current_thread")]
async fn status_view_and_restore_through_the_running_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let (k, sock, d) = daemon::start_enforcing_with_control(dir.path()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let view = control::query(&sock).await.expect("daemon answers");
    let dev = view.devices.iter().find(|d| d.name == "eth0").unwrap();
    assert_eq!(dev.mode, "enforce");
    assert_eq!(dev.originals, vec![("ring.rx".to_owned(), 256)]);
    assert!(!dev.last_actions.is_empty());
    let text = pptune::publish::view::render(Some(&view), &[]);
    assert!(text.contains("eth0 [enforce]"), "{text}");
    assert!(text.contains("originals: ring.rx=256"), "{text}");
    // `pptune restore` cannot take the lock while the daemon runs…
    assert!(matches!(
        StateStore::open(dir.path(), "b".into()),
        Err(StateError::Locked { .. })
    ));
    // …so it asks the daemon.
    let reply = control::request(
        &sock,
        &Request::Restore {
            interfaces: vec!["eth0".into()],
        },
    )
    .await
    .unwrap();
    match reply {
        Reply::Restored { ok, lines } => assert!(ok, "{lines:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(k.ring(), 256);
    d.stop().await.unwrap();
    assert!(!sock.exists(), "control socket left behind");
    // Without a daemon: no view.
    assert!(control::query(&sock).await.is_none());
    assert!(pptune::publish::view::render(None, &[]).contains("not running"));
}

/// What `pptune status` says of the host comes from the same standing as
/// the log line and `pptune_rollout_enforcing` (`rollout::Standing`): a host
/// in the rollout fraction under an observe-only policy, or outside the
/// fraction under an enforcing one, never reads as enforcing — not in the
/// view's JSON, the rendered text, or the metric — and an enforcing host
/// reads as enforcing in all three.
#[tokio::test(flavor = "current_thread")]
async fn an_observe_only_host_never_reads_as_enforcing() {
    let outside = policy::policy::Rollout {
        fraction: 0.0,
        salt: "s".into(),
        holdout: 0.0,
    };
    // Every host held out.
    let held = policy::policy::Rollout {
        holdout: 1.0,
        ..outside.clone()
    };
    for (label, mode, rollout, enforcing, sentence, arm) in [
        (
            "observe policy",
            Mode::Observe,
            None,
            false,
            "no selector enforces: observing only",
            "observe",
        ),
        (
            "outside the rollout",
            Mode::Enforce,
            Some(outside.clone()),
            false,
            "observes only (outside the rollout fraction)",
            "observe",
        ),
        (
            "held out",
            Mode::Enforce,
            Some(held),
            false,
            "in the holdout",
            "holdout",
        ),
        (
            "enforcing",
            Mode::Enforce,
            None,
            true,
            "this host enforces",
            "enforce",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let sock = control::socket_path(dir.path());
        let k = Arc::new(FakeKernel::bursty());
        let mut p = fake::test_policy(mode);
        p.rollout = rollout;
        p.timing.interval = Duration::from_millis(200);
        p.timing.window = Duration::from_millis(200);
        let d = daemon::start(&k, p, None, Some(sock.clone()));
        let mut view = None;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            view = control::query(&sock).await;
            if view.as_ref().is_some_and(|v| !v.devices.is_empty()) {
                break;
            }
        }
        let view = view.unwrap_or_else(|| panic!("{label}: no daemon view"));
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["host_enforcing"], enforcing, "{label}: {json}");
        assert_eq!(json["arm"], arm, "{label}: {json}");
        assert!(view.rollout.contains(sentence), "{label}: {}", view.rollout);
        let text = pptune::publish::view::render(Some(&view), &[]);
        assert_eq!(
            text.contains("this host enforces"),
            enforcing,
            "{label}: {text}"
        );
        let metrics = d.metrics.encode().unwrap();
        let want = format!("pptune_rollout_enforcing {}\n", i64::from(enforcing));
        assert!(
            metrics.contains(&want),
            "{label}: no {want:?} in the metrics"
        );
        let want = format!("pptune_rollout_arm{{arm=\"{arm}\"}} 1\n");
        assert!(
            metrics.contains(&want),
            "{label}: no {want:?} in the metrics"
        );
        assert!(text.contains(&format!("arm: {arm}")), "{label}: {text}");
        d.stop().await.unwrap();
    }
}

/// `pptune status` reads the view the loop built at its last pass; ages in
/// it are computed when it is read. A loop wedged on the kernel (the fake's
/// sampling hook) stops building views: its last sample grows old and its
/// uptime goes on, where the view built at the last pass said "0 s ago".
#[tokio::test(flavor = "current_thread")]
async fn status_ages_grow_while_the_loop_is_wedged() {
    let dir = tempfile::tempdir().unwrap();
    let sock = control::socket_path(dir.path());
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Observe);
    p.timing.interval = Duration::from_millis(200);
    let running = daemon::start(&k, p, None, Some(sock.clone()));
    let mut first = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Some(v) = control::query(&sock).await
            && v.last_sample_age_s.is_some()
        {
            first = Some(v);
            break;
        }
    }
    let first = first.expect("a view with a sample");
    assert!(first.last_sample_age_s.unwrap() <= 1, "{first:?}");
    k.state.lock().unwrap().hang_sampling = true;
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let later = control::query(&sock).await.expect("the view");
    assert!(
        later.last_sample_age_s.unwrap() >= 2,
        "last sample {:?} s ago after 2.6 s of a wedged loop",
        later.last_sample_age_s
    );
    assert!(
        later.uptime_s >= first.uptime_s + 2,
        "{} -> {}",
        first.uptime_s,
        later.uptime_s
    );
    let text = pptune::publish::view::render(Some(&later), &[]);
    assert!(!text.contains("last sample 0s ago"), "{text}");
    k.state.lock().unwrap().hang_sampling = false;
    running.stop().await.unwrap();
}
