//! One ledger: a daemon tick computes its pool deltas once
//! (`policy::accounting::PassDeltas`), and the engine and the metrics read
//! that one pass; a resync sample outside the engine's cadence computes
//! none. Alone in its binary: the count is per process.

// Test helpers may unwrap too: a failed unwrap is a failed test. The
// counts are a handful, exact in an f64.
#![allow(clippy::unwrap_used, clippy::cast_precision_loss)]

use std::sync::Arc;
use std::time::Duration;

use policy::Mode;
use policy::accounting::PassDeltas;
use pptune::sample::KernelEvent;
use pptune_tests::daemon;
use pptune_tests::fake::{self, FakeKernel};

fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(start_paused = true)]
async fn a_tick_computes_its_deltas_once_and_a_resync_none() {
    let k = Arc::new(FakeKernel::bursty());
    let before = PassDeltas::computed();
    let running = daemon::start(&k, fake::test_policy(Mode::Observe), None, None);
    let metrics = Arc::clone(&running.metrics);
    let k2 = Arc::clone(&k);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        k2.emit(KernelEvent::Overflow { source: "netdev" });
    });
    tokio::time::sleep(Duration::from_secs(8)).await;
    running.stop().await.unwrap();
    let text = metrics.encode().unwrap();
    let ticks = metric(&text, "pptune_samples_total");
    let resyncs = metric(&text, "pptune_resyncs_total");
    let samples = k.state.lock().unwrap().samples;
    // The check sees what it judges: ticks ran, a resync sampled besides.
    assert!(ticks >= 5.0, "{text}");
    assert_eq!(resyncs, 1.0, "{text}");
    assert!(samples as f64 > ticks, "{samples} samples, {ticks} ticks");
    // The per-queue series were fed from the passes.
    assert!(
        metric(&text, "pptune_pool_alloc_fast_pages_total{") > 0.0,
        "{text}"
    );
    let passes = (PassDeltas::computed() - before) as f64;
    assert_eq!(
        passes, ticks,
        "pool deltas computed {passes} times in {ticks} ticks"
    );
}
