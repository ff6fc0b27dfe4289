//! The real `pptune` binary on the real kernel, in a throwaway network
//! namespace (root only): `Type=notify` through sd-notify with a fake
//! `NOTIFY_SOCKET` and `WATCHDOG_USEC`, SIGHUP reload, a device appearing
//! while it runs (rtnetlink notification → device map), the control socket,
//! SIGTERM → STOPPING and exit 0. And, without privileges, `check`/`run`
//! exiting 78 on an invalid policy.

// Test helpers may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pptune_tests::bin::{
    ADD_VETH, DaemonDirs, SpawnLogged, in_netns, notify_socket, policy_in_tempdir, pptune_bin,
    require_root, run_beside_veth,
};
use tokio::time::Instant;

/// Datagrams received until `pred` matches one, or the deadline.
fn wait_for(
    sock: &UnixDatagram,
    all: &mut Vec<String>,
    secs: u64,
    pred: impl Fn(&str) -> bool,
) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = sock.recv(&mut buf) {
            let m = String::from_utf8_lossy(&buf[..n]).into_owned();
            let hit = pred(&m);
            all.push(m);
            if hit {
                return true;
            }
        }
    }
    false
}

/// Starts `cmd` (a `pptune run`) as a service manager would, its
/// notifications on a socket under `dir` and its log in `dir/log`, and
/// waits up to 30 s for READY=1; otherwise kills it and fails with what it
/// sent and its log. Returns the daemon, the socket and what it sent up to
/// READY.
fn start_ready(cmd: &mut Command, dir: &Path) -> (std::process::Child, UnixDatagram, Vec<String>) {
    let (notify, sock) = notify_socket(dir);
    let mut child = cmd
        .env("NOTIFY_SOCKET", &notify)
        .env_remove("JOURNAL_STREAM")
        .spawn_logged(dir.join("log"));
    let mut msgs = Vec::new();
    if !wait_for(&sock, &mut msgs, 30, |m| m.contains("READY=1")) {
        let _ = child.kill();
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        panic!("no READY=1: {msgs:?}\n{log}");
    }
    (child, sock, msgs)
}

/// Whether, within 5 s, the view the daemon's control socket under
/// `run_dir` serves shows a device that `pred` takes.
fn view_shows(
    run_dir: &Path,
    pred: impl Fn(&pptune::publish::control::DeviceView) -> bool,
) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ctl = pptune::publish::control::socket_path(run_dir);
    (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        rt.block_on(pptune::publish::control::query(&ctl))
            .is_some_and(|v| v.devices.iter().any(&pred))
    })
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn invalid_policy_exits_78_for_check_and_run() {
    let (dir, bad) = policy_in_tempdir("rings:\n  rx_rign: 4096\n");
    for cmd in ["check", "run"] {
        let out = Command::new(pptune_bin())
            .args(["--config", bad.to_str().unwrap(), cmd])
            .daemon_dirs(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(78), "{cmd}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("policy.yaml:2:"), "{cmd}: {err}");
    }
    let out = Command::new(pptune_bin())
        .args(["--config", dir.path().to_str().unwrap(), "check"])
        .output()
        .unwrap();
    // The directory has policy.yaml (the bad one): still 78.
    assert_eq!(out.status.code(), Some(78));
}

#[test]
fn systemd_notify_reload_device_appearance_and_sigterm_in_a_netns() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("etc");
    std::fs::create_dir(&cfg).unwrap();
    let run_dir = dir.path().join("run");
    // unshare execs sh, which brings lo up and execs pptune: one pid all
    // along, so the signals reach pptune and NOTIFY_SOCKET's sender matches.
    let (mut child, sock, msgs) = start_ready(
        in_netns(
            "ip link set lo up && exec \"$0\" --config \"$1\" run --metrics-listen 127.0.0.1:0",
        )
        .arg(&cfg)
        .env("WATCHDOG_USEC", "2000000")
        .daemon_dirs(&run_dir)
        .env_remove("WATCHDOG_PID"),
        dir.path(),
    );
    let pid = child.id();
    let log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    assert!(msgs.last().unwrap().contains("STATUS="), "{msgs:?}");
    // The loop pings the watchdog at least every second (half of 2 s).
    let t0 = Instant::now();
    let mut pings = Vec::new();
    assert!(wait_for(&sock, &mut pings, 3, |m| m.contains("WATCHDOG=1")));
    assert!(wait_for(&sock, &mut pings, 3, |m| m.contains("WATCHDOG=1")));
    assert!(t0.elapsed() < Duration::from_secs(3), "{pings:?}");
    // A device appears while the daemon runs: the link notification makes
    // it resync, and the control socket shows it.
    let st = Command::new("nsenter")
        .args([
            "-t",
            &pid.to_string(),
            "-n",
            "ip",
            "link",
            "add",
            "ppt0",
            "type",
            "veth",
            "peer",
            "name",
            "ppt1",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let seen = view_shows(&run_dir, |d| d.name == "ppt0");
    assert!(
        seen,
        "the new veth never reached the daemon's view\n{}",
        log()
    );
    // SIGHUP: RELOADING=1 (+ MONOTONIC_USEC), then READY=1 again. The
    // policy changed meanwhile: the reload logs the new policy's hash, the
    // start logged the embedded default's.
    std::fs::write(cfg.join("policy.yaml"), "timing:\n  interval: 2s\n").unwrap();
    signal(pid, "-HUP");
    let mut rel = Vec::new();
    assert!(
        wait_for(&sock, &mut rel, 10, |m| m.contains("RELOADING=1")),
        "{rel:?}"
    );
    assert!(rel.last().unwrap().contains("MONOTONIC_USEC="), "{rel:?}");
    assert!(
        wait_for(&sock, &mut rel, 10, |m| m.contains("READY=1")),
        "{rel:?}"
    );
    // SIGTERM: STOPPING=1 and exit 0, control socket removed.
    signal(pid, "-TERM");
    let mut stop = Vec::new();
    assert!(
        wait_for(&sock, &mut stop, 10, |m| m.contains("STOPPING=1")),
        "{stop:?}"
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", log());
    assert!(!pptune::publish::control::socket_path(&run_dir).exists());
    // JSON lines on stderr outside journald.
    let l = log();
    let first = l.lines().next().unwrap_or_default();
    assert!(
        serde_json::from_str::<serde_json::Value>(first).is_ok(),
        "{first}"
    );
    let hashes: Vec<(String, String)> = l
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| {
            let msg = v["message"].as_str()?;
            let hash = v["policy_hash"].as_str()?;
            Some((msg.split(':').next()?.to_owned(), hash.to_owned()))
        })
        .collect();
    assert!(
        matches!(hashes.as_slice(), [(a, h1), (b, h2)]
            if a == "policy loaded" && b == "policy reloaded" && h1 != h2 && h1.len() == 16 && h2.len() == 16),
        "{hashes:?}\n{l}"
    );
}

#[test]
fn an_ethtool_change_by_hand_is_an_operator_override_on_the_real_kernel() {
    require_root("a throwaway network namespace");
    // veth has no page pools, but a selector without `require_pools` puts it
    // under enforce, and veth has real channels (rx/tx) whose CHANNELS_NTF
    // the kernel sends to every monitor subscriber, pptune included.
    let (dir, policy) = policy_in_tempdir(
        "mode: enforce\nselectors:\n  - names: [\"ppt*\"]\n    require_pools: false\nchannels:\n  enabled: true\ntiming:\n  interval: 1s\n",
    );
    let run_dir = dir.path().join("run");
    let (mut child, _sock, _) = start_ready(
        run_beside_veth().arg(&policy).daemon_dirs(&run_dir),
        dir.path(),
    );
    let pid = child.id();
    let log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    // Wait until the daemon has decided on ppt0 (enforce mode).
    let enforced = view_shows(&run_dir, |d| d.name == "ppt0" && d.mode == "enforce");
    assert!(enforced, "ppt0 never enforced\n{}", log());
    let st = Command::new("nsenter")
        .args([
            "-t",
            &pid.to_string(),
            "-n",
            "ethtool",
            "-L",
            "ppt0",
            "rx",
            "2",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let overridden = view_shows(&run_dir, |d| {
        d.name == "ppt0" && d.overrides.contains(&"channels.rx".to_owned())
    });
    signal(pid, "-TERM");
    let status = child.wait().unwrap();
    assert!(overridden, "no operator override recorded\n{}", log());
    assert_eq!(status.code(), Some(0));
    assert!(log().contains("operator override"), "{}", log());
}

#[test]
fn restore_command_puts_a_recorded_original_back_on_the_real_kernel() {
    require_root("a throwaway network namespace");
    use policy::{ChannelField, Knob};
    use pptune::act::state::{StateFile, read_boot_id};
    // The record a killed daemon left: ppt0's rx channels were 1 before
    // pptune (here: an ethtool -L in the script) changed them to 2.
    let dir = tempfile::tempdir().unwrap();
    let id = policy::snapshot::DeviceId {
        name_fallback: Some("ppt0".into()),
        ..Default::default()
    };
    let mut rec = StateFile::new(read_boot_id().unwrap());
    rec.record_original(&id, "ppt0", Knob::Channels(ChannelField::Rx), 1);
    std::fs::write(
        dir.path().join("state.json"),
        serde_json::to_string(&rec).unwrap(),
    )
    .unwrap();
    let out = in_netns(&format!(
        "{ADD_VETH} && ethtool -L ppt0 rx 2 && \"$0\" restore && ethtool -l ppt0"
    ))
    .daemon_dirs(dir.path())
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("ppt0: channels.rx restored to 1"),
        "{stdout}"
    );
    // ethtool -l: the second "RX:" line is the current setting.
    let current = stdout
        .split("Current hardware settings:")
        .nth(1)
        .and_then(|s| s.lines().find(|l| l.starts_with("RX:")))
        .unwrap_or_default();
    assert_eq!(current.split_whitespace().nth(1), Some("1"), "{stdout}");
    assert!(
        !dir.path().join("state.json").exists(),
        "record not cleared"
    );
}

#[test]
fn plan_answers_at_once_when_nothing_can_be_judged_and_changes_nothing() {
    require_root("a throwaway network namespace");
    // A finding would need 3 samples over 20 s; veth has no page pools, so
    // there is nothing to wait for.
    let (dir, policy) = policy_in_tempdir(
        "mode: enforce\nselectors:\n  - names: [\"ppt*\"]\n    require_pools: false\ntiming:\n  interval: 10s\n  window: 10s\n  windows_for_finding: 2\n",
    );
    let t0 = Instant::now();
    let out = in_netns("ip link add ppt0 type veth peer name ppt1 && \"$0\" --config \"$1\" plan --json && ethtool -l ppt0 | tail -4")
        .arg(&policy)
        .daemon_dirs(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    // stderr is a pipe here: no progress, no banner.
    assert!(!stderr.contains("sample"), "{stderr}");
    let json_end = stdout.rfind('}').unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout[..=json_end]).unwrap();
    assert_eq!(v["samples"], 1, "{v}");
    let decisions = v["decisions"].as_array().unwrap();
    let d = decisions.iter().find(|d| d["device"] == "ppt0").unwrap();
    assert_eq!(d["mode"], "enforce");
    assert_eq!(d["action"]["kind"], "hold", "{d}");
    assert_eq!(d["reason"], "no_pools", "{d}");
    assert_eq!(d["id"].as_str().unwrap().len(), 12);
    // Nothing changed: veth's default single rx channel.
    assert!(
        stdout[json_end..].contains("RX:\t\t1") || stdout[json_end..].contains("RX: 1"),
        "{stdout}"
    );
}

/// docs/policy.md: `daemon.metrics_listen: null` = no endpoint. It listened
/// on 127.0.0.1:9864 all the same (null fell back to the default). Now the
/// daemon runs (READY=1) with no listening socket in its namespace.
#[test]
fn metrics_listen_null_serves_no_endpoint() {
    require_root("a throwaway network namespace");
    let (dir, cfg) = policy_in_tempdir("daemon:\n  metrics_listen: null\n");
    let (mut child, _sock, _) = start_ready(
        in_netns("ip link set lo up && exec \"$0\" --config \"$1\" run")
            .arg(&cfg)
            .daemon_dirs(dir.path().join("run"))
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID"),
        dir.path(),
    );
    let log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    let pid = child.id().to_string();
    let ss = Command::new("nsenter")
        .args(["-t", &pid, "-n", "ss", "-Hltn"])
        .output()
        .unwrap();
    let listening = String::from_utf8_lossy(&ss.stdout).into_owned();
    signal(child.id(), "-TERM");
    let status = child.wait().unwrap();
    assert!(ss.status.success());
    assert_eq!(
        listening.trim(),
        "",
        "a TCP listener in the daemon's namespace"
    );
    assert!(log().contains("no metrics endpoint"), "{}", log());
    assert_eq!(status.code(), Some(0), "{}", log());
}

/// `pptune run` as `nobody` in private network and mount namespaces whose
/// /run and /var/lib are empty and root's (the host's own pptune
/// directories, if it has them, are out of sight): `setup` runs in them
/// first (as root), `env` is the daemon's environment besides its own
/// directory variables, which are unset. Waits for the ready line (failing
/// the test without one in 30 s), stops it with SIGTERM; its exit code and
/// log.
fn unprivileged_run(log_path: &Path, setup: &str, env: &[String]) -> (Option<i32>, String) {
    let mut child = Command::new("unshare")
        .args([
            "-m",
            "-n",
            "sh",
            "-c",
            &format!(
                "mount --make-rprivate / && mount -t tmpfs -o mode=755 none /run \
                 && mount -t tmpfs -o mode=755 none /var/lib && ip link set lo up && {setup} \
                 && exec setpriv --reuid=65534 --regid=65534 --clear-groups \
                    env -u RUNTIME_DIRECTORY -u STATE_DIRECTORY -u XDG_STATE_HOME \
                    -u XDG_RUNTIME_DIR -u HOME \"$@\" \"$0\" run"
            ),
        ])
        .arg(pptune_bin())
        .args(env)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("JOURNAL_STREAM")
        .spawn_logged(log_path);
    let log = || std::fs::read_to_string(log_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log().contains("\"ready\"") && Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let ready = log().contains("\"ready\"");
    if ready {
        signal(child.id(), "-TERM");
    } else {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let text = log();
    assert!(ready, "no ready line in 30 s:\n{text}");
    (status.code(), text)
}

/// First contact: `run` in observe mode as an ordinary
/// user, on a host without pptune's system directories, keeps its files in
/// the user's own (`$XDG_RUNTIME_DIR/pptune`, `~/.local/state/pptune`),
/// says where at start, and, when no device can be judged, says why per
/// device instead of going silent. Before: "creating or opening runtime
/// directory /run/pptune: Permission denied", exit 1.
#[test]
fn an_unprivileged_observe_run_keeps_its_files_in_the_users_directories() {
    use std::os::unix::fs::PermissionsExt as _;
    require_root("network and mount namespaces, and setpriv to another user");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (xdg, home) = (dir.path().join("xdg"), dir.path().join("home"));
    for d in [&xdg, &home] {
        std::fs::create_dir(d).unwrap();
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    }
    let (status, text) = unprivileged_run(
        &dir.path().join("log"),
        "ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up",
        &[
            format!("XDG_RUNTIME_DIR={}", xdg.display()),
            format!("HOME={}", home.display()),
        ],
    );
    assert_eq!(status, Some(0), "{text}");
    let runtime = xdg.join("pptune");
    let state = home.join(".local/state/pptune");
    assert!(runtime.join("state.lock").exists(), "{text}");
    assert!(state.join("recording").is_dir(), "{text}");
    // It says where, and why nothing here can be judged: a veth's pools
    // are invisible to netlink (the same words `pptune status` prints).
    assert!(
        text.contains(&runtime.display().to_string())
            && text.contains(&state.display().to_string()),
        "the start-up lines do not name the directories:\n{text}"
    );
    assert!(
        text.contains("no device can be judged")
            && text.contains("v0: no page pools visible: driver veth"),
        "no first-contact explanation:\n{text}"
    );
}

/// An unprivileged observe `run` with no directory it can write (the
/// `nobody` user: no XDG_RUNTIME_DIR, a HOME that does not exist, /run
/// and /var/lib writable by root only) keeps
/// observing, with a warning naming each directory, instead of exit 1:
/// without CAP_NET_ADMIN it changes nothing, so it needs no file.
#[test]
fn an_unprivileged_observe_run_without_writable_directories_keeps_observing() {
    require_root("network and mount namespaces, and setpriv to another user");
    let dir = tempfile::tempdir().unwrap();
    let (status, text) = unprivileged_run(
        &dir.path().join("log"),
        "true",
        &["HOME=/nonexistent".to_owned()],
    );
    assert_eq!(status, Some(0), "{text}");
    assert!(
        text.contains("the runtime directory cannot be used: observing")
            && text.contains("/run/pptune"),
        "{text}"
    );
    assert!(
        text.contains("the state directory cannot be used: observing"),
        "{text}"
    );
}
