//! Series count and scrape bytes per `daemon.queue_metrics` setting, at
//! 2048 queues: the snapshot RECORDED in the VM (16 netdevsim devices × 128
//! queues, `benches/results/vm-snapshot-2048.json`) or
//! `$PPTUNE_BENCH_SNAPSHOT`, observed twice (the second tick adds a
//! per-queue varying number of recycle misses, so `worst` has a ranking).
//!
//! `cargo bench -p pptune --bench cardinality` prints one JSON line per
//! setting. Not a timing benchmark: sizes are exact for a given snapshot.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench file

use std::io::Write as _;

use policy::accounting::PassDeltas;
use policy::policy::QueueSelection;
use policy::snapshot::Snapshot;
use pptune::publish::http::openmetrics_to_text004;
use pptune::publish::metrics::Metrics;

const RECORDED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../benches/results/vm-snapshot-2048.json"
);

fn gzip_len(data: &[u8]) -> usize {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap().len()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let path = std::env::var("PPTUNE_BENCH_SNAPSHOT").unwrap_or_else(|_| RECORDED.to_owned());
    let first: Snapshot =
        serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
            .unwrap();
    let mut second = first.clone();
    second.taken_at_ms += 10_000;
    let mut queues = 0u64;
    for d in &mut second.devices {
        for q in &mut d.rx_queues {
            queues += 1;
            for p in &mut q.pools {
                if let Some(st) = &mut p.stats {
                    st.recycle_ring += 70_000;
                    st.recycle_ring_full += u64::from(q.id % 37) * 100;
                    st.alloc_fast += 70_000;
                    st.alloc_refill += 1_000;
                }
            }
        }
    }
    eprintln!("cardinality: {path}: {queues} RX queues");
    for (name, sel) in [
        ("all", QueueSelection::All),
        ("worst4", QueueSelection::Worst { count: 4 }),
        ("none", QueueSelection::None),
    ] {
        let m = Metrics::new();
        m.set_queue_series(sel);
        m.observe(&first, &PassDeltas::of(None, &first));
        m.observe(&second, &PassDeltas::of(Some(&first), &second));
        let om = m.encode().unwrap();
        let text = openmetrics_to_text004(&om);
        let series = text.lines().filter(|l| !l.starts_with('#')).count();
        let queue_series = text
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains(",queue=\""))
            .count();
        println!(
            "{{\"setting\":\"{name}\",\"queues\":{queues},\"series\":{series},\"per_queue_series\":{queue_series},\"openmetrics_bytes\":{},\"openmetrics_gzip_bytes\":{},\"text_bytes\":{},\"text_gzip_bytes\":{}}}",
            om.len(),
            gzip_len(om.as_bytes()),
            text.len(),
            gzip_len(text.as_bytes()),
        );
    }
}
