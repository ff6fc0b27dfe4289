//! One daemon per network namespace: two daemons given
//! different runtime directories each took their own directory's state
//! lock and both enforced on the same NICs.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::Duration;

use pptune_tests::bin::{
    DaemonDirs, SpawnLogged, in_netns, policy_in_tempdir, pptune_bin, require_root,
};

#[test]
fn a_second_daemon_in_the_same_netns_exits_with_a_clear_message() {
    require_root("a throwaway network namespace");
    let (dir, cfg) = policy_in_tempdir("mode: observe\n");
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
    // said "nothing to restore", exit 0, while the daemon held originals;
    // it now says where they are and fails.
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
    let mut holder = holder_netns();
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

/// A holder of a network namespace: `unshare -n sleep 60`, lo up.
///
/// `unshare` is the holder's pid before it has unshared: entered then,
/// `nsenter -t` lands in the test's own namespace (the host's). So the
/// holder is used only once its namespace is another one than this
/// process's; before, lo was set up in whichever namespace the race gave
/// (the host's, and then the new one's lo stayed down: 127.0.0.1 refused
/// the daemon's endpoint in 1 of 2 runs), and a daemon could start there.
fn holder_netns() -> std::process::Child {
    let holder = Command::new("unshare")
        .args(["-n", "sleep", "60"])
        .spawn()
        .unwrap();
    let hp = holder.id().to_string();
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_link(format!("/proc/{hp}/ns/net"))
        .ok()
        .as_ref()
        == Some(&ours)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "unshare -n never left our namespace"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let st = Command::new("nsenter")
        .args(["-t", &hp, "-n", "ip", "link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(st.success(), "lo up in the holder's namespace");
    holder
}

/// What a local user can hold in the namespace of `pid`, created on a
/// thread that entered it with the file-system uid `uid` (the owner the
/// kernel records for a socket): the abstract instance name, a TCP port.
struct Squatter {
    _instance: Option<std::os::unix::net::UnixListener>,
    port: Option<std::net::TcpListener>,
}

fn squat(pid: u32, uid: u32, instance: bool, port: Option<u16>) -> Squatter {
    std::thread::spawn(move || {
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).unwrap();
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        // Per thread: only this thread's new sockets are the other user's.
        nix::unistd::setfsuid(nix::unistd::Uid::from_raw(uid));
        let instance = instance.then(|| {
            use std::os::linux::net::SocketAddrExt as _;
            let a = std::os::unix::net::SocketAddr::from_abstract_name("pptune/instance").unwrap();
            std::os::unix::net::UnixListener::bind_addr(&a).unwrap()
        });
        let port = port.map(|p| std::net::TcpListener::bind(("127.0.0.1", p)).unwrap());
        Squatter {
            _instance: instance,
            port,
        }
    })
    .join()
    .unwrap()
}

/// Any user could bind `@pptune/instance` first: `run` exited 1 and
/// `restore` refused. A holder that is not root (nor pptune's own user)
/// is not a pptune: both go ahead, and the daemon says who holds it.
#[test]
fn a_squatted_instance_name_stops_neither_run_nor_restore() {
    require_root("a throwaway network namespace");
    let (dir, cfg) = policy_in_tempdir("mode: observe\n");
    let mut holder = holder_netns();
    let hp = holder.id();
    let _squatter = squat(hp, 65534, true, None);
    let out = Command::new("nsenter")
        .args(["-t", &hp.to_string(), "-n"])
        .arg(pptune_bin())
        .arg("restore")
        .daemon_dirs(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "restore: {out:?}");
    let log = dir.path().join("log");
    let mut run = Command::new("nsenter")
        .args(["-t", &hp.to_string(), "-n"])
        .arg(pptune_bin())
        .args(["--config", cfg.to_str().unwrap(), "run"])
        .args(["--metrics-listen", "127.0.0.1:0", "--log-format", "human"])
        .daemon_dirs(dir.path())
        .env_remove("NOTIFY_SOCKET")
        .spawn_logged(&log);
    let ctl = dir.path().join("control.sock");
    for _ in 0..200 {
        if ctl.exists() || run.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let running = run.try_wait().unwrap().is_none();
    let _ = run.kill();
    run.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(running && ctl.exists(), "run did not start:\n{text}");
    assert!(text.contains("held by uid 65534"), "{text}");
    holder.kill().unwrap();
    holder.wait().unwrap();
}

/// Squatting the metrics port stopped `run` (exit 1). That refusal is now
/// `daemon.metrics_port_taken`: by default the daemon starts, says the
/// port is taken, and serves once it is free (the variant: the squatter
/// goes away); `exit` refuses to start and names the key.
#[test]
fn a_taken_metrics_port_is_the_operators_choice() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let mut holder = holder_netns();
    let hp = holder.id();
    let mut squatter = squat(hp, 65534, false, Some(0));
    let port = squatter.port.as_ref().unwrap().local_addr().unwrap().port();
    let policy = |taken: &str| {
        let p = dir.path().join(format!("{taken}.yaml"));
        std::fs::write(
            &p,
            format!(
                "mode: observe\ndaemon:\n  metrics_listen: 127.0.0.1:{port}\n  metrics_port_taken: {taken}\n"
            ),
        )
        .unwrap();
        p
    };
    let start = |cfg: &std::path::Path, log: &str| {
        Command::new("nsenter")
            .args(["-t", &hp.to_string(), "-n"])
            .arg(pptune_bin())
            .args([
                "--config",
                cfg.to_str().unwrap(),
                "run",
                "--log-format",
                "human",
            ])
            .daemon_dirs(dir.path())
            .env_remove("NOTIFY_SOCKET")
            .spawn_logged(dir.path().join(log))
    };
    // `exit`: refuses, naming the key.
    let mut c = start(&policy("exit"), "exit.log");
    let st = c.wait().unwrap();
    let text = std::fs::read_to_string(dir.path().join("exit.log")).unwrap();
    assert_eq!(st.code(), Some(1), "{text}");
    assert!(text.contains("metrics_port_taken: exit"), "{text}");
    // `retry` (the default): runs, warns, serves once the port is free.
    let mut c = start(&policy("retry"), "retry.log");
    let healthz = || {
        Command::new("nsenter")
            .args(["-t", &hp.to_string(), "-n", "curl", "-sf", "-m", "2"])
            .arg(format!("http://127.0.0.1:{port}/healthz"))
            .output()
            .unwrap()
            .status
            .success()
    };
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.try_wait().unwrap().is_none(), "run exited");
    let text = std::fs::read_to_string(dir.path().join("retry.log")).unwrap();
    assert!(text.contains("the metrics port is taken"), "{text}");
    squatter.port = None;
    // The daemon binds again every 5 s: within 20 s, however loaded the host.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut served = false;
    while !served && tokio::time::Instant::now() < deadline {
        served = healthz();
        std::thread::sleep(Duration::from_millis(250));
    }
    let _ = c.kill();
    c.wait().unwrap();
    let text = std::fs::read_to_string(dir.path().join("retry.log")).unwrap();
    assert!(served, "not served after the port was freed:\n{text}");
    holder.kill().unwrap();
    holder.wait().unwrap();
}
