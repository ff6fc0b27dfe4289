//! Files the daemon and the commands read at run time are what they claim
//! and are read off the loop's thread, bounded: a certificate the web
//! config names, or `TZ`, pointing at a FIFO or `/dev/zero`. The real
//! binary, in a throwaway network namespace (root only).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pptune_tests::bin::{DaemonDirs, in_netns, pptune_bin, require_root, rss_kib, write_policy};
use pptune_tests::http::web_config;
use tokio::time::Instant;

fn mkfifo(p: &Path) {
    nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// Waits up to `secs` for `child` to exit; kills it (-9) if it does not.
fn exits_within(child: &mut Child, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

fn run_daemon(dir: &Path, policy: &Path, tz: Option<&str>) -> Child {
    let mut c = in_netns(
        "ip link set lo up && exec \"$0\" --config \"$1\" run --log-format human --metrics-listen 127.0.0.1:9864",
    );
    c.arg(policy)
        .daemon_dirs(dir)
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("log")).unwrap());
    if let Some(tz) = tz {
        c.env("TZ", tz);
    }
    c.spawn().unwrap()
}

fn wait_running(dir: &Path, child: &mut Child) {
    let ctl = dir.join("control.sock");
    for _ in 0..300 {
        if ctl.exists() || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if !ctl.exists() {
        let _ = child.kill();
        let _ = child.wait();
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        panic!("the daemon did not start:\n{log}");
    }
}

fn sigterm(pid: u32) {
    let _ = Command::new("kill").arg(pid.to_string()).status();
}

/// The certificate renamed into a FIFO while the daemon serves TLS, then a
/// connection (which re-reads the files): the daemon wedged, SIGTERM was
/// ignored, only kill -9 ended it. Now the FIFO is refused, the last good
/// certificate serves, and SIGTERM ends the daemon.
#[test]
fn a_certificate_replaced_by_a_fifo_wedges_nothing() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let web = web_config(d, true, &[]);
    let policy = write_policy(
        d,
        &format!(
            "mode: observe\ndaemon:\n  metrics_web_config: {}\n",
            web.display()
        ),
    );
    let mut child = run_daemon(d, &policy, None);
    let pid = child.id();
    wait_running(d, &mut child);
    std::fs::remove_file(d.join("s.crt")).unwrap();
    mkfifo(&d.join("s.crt"));
    let curl = |path: &str| {
        Command::new("nsenter")
            .args(["-t", &pid.to_string(), "-n", "curl", "-sk", "-m", "3"])
            .args(["-o", "/dev/null", "-w", "%{http_code}"])
            .arg(format!("https://127.0.0.1:9864{path}"))
            .output()
            .unwrap()
    };
    let first = curl("/healthz");
    let second = curl("/healthz");
    sigterm(pid);
    let stopped = exits_within(&mut child, 10);
    let log = std::fs::read_to_string(d.join("log")).unwrap();
    assert!(stopped, "SIGTERM did not end the daemon:\n{log}");
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        "200",
        "{first:?}\n{log}"
    );
    assert_eq!(
        String::from_utf8_lossy(&second.stdout),
        "200",
        "{second:?}\n{log}"
    );
    assert!(log.contains("not a regular file: a FIFO"), "{log}");
}

/// `check` of a policy whose web config names a FIFO as its key: it hung.
/// Now an error at once, exit 78 (the web config is part of the policy).
#[test]
fn check_refuses_a_fifo_key_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let web = web_config(d, true, &[]);
    std::fs::remove_file(d.join("s.key")).unwrap();
    mkfifo(&d.join("s.key"));
    let policy = write_policy(
        d,
        &format!("daemon:\n  metrics_web_config: {}\n", web.display()),
    );
    let mut c = Command::new(pptune_bin())
        .arg("--config")
        .arg(&policy)
        .arg("check")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(exits_within(&mut c, 10), "check hung on a FIFO key");
    let out = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("s.key: not a regular file: a FIFO"), "{err}");
}

/// `TZ` naming a FIFO (start-up hung, SIGTERM ignored) or `/dev/zero`
/// (read until the host's memory was gone), and the variant `TZ=:/dev/zero`
/// (the C library's `:file` form): the daemon starts in UTC, says why,
/// stays small, and SIGTERM ends it.
#[test]
fn a_tz_that_is_a_fifo_or_dev_zero_neither_wedges_nor_fills_the_daemon() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("tz");
    mkfifo(&fifo);
    let policy = write_policy(d, "mode: observe\n");
    for (tz, says) in [
        (fifo.display().to_string(), "a FIFO"),
        ("/dev/zero".to_owned(), "a device node"),
        (":/dev/zero".to_owned(), "a device node"),
    ] {
        let mut child = run_daemon(d, &policy, Some(&tz));
        let pid = child.id();
        wait_running(d, &mut child);
        let rss = rss_kib(pid);
        sigterm(pid);
        let stopped = exits_within(&mut child, 10);
        let log = std::fs::read_to_string(d.join("log")).unwrap();
        assert!(stopped, "TZ={tz}: SIGTERM did not end the daemon:\n{log}");
        assert!(rss < 200 * 1024, "TZ={tz}: {rss} KiB");
        assert!(
            log.contains("the local time zone does not load") && log.contains(says),
            "TZ={tz}:\n{log}"
        );
    }
}
