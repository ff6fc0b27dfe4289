//! One pass per tick: the loop's observer (`policy::observer::Observer`)
//! computes a tick's pool deltas once, and the engine and the metrics read
//! that one pass; a resync sample outside the engine's cadence makes none.

// Test helpers may unwrap too: a failed unwrap is a failed test. The
// counts are a handful, exact in an f64.
#![allow(clippy::unwrap_used, clippy::cast_precision_loss)]

use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use pptune::publish::control;
use pptune::sample::KernelEvent;
use pptune_tests::daemon;
use pptune_tests::exposition::prefix_sum;
use pptune_tests::fake::{self, FakeKernel};

#[tokio::test(start_paused = true)]
async fn a_tick_computes_its_deltas_once_and_a_resync_none() {
    let k = Arc::new(FakeKernel::bursty());
    let dir = tempfile::tempdir().unwrap();
    let sock = control::socket_path(dir.path());
    let running = daemon::start(
        &k,
        fake::test_policy(Mode::Observe),
        None,
        Some(sock.clone()),
    );
    let metrics = Arc::clone(&running.metrics);
    let k2 = Arc::clone(&k);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        k2.emit(KernelEvent::Overflow { source: "netdev" });
    });
    tokio::time::sleep(Duration::from_secs(8)).await;
    let view = control::query(&sock).await.expect("the daemon answers");
    let text = metrics.encode().unwrap();
    running.stop().await.unwrap();
    let ticks = prefix_sum(&text, "pptune_samples_total");
    let resyncs = prefix_sum(&text, "pptune_resyncs_total");
    let samples = k.state.lock().unwrap().samples;
    // The check sees what it judges: ticks ran, a resync sampled besides.
    assert!(ticks >= 5.0, "{text}");
    assert_eq!(resyncs, 1.0, "{text}");
    assert!(samples as f64 > ticks, "{samples} samples, {ticks} ticks");
    // The per-queue series were fed from the passes.
    assert!(
        prefix_sum(&text, "pptune_pool_alloc_fast_pages_total{") > 0.0,
        "{text}"
    );
    // The view is written at a pass's end, the sample count at its start:
    // a tick may be between the two when they are read.
    let passes = view.passes as f64;
    assert!(
        passes == ticks || passes + 1.0 == ticks,
        "{passes} passes in {ticks} ticks"
    );
}
