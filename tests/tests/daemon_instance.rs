//! One daemon per network namespace (issue 14): two daemons given
//! different runtime directories each took their own directory's state
//! lock and both enforced on the same NICs.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::Duration;

use pptune_tests::bin::{DaemonDirs, in_netns, pptune_bin, require_root};

#[test]
fn a_second_daemon_in_the_same_netns_exits_with_a_clear_message() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("policy.yaml");
    std::fs::write(&cfg, "mode: observe\n").unwrap();
    for d in ["a", "b", "c"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    // pptune run in the network namespace of process `pid`, stderr piped.
    let run_in_netns_of = |pid: &str, runtime: &str| {
        Command::new("nsenter")
            .args(["-t", pid, "-n"])
            .arg(pptune_bin())
            .args(["--config", cfg.to_str().unwrap(), "run"])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .daemon_dirs(dir.path().join(runtime))
            .env_remove("NOTIFY_SOCKET")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut first = in_netns(
        "ip link set lo up && exec \"$0\" --config \"$1\" run --metrics-listen 127.0.0.1:0",
    )
    .arg(&cfg)
    .daemon_dirs(dir.path().join("a"))
    .env_remove("NOTIFY_SOCKET")
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let pid = first.id().to_string();
    // Running once its control socket is there.
    let ctl = dir.path().join("a/control.sock");
    for _ in 0..200 {
        if ctl.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ctl.exists(), "the first daemon did not start");
    let second = |runtime: &str| {
        let mut c = run_in_netns_of(&pid, runtime);
        for _ in 0..100 {
            if c.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let still_running = c.try_wait().unwrap().is_none();
        if still_running {
            let _ = c.kill();
        }
        let out = c.wait_with_output().unwrap();
        (still_running, out)
    };
    let (running, out) = second("b");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!running, "a second daemon runs beside the first: {err}");
    assert!(!out.status.success(), "{out:?}");
    assert!(
        err.contains("another pptune is running in this network namespace"),
        "{err}"
    );
    // `restore` with another runtime directory found no record there and
    // said "nothing to restore", exit 0, while the daemon held originals
    // (issue 32 class 6): it now says where they are and fails.
    let out = Command::new("nsenter")
        .args(["-t", &pid, "-n"])
        .arg(pptune_bin())
        .arg("restore")
        .daemon_dirs(dir.path().join("b"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        err.contains(
            "another pptune (a daemon, or a restore) is running in this network namespace"
        ) && err.contains("RUNTIME_DIRECTORY"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("nothing"),
        "{out:?}"
    );
    // The first one dies (even by SIGKILL): the next one starts.
    first.kill().unwrap();
    first.wait().unwrap();
    // Its netns died with it: start a fresh pair to check release on kill.
    let mut holder = Command::new("unshare")
        .args(["-n", "sleep", "30"])
        .spawn()
        .unwrap();
    let hp = holder.id().to_string();
    let run_in = |runtime: &str| run_in_netns_of(&hp, runtime);
    let mut a = run_in("c");
    std::thread::sleep(Duration::from_millis(500));
    assert!(a.try_wait().unwrap().is_none(), "first daemon exited");
    a.kill().unwrap();
    a.wait().unwrap();
    let mut b = run_in("b");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        b.try_wait().unwrap().is_none(),
        "the lock outlived a SIGKILLed daemon"
    );
    b.kill().unwrap();
    b.wait().unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
}
