//! The real daemon, killed with SIGKILL at random moments while it records
//! (a 100 ms interval, so a kill often lands mid-pass), in a throwaway
//! network namespace: every run leaves a recording that `pptune replay`
//! reads to its last complete pass; only a segment's tail is ever lost.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use pptune::record::{Item, Recording, file};
use pptune_tests::bin::{SpawnLogged, pptune_bin, require_root, run_beside_veth};
use tokio::time::Instant;

const RUNS: u64 = 6;

#[test]
fn sigkill_while_recording_leaves_a_replayable_recording() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("etc");
    std::fs::create_dir(&cfg).unwrap();
    std::fs::write(
        cfg.join("policy.yaml"),
        "timing:\n  interval: 100ms\n  window: 1s\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let rec_dir = state.join("recording");
    for run in 0..RUNS {
        let mut child = run_beside_veth()
            .arg(&cfg)
            .env("STATE_DIRECTORY", &state)
            .env("RUNTIME_DIRECTORY", dir.path().join("run"))
            .env_remove("NOTIFY_SOCKET")
            .spawn_logged(dir.path().join(format!("log{run}")));
        // Until this run's segment has a pass or two.
        let t0 = Instant::now();
        let seg = loop {
            let segs = file::segments(&rec_dir).unwrap_or_default();
            if let Some((n, p)) = segs.last()
                && *n >= run
                && std::fs::metadata(p).is_ok_and(|m| m.len() > 2048)
            {
                break p.clone();
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "run {run} recorded nothing: {}",
                std::fs::read_to_string(dir.path().join(format!("log{run}"))).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // A kill at a different point of the 100 ms cycle each run.
        std::thread::sleep(Duration::from_millis(150 + 37 * run));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(seg.exists());
    }
    // Each run's segment, read on its own: complete passes, then at most a
    // torn tail, said in a warning.
    let segs = file::segments(&rec_dir).unwrap();
    assert_eq!(segs.len() as u64, RUNS, "{segs:?}");
    let mut total = 0;
    for (_, p) in &segs {
        let mut r = Recording::open(p).unwrap();
        let mut passes = 0;
        let mut last_now = 0;
        while let Some(it) = r.next_item() {
            if let Item::Pass { pass, .. } = it {
                assert!(pass.now_ns >= last_now);
                last_now = pass.now_ns;
                passes += 1;
            }
        }
        assert!(passes >= 2, "{}: {passes} passes", p.display());
        assert!(r.warnings.len() <= 1, "{:?}", r.warnings);
        for w in &r.warnings {
            assert!(w.contains("torn"), "not a torn tail: {w}");
        }
        total += passes;
    }
    // The command reads the whole directory to its last complete pass.
    let out = std::process::Command::new(pptune_bin())
        .args(["replay", rec_dir.to_str().unwrap(), "--json", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["replay"]["passes"], total);
    assert_eq!(v["replay"]["faithful_passes"], total, "the recorded policy");
    assert_eq!(v["replay"]["identical_passes"], total);
}
