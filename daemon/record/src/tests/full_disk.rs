//! A filesystem that fills up under the recorder (a tmpfs in a mount
//! namespace of the test's own).

use super::*;

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
        let policy = default_policy();
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
