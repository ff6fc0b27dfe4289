#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::time::Duration;

use policy::snapshot::{
    Availability, Capabilities, Device, DeviceId, Pool, PoolStats, Rings, RxQueue, Snapshot,
};

use super::coder::Coder;
use super::format::Pass;
use super::*;

/// Deterministic noise: counters that move by varied amounts, as real
/// ones do (a recording of constant steps compresses to nothing).
fn noise(pass: u64, q: u64) -> u64 {
    (pass.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ q.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)) >> 48
}

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
                alloc_fast: 100_000 * pass + q + noise(pass, q),
                recycle_ring: 90_000 * pass + noise(pass, q + 1),
                recycle_ring_full: 7 * pass * (q % 3) + noise(pass, q + 2),
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
    let mut w = Coder::writer();
    let mut r = Coder::for_counters(&Coder::counter_names());
    // One buffer for every pass, as replay reuses it: whatever it held is
    // overwritten.
    let mut out = Snapshot::default();
    for i in 0..6 {
        let s = snap(i, 8 + i % 2);
        let enc = w.encode(&s);
        assert_eq!(enc.caps.is_some(), i == 0);
        r.decode_into(&enc, &enc.block, &mut out).unwrap();
        assert_eq!(out, s);
    }
}

/// The writer kept every device's facts until its segment rotated: a host
/// whose devices come and go grew by each one it ever had (RSS 37 -> 62
/// MB over 28,000 lifetimes). Now it holds those of the devices in the
/// pass; the variant: a device that comes back under its ifindex after
/// being gone decodes with its facts (written again).
#[test]
fn the_writer_remembers_only_the_devices_that_exist() {
    let mut w = Coder::writer();
    let mut r = Coder::for_counters(&Coder::counter_names());
    let mut out = Snapshot::default();
    for i in 0..5_000_u32 {
        let mut s = snap(u64::from(i), 1);
        // A new device each pass, and eth0 (ifindex 2) every 7th.
        let d = &mut s.devices[0];
        if i % 7 != 0 {
            d.ifindex = 1_000 + i;
            d.name = format!("veth{i}");
        }
        let enc = w.encode(&s);
        r.decode_into(&enc, &enc.block, &mut out).unwrap();
        assert_eq!(out, s, "pass {i}");
        assert!(
            w.devices_remembered() <= 1,
            "pass {i}: {}",
            w.devices_remembered()
        );
    }
}

/// Pools and queues that come and go, gauges that fall, counters that
/// wrap or reset, options that appear: the layout changes and every number
/// still comes back exactly, into a reused buffer.
#[test]
fn layout_changes_and_odd_numbers_round_trip() {
    let mut w = Coder::writer();
    let mut r = Coder::for_counters(&Coder::counter_names());
    let mut out = snap(99, 3);
    let mut sizes = Vec::new();
    let sizes_q = [4, 4, 6, 2, 2, 5, 5, 5, 1, 4, 4, 4];
    for (i, q) in (0_u64..).zip(sizes_q) {
        let mut s = snap(i, q);
        let d = &mut s.devices[0];
        if i == 1 {
            d.rx_queues.reverse();
        }
        if i == 4 {
            // A counter reset and a wrap.
            let st = d.rx_queues[0].pools[0].stats.as_mut().unwrap();
            st.alloc_fast = 0;
            st.recycle_ring = u64::MAX - 3;
        }
        if i >= 6 {
            d.qstats = Some(policy::snapshot::QueueStats {
                rx_packets: Some(100 * i),
                rx_hw_drops: Some(u64::MAX - i),
                ..Default::default()
            });
            d.link_stats = Some(policy::snapshot::LinkStats {
                rx_packets: 7 * i,
                ..Default::default()
            });
            d.rx_queues[0].provider = Some(policy::snapshot::MemoryProvider::IoUring {
                rx_buf_len: Some(4096),
            });
            d.rx_queues[0].pools[0].stats = None;
            d.rx_queues[0].pools[0].inflight = Some(3);
            s.orphan_pools.push(Pool {
                id: 900,
                detach_time: Some(123),
                inflight: Some(i),
                provider: Some(policy::snapshot::MemoryProvider::Dmabuf { id: 7 }),
                ..Pool::default()
            });
        }
        if i == 9 {
            d.unmapped_pools = d.rx_queues.pop().unwrap().pools;
        }
        let enc = w.encode(&s);
        sizes.push(enc.block.len());
        r.decode_into(&enc, &enc.block, &mut out).unwrap();
        assert_eq!(out, s, "pass {i}");
    }
    // A steady pass writes no layout: pass 7 has pass 6's.
    assert!(sizes[7] < sizes[6], "{sizes:?}");
}

#[test]
fn a_malformed_block_is_an_error_not_a_panic() {
    let mut w = Coder::writer();
    let s = snap(1, 4);
    let enc = w.encode(&s);
    for cut in 0..enc.block.len() {
        let mut r = Coder::for_counters(&Coder::counter_names());
        let mut out = Snapshot::default();
        assert!(
            r.decode_into(&enc, &enc.block[..cut], &mut out).is_err(),
            "cut at {cut}"
        );
    }
    let mut r = Coder::for_counters(&Coder::counter_names());
    let mut long = enc.block.clone();
    long.push(0);
    assert!(
        r.decode_into(&enc, &long, &mut Snapshot::default())
            .is_err()
    );
}

#[test]
fn a_torn_tail_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.pptrec");
    let mut rec = Recorder::single(&path, "test");
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
    // Format 1 (CBOR snapshots, before the columnar block) is refused by
    // name, saying what to do with it.
    let mut head = file::MAGIC.to_vec();
    head.extend_from_slice(&1_u32.to_le_bytes());
    std::fs::write(&p, head).unwrap();
    let e = Recording::open(&p).unwrap_err().to_string();
    assert!(
        e.contains("recording format 1; this pptune reads format 2")
            && e.contains("replay it with the pptune that wrote it"),
        "{e}"
    );
}

#[test]
fn the_rolling_recording_stays_under_its_cap_and_replays_from_any_segment() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 600 << 10;
    let policy = config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap();
    let mut rec = Recorder::rolling(dir.path(), cap, &policy, "test").unwrap();
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

/// A segment of `frames` (each `[len][crc][payload]`) after the header.
fn segment_with(frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let mut b = file::MAGIC.to_vec();
    b.extend_from_slice(&format::FORMAT_VERSION.to_le_bytes());
    for (len, crc, payload) in frames {
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(payload);
    }
    b
}

/// A frame's length is read from the file: 255 MiB in a 922-byte file
/// made the reader allocate 268 MB before finding the file too short. A
/// length past the record bound, or past the end of the file, now ends
/// the segment before any buffer of that size exists.
#[test]
fn a_frame_longer_than_its_file_or_the_bound_is_refused_before_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.pptrec");
    for (len, says) in [
        (255 << 20, "implausible frame length"),
        (file::MAX_RECORD, "runs past the end of the file"),
        (1000, "runs past the end of the file"),
    ] {
        std::fs::write(&p, segment_with(&[(len, 0, &[0; 900])])).unwrap();
        let mut r = file::SegmentReader::open(&p).unwrap();
        assert!(r.next_record().is_none());
        let w = r.warning().unwrap();
        assert!(w.contains(says), "{len}: {w}");
    }
}

/// A 1 MB frame with a correct CRC inflated to 1.12 GB (4.2 MB: 4.27 GB,
/// 18.5 s), in replay and in the daemon's start-up scan of its own
/// recording. Inflating now stops at the record bound.
#[test]
fn a_frame_that_inflates_past_the_record_bound_is_cut_there() {
    use flate2::write::DeflateEncoder;
    let mut enc = DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0_u8; 1 << 20];
    for _ in 0..(file::MAX_RECORD >> 20) + 4 {
        enc.write_all(&zeros).unwrap();
    }
    let payload = enc.finish().unwrap();
    let len = u32::try_from(payload.len()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.pptrec");
    std::fs::write(
        &p,
        segment_with(&[(len, crc32fast::hash(&payload), &payload)]),
    )
    .unwrap();
    let mut r = file::SegmentReader::open(&p).unwrap();
    assert!(r.next_record().is_none());
    let w = r.warning().unwrap();
    assert!(w.contains("inflates past"), "{w}");
}

/// A FIFO named like a segment hung replay, verify and the daemon's scan
/// (open blocks until a writer comes); it is refused as what it is.
#[test]
fn a_fifo_named_like_a_segment_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("00000001.pptrec");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap()
            .success()
    );
    // On a thread, so that a reader that blocks on the FIFO fails the
    // test in 5 s instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.path().to_owned();
    std::thread::spawn(move || {
        let file = Recording::open(&p).unwrap_err().to_string();
        let dir = Recording::open(&d).unwrap_err().to_string();
        let _ = tx.send((file, dir));
    });
    let (file, dir) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("opening a FIFO blocked");
    assert!(file.contains("not a regular file: a FIFO"), "{file}");
    assert!(dir.contains("not a regular file: a FIFO"), "{dir}");
}

fn write_pass(rec: &mut Recorder, i: u64) -> Result<(), RecordError> {
    let s = snap(i, 16);
    rec.write(
        || Some(policy::engine::EngineState::default()),
        None,
        &s,
        pass_rec(i),
    )
}

fn bytes_on_disk(dir: &Path) -> u64 {
    file::segments(dir)
        .unwrap()
        .iter()
        .map(|(_, p)| std::fs::metadata(p).unwrap().len())
        .sum()
}

/// A reload that changes the policy ends the segment; the cap was kept only
/// on rotation, so a minute of reloads left 364 KB at a 128 KiB cap.
#[test]
fn reloads_keep_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 128 << 10;
    let policy = config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap();
    let mut rec = Recorder::rolling(dir.path(), cap, &policy, "test").unwrap();
    rec.sync = false;
    let mut most = 0;
    for i in 0..300 {
        rec.policy_reloaded(&policy, true);
        write_pass(&mut rec, i).unwrap();
        let on_disk = bytes_on_disk(dir.path());
        assert_eq!(on_disk, rec.size_bytes(), "pass {i}");
        most = most.max(on_disk);
    }
    // Every segment here is one Start and one pass: the cap holds to the
    // byte (it keeps room for a full open segment).
    assert!(most <= cap, "{most} bytes on disk at a cap of {cap}");
    assert!(file::segments(dir.path()).unwrap().len() > 5);
    let mut r = Recording::open(dir.path()).unwrap();
    assert!(!passes(&mut r).is_empty());
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// Segment numbers come from the names already there: the last number
/// refuses the next segment with an error that says what to do, and a name
/// past it (or not a number) is not a segment, so nothing wraps.
#[test]
fn segment_numbers_cannot_wrap() {
    let policy = config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap();
    let mut head = file::MAGIC.to_vec();
    head.extend_from_slice(&format::FORMAT_VERSION.to_le_bytes());

    let dir = tempfile::tempdir().unwrap();
    let last = dir.path().join(file::segment_name(file::LAST_SEQ).unwrap());
    std::fs::write(&last, &head).unwrap();
    let mut rec = Recorder::rolling(dir.path(), 1 << 20, &policy, "test").unwrap();
    rec.sync = false;
    for i in 0..3 {
        let e = write_pass(&mut rec, i).unwrap_err().to_string();
        assert!(
            e.contains("segment numbers are used up (segment 9999999999 exists)")
                && e.contains("move the recording directory aside"),
            "{e}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    assert_eq!(file::segment_name(file::LAST_SEQ + 1), None);

    let dir = tempfile::tempdir().unwrap();
    for name in ["18446744073709551615", "10000000000", "+7", "seven"] {
        std::fs::write(dir.path().join(format!("{name}.pptrec")), &head).unwrap();
    }
    std::fs::write(dir.path().join("0000000041.pptrec"), &head).unwrap();
    let mut rec = Recorder::rolling(dir.path(), 1 << 20, &policy, "test").unwrap();
    rec.sync = false;
    write_pass(&mut rec, 0).unwrap();
    let segs: Vec<u64> = file::segments(dir.path())
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(segs, [41, 42]);
}

/// Runs `f` on a thread in a mount namespace of its own, with a tmpfs of
/// `size` mounted at `at`: a filesystem that can be filled without
/// touching the host's.
fn on_small_tmpfs<T: Send + 'static>(
    at: &Path,
    size: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    use nix::mount::{MsFlags, mount};
    let at = at.to_owned();
    let opts = format!("size={size}");
    std::thread::spawn(move || {
        // CLONE_NEWNS unshares this thread's filesystem context only.
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
            .expect("a mount namespace (the test suite runs as root)");
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .unwrap();
        mount(
            Some("tmpfs"),
            &at,
            Some("tmpfs"),
            MsFlags::empty(),
            Some(opts.as_str()),
        )
        .unwrap();
        f()
    })
    .join()
    .unwrap()
}

/// Fills the filesystem holding `dir` with one file; returns its path.
fn fill(dir: &Path) -> PathBuf {
    let p = dir.join("filler");
    let mut f = std::fs::File::create(&p).unwrap();
    let chunk = vec![0x5a_u8; 4096];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
            Err(e) => panic!("filling: {e}"),
        }
    }
    p
}

/// On a full filesystem every pass opened a segment whose header could
/// not be written and left it behind, empty; the first such one made
/// `replay DIR` fail. Now a segment that did not get its header and Start
/// record is removed, the segment the full disk tore keeps its good passes,
/// and once there is room again the recording goes on and replays whole.
#[test]
fn a_full_filesystem_leaves_no_empty_segment() {
    let dir = tempfile::tempdir().unwrap();
    let rec_dir = dir.path().to_owned();
    let (segs, got, warnings) = on_small_tmpfs(dir.path(), "1m", move || {
        let policy = config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap();
        let mut rec = Recorder::rolling(&rec_dir, 8 << 20, &policy, "test").unwrap();
        for i in 0..5 {
            write_pass(&mut rec, i).unwrap();
        }
        let mut written: Vec<u64> = (0..5).collect();
        let filler = fill(&rec_dir);
        // The open segment's last page may still take a pass or two.
        let mut failed = 0;
        for i in 5..45 {
            match write_pass(&mut rec, i) {
                Ok(()) => written.push(i),
                Err(_) => failed += 1,
            }
        }
        assert!(failed >= 30, "{failed} of 40 passes failed on a full disk");
        let segs: Vec<_> = file::segments(&rec_dir).unwrap();
        for (_, p) in &segs {
            assert!(std::fs::metadata(p).unwrap().len() > 12, "{}", p.display());
        }
        assert_eq!(bytes_on_disk(&rec_dir), rec.size_bytes());
        let n = segs.len();
        std::fs::remove_file(filler).unwrap();
        for i in 45..50 {
            write_pass(&mut rec, i).unwrap();
            written.push(i);
        }
        let mut r = Recording::open(&rec_dir).unwrap();
        let got: Vec<u64> = std::iter::from_fn(|| r.next_item())
            .filter_map(|it| match it {
                Item::Pass { pass, .. } => Some(pass.unix_ms),
                Item::Start { .. } => None,
            })
            .collect();
        (n, (got, written), r.warnings)
    });
    let (got, written) = got;
    assert_eq!(segs, 1, "only the segment the full disk tore");
    assert_eq!(got, written);
    assert!(warnings.len() <= 1, "{warnings:?}");
}

/// A segment a crash left without its header is skipped with a warning
/// when it is not the only one; alone it is still refused by name.
#[test]
fn a_headerless_segment_is_skipped_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let policy = config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap();
    std::fs::write(dir.path().join(file::segment_name(0).unwrap()), b"").unwrap();
    let e = Recording::open(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("0000000000.pptrec is not a pptune recording"),
        "{e}"
    );
    let mut rec = Recorder::rolling(dir.path(), 1 << 20, &policy, "test").unwrap();
    rec.sync = false;
    write_pass(&mut rec, 7).unwrap();
    drop(rec);
    let mut r = Recording::open(dir.path()).unwrap();
    assert_eq!(passes(&mut r), [snap(7, 16)]);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("segment skipped"),
        "{:?}",
        r.warnings
    );
}

/// A daemon starting over a recording directory lists its segments by size
/// and reads one first record: the oldest kept segment's, for when the
/// recording begins (it read every segment's, up to 16 MiB inflated each,
/// before; tests/probes/bounds.sh measures that). Here the segments after
/// the oldest are not recordings at all, and opening still dates it.
#[test]
fn start_up_dates_only_the_oldest_kept_segment() {
    let policy = config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut rec = Recorder::rolling(dir.path(), 1 << 30, &policy, "test").unwrap();
    rec.sync = false;
    write_pass(&mut rec, 0).unwrap();
    let began = rec.oldest_unix_ms().unwrap();
    rec.policy_reloaded(&policy, true);
    drop(rec);
    let (n0, _) = *file::segments(dir.path()).unwrap().last().unwrap();
    for n in n0 + 1..n0 + 51 {
        std::fs::write(
            dir.path().join(file::segment_name(n).unwrap()),
            b"not a recording",
        )
        .unwrap();
    }
    let rec = Recorder::rolling(dir.path(), 1 << 30, &policy, "test").unwrap();
    assert_eq!(rec.oldest_unix_ms(), Some(began));
    assert_eq!(file::segments(dir.path()).unwrap().len(), 51);
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// The daemon's recorder (64 MiB cap) over 30,000 device lifetimes: each
/// pass a host of 16 devices with 4 pools each, one of them replaced by a
/// new device (a new ifindex and name) every pass. Prints RSS after a
/// warm-up of 1,000 passes and at the end (RELIABILITY.md, class 6):
/// `cargo test --release -p pptune-record device_churn -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement (about a minute in release): run with --ignored"]
#[allow(clippy::cast_precision_loss)]
fn device_churn_keeps_the_recorders_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let policy = config::parse_str("p", "{}").unwrap();
    let mut rec = Recorder::rolling(dir.path(), 64 << 20, &policy, "test").unwrap();
    let template = snap(0, 4).devices.remove(0);
    let mut start = 0;
    for i in 0..31_000_u64 {
        let mut s = snap(i, 4);
        s.devices = (0..16_u32)
            .map(|k| {
                let mut d = template.clone();
                // Device 15 is a new one every pass.
                let n = if k == 15 {
                    1_000 + u32::try_from(i).unwrap()
                } else {
                    k + 2
                };
                d.ifindex = n;
                d.name = format!("dev{n}");
                d.id.parent = Some(format!("0000:{n:08x}.0"));
                d
            })
            .collect();
        rec.write(|| None, None, &s, pass_rec(i)).unwrap();
        if i == 1_000 {
            start = rss_kib();
        }
    }
    let end = rss_kib();
    println!(
        "MEASURE recorder, 30,000 device lifetimes after a 1,000-pass warm-up: RSS {start} -> {end} KiB ({:+.1} %)",
        (end as f64 - start as f64) * 100.0 / start as f64
    );
    assert!(end * 10 <= start * 11, "{start} -> {end} KiB");
}
