//! Damaged and hostile files: malformed blocks, torn tails, frames too long
//! or inflating too far, FIFOs and headerless segments are refused or
//! skipped by name, never a panic or a hang.

use super::*;

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
        e.contains("recording format 1; this pptune reads formats 2 to 3")
            && e.contains("replay it with the pptune that wrote it"),
        "{e}"
    );
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

/// A segment a crash left without its header is skipped with a warning
/// when it is not the only one; alone it is still refused by name.
#[test]
fn a_headerless_segment_is_skipped_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let policy = default_policy();
    std::fs::write(dir.path().join(file::segment_name(0).unwrap()), b"").unwrap();
    let e = Recording::open(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("0000000000.pptrec is not a pptune recording"),
        "{e}"
    );
    let mut rec = rolling(dir.path(), 1 << 20, &policy);
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
