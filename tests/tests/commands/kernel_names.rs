//! Names from the kernel are bytes: an interface named with bytes that are
//! not UTF-8, or with terminal control sequences, in a throwaway network
//! namespace (root only). Every command that dumps links still works, the
//! name is carried with its odd bytes as `\xNN`, and what reaches a
//! terminal or the human log has its control characters escaped.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;

use pptune_tests::bin::{
    DaemonDirs, SpawnLogged, in_netns, policy_in_tempdir, pptune_bin, require_root,
};

/// `ppt0` renamed to `ppt` 0xff ESC `[31mX`: not UTF-8, and a colour
/// change if printed raw.
const ODD: &str = r#"ip link add ppt0 type veth peer name ppt1 && ip link set ppt0 name "$(printf 'ppt\377\033[31mX')""#;
/// What pptune calls it: the odd byte escaped by the netlink decoder.
const ODD_TEXT: &str = "ppt\\xff\u{1b}[31mX";
/// The same on a terminal or in the human log.
const ODD_PRINTED: &str = "ppt\\xff\\u{1b}[31mX";

fn run_in_odd_netns(dir: &std::path::Path, commands: &str) -> std::process::Output {
    in_netns(&format!("{ODD} && {commands}"))
        .daemon_dirs(dir)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Every command that dumps links, with one such interface: exit 0, the
/// device listed under its escaped name, no raw ESC on stdout or stderr.
#[test]
fn a_non_utf8_interface_name_fails_no_command() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    for cmd in [
        "status",
        "status --json",
        "plan --json",
        "verify",
        "restore",
        "record --duration 1s -o r.pptrec",
    ] {
        let out = run_in_odd_netns(dir.path(), &format!("\"$0\" {cmd}"));
        let stdout = String::from_utf8(out.stdout.clone()).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{cmd}: {out:?}");
        assert!(
            !out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b),
            "{cmd}: a raw ESC reached the terminal:\n{stdout}\n{stderr}"
        );
        if cmd == "status" {
            assert!(
                stdout.contains(&format!("{ODD_PRINTED} (ifindex")),
                "{stdout}"
            );
        } else if cmd == "status --json" {
            let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            let names: Vec<&str> = v["interfaces"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["name"].as_str().unwrap())
                .collect();
            assert!(names.contains(&ODD_TEXT), "{names:?}");
        }
    }
    // The recording holds the device under that name, and replays.
    let out = Command::new(pptune_bin())
        .args(["replay", "--json"])
        .arg(dir.path().join("r.pptrec"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// The daemon with such an interface: it samples (the device is in its
/// view), and its human log shows the name escaped, never a raw ESC.
#[test]
fn the_daemon_samples_and_logs_a_non_utf8_name_escaped() {
    require_root("a throwaway network namespace");
    let (dir, policy) = policy_in_tempdir(
        "selectors:\n  - names: [\"ppt*\"]\n    require_pools: false\ntiming:\n  interval: 200ms\n  window: 1s\n",
    );
    let log = dir.path().join("log");
    let mut child = in_netns(&format!(
        "{ODD} && exec \"$0\" --config \"$1\" run --log-format human --metrics-listen 127.0.0.1:0"
    ))
    .arg(&policy)
    .daemon_dirs(dir.path())
    .env("PPTUNE_LOG", "pptune=debug")
    .spawn_logged(&log);
    let pid = child.id();
    let view = || {
        Command::new("nsenter")
            .args(["-t", &pid.to_string(), "-n"])
            .arg(pptune_bin())
            .arg("status")
            .env("RUNTIME_DIRECTORY", dir.path())
            .output()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    while Instant::now() < deadline {
        let out = view();
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        if last.contains("daemon") && last.matches(ODD_PRINTED).count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = child.wait();
    let text = std::fs::read(&log).unwrap();
    let shown = String::from_utf8_lossy(&text);
    assert!(!shown.contains("dumping links"), "{shown}");
    assert!(
        !text.contains(&0x1b),
        "a raw ESC in the human log:\n{shown}"
    );
    assert!(
        last.matches(ODD_PRINTED).count() >= 2,
        "the daemon's view lacks the device:\n{last}\nlog:\n{shown}"
    );
}

/// A variant: a UTF-8 name that reorders text (U+202E) or holds a C1
/// control (U+009B, the 8-bit CSI): shown escaped by `status`.
#[test]
fn reordering_and_c1_characters_in_a_name_are_escaped_on_the_terminal() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let out = in_netns(
        r#"ip link add ppt0 type veth peer name ppt1 && ip link set ppt0 name "$(printf 'a\342\200\256b\302\233c')" && "$0" status"#,
    )
    .daemon_dirs(dir.path())
    .output()
    .unwrap();
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("a\\u{202e}b\\u{9b}c (ifindex"), "{stdout}");
    assert!(
        !stdout.contains('\u{202e}') && !stdout.contains('\u{9b}'),
        "{stdout}"
    );
}
