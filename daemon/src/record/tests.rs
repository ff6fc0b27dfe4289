#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::time::Duration;

use policy::snapshot::{
    Availability, Capabilities, Device, DeviceId, Pool, PoolStats, Rings, RxQueue, Snapshot,
};

use super::format::{Coder, Pass};
use super::*;

fn snap(pass: u64, pools: u64) -> Snapshot {
    let queue = |q: u64| RxQueue {
        id: u32::try_from(q).unwrap(),
        napi_id: Some(u32::try_from(100 + q).unwrap()),
        provider: None,
        qstats: None,
        pools: vec![Pool {
            id: q + 1,
            ifindex: Some(2),
            napi_id: Some(100 + q),
            inflight: Some(512 + pass),
            inflight_mem: Some((512 + pass) * 4096),
            detach_time: None,
            provider: None,
            stats: Some(PoolStats {
                alloc_fast: 1000 * pass + q,
                recycle_ring: 900 * pass,
                recycle_ring_full: 7 * pass * (q % 3),
                ..PoolStats::default()
            }),
        }],
    };
    Snapshot {
        taken_at_ms: pass * 10_000,
        capabilities: Capabilities {
            kernel_release: "7.3.0".into(),
            page_pool_stats: true,
            ..Capabilities::default()
        },
        devices: vec![Device {
            ifindex: 2,
            name: "eth0".into(),
            id: DeviceId {
                bus: Some("pci".into()),
                parent: Some("0000:3b:00.0".into()),
                perm_addr: None,
                name_fallback: None,
            },
            rings: Availability::Available(Rings {
                rx: Some(if pass < 3 { 256 } else { 1024 }),
                rx_max: Some(8192),
                ..Rings::default()
            }),
            rx_queues: (0..pools).map(queue).collect(),
            ..Device::default()
        }],
        orphan_pools: Vec::new(),
    }
}

fn pass_rec(i: u64) -> impl FnOnce(format::SnapRec) -> Pass {
    move |snapshot| Pass {
        unix_ms: i,
        now_ns: i * 1_000_000_000,
        elapsed_ns: 1_000_000_000,
        local_time: Some((1, 600)),
        snapshot,
        inputs: format::Inputs::default(),
        decisions: Vec::new(),
        changes: Vec::new(),
    }
}

fn passes(r: &mut Recording) -> Vec<Snapshot> {
    let mut v = Vec::new();
    while let Some(it) = r.next_item() {
        if let Item::Pass { snapshot, .. } = it {
            v.push(snapshot);
        }
    }
    v
}

#[test]
fn delta_coding_round_trips_exactly() {
    let mut w = Coder::default();
    let mut r = Coder::for_counters(&Coder::counter_names());
    for i in 0..6 {
        let s = snap(i, 8 + i % 2);
        let enc = w.encode(&s);
        assert_eq!(enc.caps.is_some(), i == 0);
        assert_eq!(r.decode(&enc).unwrap(), s);
    }
}

#[test]
fn a_torn_tail_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.pptrec");
    let mut rec = Recorder::single(&path);
    for i in 0..5 {
        let s = snap(i, 4);
        rec.write(|| None, None, &s, pass_rec(i)).unwrap();
    }
    let full = std::fs::read(&path).unwrap();
    // Cut the file anywhere inside the last frame: four passes survive.
    let mut all = Recording::open(&path).unwrap();
    assert_eq!(passes(&mut all).len(), 5);
    assert!(all.warnings.is_empty());
    let mut cut = Recording::open(&path).unwrap();
    let last_start = {
        // The length of the last frame, found by reading frames.
        let mut r = file::SegmentReader::open(&path).unwrap();
        let mut offsets = Vec::new();
        while r.next_record().is_some() {
            offsets.push(());
        }
        offsets.len()
    };
    assert_eq!(last_start, 6);
    drop(cut);
    for keep in [full.len() - 1, full.len() - 20, full.len() - 40] {
        std::fs::write(&path, &full[..keep]).unwrap();
        cut = Recording::open(&path).unwrap();
        let got = passes(&mut cut);
        assert_eq!(got.len(), 4, "cut at {keep}");
        assert_eq!(got[3], snap(3, 4));
        assert_eq!(cut.warnings.len(), 1, "{:?}", cut.warnings);
    }
    // A flipped byte in the middle frame: the passes before it survive.
    let mut bad = full.clone();
    let mid = full.len() / 2;
    bad[mid] ^= 0xff;
    std::fs::write(&path, &bad).unwrap();
    let mut r = Recording::open(&path).unwrap();
    let n = passes(&mut r).len();
    assert!(n < 5);
    assert!(r.warnings[0].contains("checksum") || r.warnings[0].contains("frame"));
}

#[test]
fn a_file_that_is_not_a_recording_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.pptrec");
    std::fs::File::create(&p)
        .unwrap()
        .write_all(b"hello world, not a recording")
        .unwrap();
    let e = Recording::open(&p).unwrap_err().to_string();
    assert!(e.contains("not a pptune recording"), "{e}");
    let mut head = file::MAGIC.to_vec();
    head.extend_from_slice(&99_u32.to_le_bytes());
    std::fs::write(&p, head).unwrap();
    let e = Recording::open(&p).unwrap_err().to_string();
    assert!(e.contains("format 99"), "{e}");
}

#[test]
fn the_rolling_recording_stays_under_its_cap_and_replays_from_any_segment() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 600 << 10;
    let policy = config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap();
    let mut rec = Recorder::rolling(dir.path(), cap, &policy).unwrap();
    rec.sync = false;
    let mut prev: Option<(Snapshot, Duration)> = None;
    for i in 0..400 {
        let s = snap(i, 256);
        rec.write(
            || Some(policy::engine::EngineState::default()),
            prev.as_ref().map(|(s, t)| (s, *t)),
            &s,
            pass_rec(i),
        )
        .unwrap();
        prev = Some((s, Duration::from_secs(i)));
    }
    let on_disk: u64 = file::segments(dir.path())
        .unwrap()
        .iter()
        .map(|(_, p)| std::fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(on_disk, rec.size_bytes());
    // The cap, give or take the one pass that ends a segment.
    assert!(on_disk <= cap + (8 << 10), "{on_disk} > {cap}");
    let segs = file::segments(dir.path()).unwrap();
    assert!(segs.len() >= 5, "{}", segs.len());
    // The oldest segments are gone; what is left starts with a Start
    // carrying the previous pass and decodes to the very snapshots.
    let mut r = Recording::open(dir.path()).unwrap();
    let mut first_prev = None;
    let mut got = Vec::new();
    while let Some(it) = r.next_item() {
        match it {
            Item::Start { previous, .. } => {
                if first_prev.is_none() {
                    first_prev = Some(previous);
                }
            }
            Item::Pass { pass, snapshot } => got.push((pass.unix_ms, snapshot)),
        }
    }
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let first = got[0].0;
    assert!(first > 0);
    assert_eq!(got.len() as u64, 400 - first);
    for (i, s) in &got {
        assert_eq!(*s, snap(*i, 256));
    }
    let (p, at) = first_prev.unwrap().unwrap();
    assert_eq!(p, snap(first - 1, 256));
    assert_eq!(at, Duration::from_secs(first - 1));
}
