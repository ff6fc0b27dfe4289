//! Lifecycle and sharing: a SIGHUP at the very start of `run`, and two
//! daemons given one state directory. The real binary, each daemon in a
//! throwaway network namespace of its own (root only).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pptune_tests::bin::{pptune_bin, require_root};

/// `pptune run` in a new network namespace (`unshare` execs it: one pid),
/// no metrics endpoint, `runtime` and `state` as its directories.
fn daemon(policy: &Path, runtime: &Path, state: &Path, log: &Path) -> Child {
    Command::new("unshare")
        .arg("-n")
        .arg(pptune_bin())
        .arg("--config")
        .arg(policy)
        .args(["run", "--log-format", "human"])
        .env("RUNTIME_DIRECTORY", runtime)
        .env("STATE_DIRECTORY", state)
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn policy(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("policy.yaml");
    std::fs::write(&p, "mode: observe\ndaemon:\n  metrics_listen: null\n").unwrap();
    p
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// A SIGHUP in the first milliseconds of start-up (before the reload
/// handler was installed) killed 1 of 30 daemons with exit 129. Thirty
/// rounds, the signal 5-15 ms after `exec`: every daemon stays up and ends
/// with SIGTERM, exit 0. (Before `main` runs, while the loader maps the
/// binary, the kernel's default action still applies: the first 5 ms are
/// left out, and the unit restarts a daemon killed by SIGHUP,
/// `RestartForceExitStatus=SIGHUP`.)
#[test]
fn a_sighup_at_start_up_never_kills_the_daemon() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path());
    let bin = std::fs::canonicalize(pptune_bin()).unwrap();
    let mut died = Vec::new();
    for round in 0..30 {
        let run = dir.path().join(format!("r{round}"));
        let log = dir.path().join(format!("log{round}"));
        let mut child = daemon(&policy, &run, &run, &log);
        let pid = child.id();
        // Until `unshare` has exec'd pptune.
        for _ in 0..100_000 {
            if std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == bin) {
                break;
            }
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_micros(fastrand::u64(5_000..15_000)));
        signal(pid, "-HUP");
        std::thread::sleep(Duration::from_millis(300));
        if let Some(st) = child.try_wait().unwrap() {
            died.push((round, st, std::fs::read_to_string(&log).unwrap()));
            continue;
        }
        signal(pid, "-TERM");
        let st = child.wait().unwrap();
        if !st.success() {
            died.push((round, st, std::fs::read_to_string(&log).unwrap()));
        }
    }
    assert!(died.is_empty(), "{} of 30: {died:?}", died.len());
}

/// Two daemons (two network namespaces, two runtime directories) given one
/// state directory got the same journal run id, mixed their recordings and
/// each kept only its own segments under the cap. The second now refuses
/// to start, naming the directory; the variant: once the first is gone,
/// even by SIGKILL, the next one starts.
#[test]
fn two_daemons_never_share_a_state_directory() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let policy = policy(d);
    let state = d.join("state");
    let mut first = daemon(&policy, &d.join("a"), &state, &d.join("log-a"));
    for _ in 0..200 {
        if d.join("a/control.sock").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        first.try_wait().unwrap().is_none(),
        "the first daemon exited"
    );
    let mut second = daemon(&policy, &d.join("b"), &state, &d.join("log-b"));
    let mut st = None;
    for _ in 0..200 {
        st = second.try_wait().unwrap();
        if st.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(d.join("log-b")).unwrap();
    if st.is_none() {
        second.kill().unwrap();
        second.wait().unwrap();
    }
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(
        st.and_then(|s| s.code()),
        Some(1),
        "the second ran beside the first:\n{log}"
    );
    assert!(
        log.contains(&format!(
            "the state directory {} holds another pptune",
            state.display()
        )),
        "{log}"
    );
    let mut third = daemon(&policy, &d.join("c"), &state, &d.join("log-c"));
    std::thread::sleep(Duration::from_millis(1500));
    let running = third.try_wait().unwrap().is_none();
    third.kill().unwrap();
    third.wait().unwrap();
    assert!(
        running,
        "the lock outlived a SIGKILLed daemon:\n{}",
        std::fs::read_to_string(d.join("log-c")).unwrap()
    );
}
