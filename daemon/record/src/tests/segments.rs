//! The rolling recording: its cap, segment numbering and rotation, and
//! dating the recording at start-up.

use super::*;

#[test]
fn the_rolling_recording_stays_under_its_cap_and_replays_from_any_segment() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 600 << 10;
    let policy = default_policy();
    let mut rec = rolling(dir.path(), cap, &policy);
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

/// A reload that changes the policy ends the segment; the cap was kept only
/// on rotation, so a minute of reloads left 364 KB at a 128 KiB cap.
#[test]
fn reloads_keep_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 128 << 10;
    let policy = default_policy();
    let mut rec = rolling(dir.path(), cap, &policy);
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
    let policy = default_policy();
    let mut head = file::MAGIC.to_vec();
    head.extend_from_slice(&format::FORMAT_VERSION.to_le_bytes());

    let dir = tempfile::tempdir().unwrap();
    let last = dir.path().join(file::segment_name(file::LAST_SEQ).unwrap());
    std::fs::write(&last, &head).unwrap();
    let mut rec = rolling(dir.path(), 1 << 20, &policy);
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
    let mut rec = rolling(dir.path(), 1 << 20, &policy);
    write_pass(&mut rec, 0).unwrap();
    let segs: Vec<u64> = file::segments(dir.path())
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(segs, [41, 42]);
}

/// A daemon starting over a recording directory lists its segments by size
/// and reads one first record: the oldest kept segment's, for when the
/// recording begins (it read every segment's, up to 16 MiB inflated each,
/// before; tests/probes/bounds.sh measures that). Here the segments after
/// the oldest are not recordings at all, and opening still dates it.
#[test]
fn start_up_dates_only_the_oldest_kept_segment() {
    let policy = default_policy();
    let dir = tempfile::tempdir().unwrap();
    let mut rec = rolling(dir.path(), 1 << 30, &policy);
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
