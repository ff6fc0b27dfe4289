//! The state record is never destroyed: a record `pptune`
//! cannot read is left in place by `restore` (which fails) and moved
//! aside, with its parse error in the log, by the daemon; a record of a
//! newer schema is neither cleared by `restore` nor overwritten by `run`.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use pptune::act::state::read_boot_id;
use pptune_tests::bin::{DaemonDirs, SpawnLogged, in_netns, require_root, write_policy};

/// A record a newer pptune might write: schema 2, this boot, a field this
/// one does not know (its originals would live there).
fn newer_record() -> String {
    format!(
        r#"{{"schema_version":2,"boot_id":"{}","devices":{{}},"originals_v2":[{{"knob":"ring_rx","value":256}}]}}"#,
        read_boot_id().unwrap()
    )
}

/// `pptune restore` in a throwaway network namespace: in the host's, any
/// daemon the other tests run there (or the host's own) holds the
/// namespace's instance lock, and restore then refuses, rightly.
fn restore(run_dir: &Path) -> Output {
    require_root("a throwaway network namespace");
    in_netns("exec \"$0\" restore")
        .daemon_dirs(run_dir)
        .output()
        .unwrap()
}

/// `restore` said "nothing to restore … cleared", deleted the file and
/// exited 0: after a package downgrade the originals were gone.
#[test]
fn restore_keeps_a_newer_schema_record_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("state.json");
    std::fs::write(&f, newer_record()).unwrap();
    let out = restore(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        err.contains("newer pptune") && err.contains("schema 2"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), newer_record());
}

/// A truncated record: `restore` fails, names the parse error, and leaves
/// the file for a person to repair.
#[test]
fn restore_fails_on_an_unreadable_record_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("state.json");
    let text = format!(
        r#"{{"schema_version":1,"boot_id":"{}","devices":{{}}}}"#,
        read_boot_id().unwrap()
    );
    let truncated = &text[..text.len() / 2];
    std::fs::write(&f, truncated).unwrap();
    let out = restore(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(err.contains("EOF while parsing"), "{err}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), truncated);
}

/// `pptune run` (observe, in a throwaway netns) over `state.json`; returns
/// its log once `until` matches it or the process exited, and the exit
/// status if it exited.
fn run_daemon(dir: &Path, until: &str) -> (String, Option<i32>) {
    let cfg = write_policy(dir, "mode: observe\n");
    let log_path = dir.join("log");
    let mut child = in_netns(
        "ip link set lo up && exec \"$0\" --config \"$1\" run --metrics-listen 127.0.0.1:0",
    )
    .arg(&cfg)
    .daemon_dirs(dir)
    .env_remove("NOTIFY_SOCKET")
    .env_remove("JOURNAL_STREAM")
    .spawn_logged(&log_path);
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    for _ in 0..300 {
        if let Some(st) = child.try_wait().unwrap() {
            return (log(), st.code());
        }
        if log().contains(until) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    (log(), None)
}

/// The daemon logged "state record unreadable; starting a fresh one" with
/// no detail and overwrote the record on its next save.
#[test]
fn daemon_moves_an_unreadable_record_aside_with_its_parse_error() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("state.json");
    std::fs::write(&f, "{\"schema_version\":1,\"boot_id\":").unwrap();
    let (log, code) = run_daemon(dir.path(), "moved aside");
    assert_eq!(code, None, "the daemon exited: {log}");
    assert!(
        log.contains("moved aside") && log.contains("EOF while parsing"),
        "{log}"
    );
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("state.json.unreadable-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{log}");
    assert_eq!(
        std::fs::read_to_string(aside[0].path()).unwrap(),
        "{\"schema_version\":1,\"boot_id\":"
    );
}

/// A newer schema stops the daemon (non-zero, before it changes anything)
/// and the record is untouched.
#[test]
fn daemon_refuses_to_overwrite_a_newer_schema_record() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("state.json");
    std::fs::write(&f, newer_record()).unwrap();
    let (log, code) = run_daemon(dir.path(), "\"READY\"");
    assert!(code.is_some_and(|c| c != 0), "{code:?}: {log}");
    assert!(log.contains("newer pptune"), "{log}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), newer_record());
}
