//! Logs carry causes: a failed `accept` (out of file descriptors) is a
//! warning, not a debug line. The real binary in a throwaway network
//! namespace (root only), under a small `RLIMIT_NOFILE`.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::process::Command;
use std::time::Duration;

use pptune_tests::bin::{DaemonDirs, SpawnLogged, policy_in_tempdir, pptune_bin, require_root};

#[test]
fn failed_accepts_when_out_of_descriptors_are_warned_with_their_cause() {
    require_root("a throwaway network namespace");
    let (dir, policy) = policy_in_tempdir("mode: observe\n");
    let log = dir.path().join("log");
    let mut child = Command::new("unshare")
        .args(["-n", "sh", "-c"])
        .arg("ip link set lo up && exec prlimit --nofile=30 \"$0\" --config \"$1\" run --log-format human --metrics-listen 127.0.0.1:9864")
        .arg(pptune_bin())
        .arg(&policy)
        .daemon_dirs(dir.path())
        .env_remove("NOTIFY_SOCKET")
        .spawn_logged(&log);
    let pid = child.id();
    let ctl = dir.path().join("control.sock");
    for _ in 0..300 {
        if ctl.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Connections from a thread in the daemon's namespace, held open.
    let held = std::thread::spawn(move || {
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).unwrap();
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        (0..60)
            .filter_map(|_| std::net::TcpStream::connect("127.0.0.1:9864").ok())
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = child.wait();
    drop(held);
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("accepting a connection failed"))
        .unwrap_or_else(|| panic!("no warning for failed accepts:\n{text}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("Too many open files"), "{line}");
}
