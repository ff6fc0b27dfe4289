//! Load on the real `pptune run` binary in a throwaway network namespace
//! (RELIABILITY.md §5, load and input):
//!
//! - a policy reload storm: SIGHUP every 10 ms, the file alternating between
//!   a valid and an invalid policy; the last good policy stays in force, the
//!   loop keeps its interval, memory and descriptors stay flat;
//! - control-socket garbage: clients that send junk, oversized lines, or
//!   nothing at all and hold the connection; the daemon's descriptors stay
//!   bounded, a well-formed request is still answered, the loop keeps its
//!   interval;
//! - two daemons started at the same instant in one namespace: exactly one
//!   runs, the other exits with a clear message.
//!
//! A binary of its own: it loads the host, and the timing tests beside it
//! in a shared binary would be judged under its load.
//!
//! `PPTUNE_LOAD_SECS` sets how long the storm and the garbage run (default
//! 20; RELIABILITY.md quotes the 60-second form). Each test prints a
//! `MEASURE` line with its figures.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use netlink::netns::TempNetns;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pptune_tests::bin::{DaemonDirs, SpawnLogged, pptune_bin, require_root};
use tokio::time::Instant;

const METRICS: &str = "127.0.0.1:9864";

fn load_secs() -> u64 {
    std::env::var("PPTUNE_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// A namespace with a veth pair and `pptune run` in it.
struct Daemon {
    ns: TempNetns,
    child: Child,
    dir: tempfile::TempDir,
}

impl Daemon {
    fn start(tag: &str, policy: &str) -> Self {
        let ns = TempNetns::create(tag).unwrap();
        ns.ip(&["link", "set", "lo", "up"]).unwrap();
        ns.ip(&[
            "link", "add", "ppt0", "type", "veth", "peer", "name", "ppt1",
        ])
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.yaml"), policy).unwrap();
        let child = Self::spawn(&ns, dir.path(), "run");
        let d = Self { ns, child, dir };
        d.wait_ready();
        d
    }

    fn spawn(ns: &TempNetns, dir: &Path, runtime: &str) -> Child {
        let run_dir = dir.join(runtime);
        std::fs::create_dir_all(&run_dir).unwrap();
        // `ip netns exec` execs pptune: the child's pid is the daemon's.
        Command::new("ip")
            .args(["netns", "exec", ns.name()])
            .arg(pptune_bin())
            .arg("--config")
            .arg(dir.join("policy.yaml"))
            .args(["run", "--metrics-listen", METRICS, "--log-format", "json"])
            .daemon_dirs(&run_dir)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("JOURNAL_STREAM")
            .spawn_logged(dir.join(format!("{runtime}.log")))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("run.log")).unwrap_or_default()
    }

    fn control_socket(&self) -> PathBuf {
        self.dir.path().join("run/control.sock")
    }

    /// `GET path` on the daemon's metrics listener, inside the namespace.
    fn get(&self, path: &str) -> Option<String> {
        let path = path.to_owned();
        self.ns
            .run(move || async move {
                let r = pptune_tests::http::get(METRICS, &path, &[])?;
                Some(pptune_tests::http::body(&r).to_owned())
            })
            .unwrap()
    }

    fn readyz(&self) -> Option<serde_json::Value> {
        self.get("/readyz")
            .and_then(|b| serde_json::from_str(&b).ok())
    }

    fn wait_ready(&self) {
        for _ in 0..200 {
            if self
                .readyz()
                .is_some_and(|r| r["last_sample_age_seconds"].is_number())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the daemon never sampled:\n{}", self.log());
    }

    /// A sample line's value from `/metrics` (text form), e.g.
    /// `pptune_policy_reloads_total{result="ok"}`.
    fn metric(&self, series: &str) -> Option<f64> {
        let body = self.get("/metrics")?;
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    }

    fn rss_kib(&self) -> u64 {
        pptune_tests::bin::rss_kib(self.pid())
    }

    fn fds(&self) -> usize {
        pptune_tests::bin::open_fds(self.pid())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `/readyz` every 250 ms on its own thread until `stop`; returns
/// the largest sample age seen, in seconds, and how many polls answered.
fn watch_sample_age(d: &Daemon, stop: &AtomicBool) -> (f64, u32) {
    let (mut worst, mut answered) = (0.0f64, 0u32);
    while !stop.load(Ordering::Relaxed) {
        if let Some(age) = d
            .readyz()
            .and_then(|r| r["last_sample_age_seconds"].as_f64())
        {
            worst = worst.max(age);
            answered += 1;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    (worst, answered)
}

/// Writes `text` to `path` atomically (temp file + rename), as an operator's
/// configuration management does: a reload never reads half a file.
fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
#[ignore = "needs root (a throwaway network namespace); run with --include-ignored"]
fn a_reload_storm_keeps_the_last_good_policy_and_the_interval() {
    require_root("a throwaway network namespace");
    // Starts at 2 s; the storm's valid policy says 1 s, its invalid one has
    // a duration that does not parse.
    let d = Daemon::start("hup", "mode: observe\ntiming:\n  interval: 2s\n");
    let policy = d.dir.path().join("policy.yaml");
    let valid = "mode: observe\ntiming:\n  interval: 1s\n";
    let invalid = "mode: observe\ntiming:\n  interval: one second\n";
    write_atomically(&policy, valid);
    kill(Pid::from_raw(d.pid().try_into().unwrap()), Signal::SIGHUP).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let (rss0, fds0) = (d.rss_kib(), d.fds());

    let stop = AtomicBool::new(false);
    let secs = load_secs();
    let mut sent = 0u64;
    let (worst_age, answered) = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch_sample_age(&d, &stop));
        let pid = Pid::from_raw(d.pid().try_into().unwrap());
        let t0 = Instant::now();
        let mut next = t0;
        while t0.elapsed() < Duration::from_secs(secs) {
            write_atomically(
                &policy,
                if sent.is_multiple_of(2) {
                    invalid
                } else {
                    valid
                },
            );
            kill(pid, Signal::SIGHUP).unwrap();
            sent += 1;
            next += Duration::from_millis(10);
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        stop.store(true, Ordering::Relaxed);
        watcher.join().unwrap()
    });
    // End on an invalid file: the last good policy (1 s) stays in force.
    write_atomically(&policy, invalid);
    kill(Pid::from_raw(d.pid().try_into().unwrap()), Signal::SIGHUP).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let r = d.readyz().expect("readyz after the storm");
    let (rss1, fds1) = (d.rss_kib(), d.fds());
    let ok = d
        .metric("pptune_policy_reloads_total{result=\"ok\"}")
        .unwrap_or(0.0);
    let bad = d
        .metric("pptune_policy_reloads_total{result=\"invalid\"}")
        .unwrap_or(0.0);
    println!(
        "MEASURE reload_storm secs={secs} sighups={sent} reloads_ok={ok} reloads_invalid={bad} \
         worst_sample_age_s={worst_age:.3} readyz_answers={answered} rss_kib={rss0}->{rss1} fds={fds0}->{fds1}"
    );
    assert_eq!(r["policy_valid"], false, "{r}");
    assert_eq!(r["interval_seconds"], 1.0, "the last good policy: {r}");
    assert!(
        r["reasons"][0]
            .as_str()
            .is_some_and(|s| s.contains("previous policy stays in force")),
        "{r}"
    );
    // Signals coalesce; a good share of them must still have been acted on,
    // both kinds.
    assert!(ok >= 10.0 && bad >= 10.0, "reloads ok={ok} invalid={bad}");
    assert!(
        answered >= 4 * u32::try_from(secs).unwrap() / 2,
        "readyz answered {answered} times"
    );
    assert!(
        worst_age <= 2.0,
        "sample age reached {worst_age:.2} s at a 1 s interval:\n{}",
        d.log()
    );
    assert!(rss1 <= rss0 + 4096, "RSS grew {rss0} -> {rss1} KiB");
    assert!(fds1 <= fds0, "descriptors grew {fds0} -> {fds1}");
}

#[test]
#[ignore = "needs root (a throwaway network namespace); run with --include-ignored"]
fn control_socket_garbage_and_idle_clients_stay_bounded() {
    require_root("a throwaway network namespace");
    let d = Daemon::start("ctl", "mode: observe\ntiming:\n  interval: 1s\n");
    let sock = d.control_socket();
    std::thread::sleep(Duration::from_secs(2));
    let (rss0, fds0) = (d.rss_kib(), d.fds());

    let stop = Arc::new(AtomicBool::new(false));
    let secs = load_secs();
    // 200 clients that connect and send nothing, held open.
    let idle: Vec<UnixStream> = (0..200)
        .filter_map(|_| UnixStream::connect(&sock).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let fds_idle = d.fds();
    // While they hold on, a well-formed request is answered once the
    // daemon has cut the idle ones off (5 s to send a request line); until
    // then it may be told "busy".
    let t = Instant::now();
    let mut view = None;
    while view.is_none() && t.elapsed() < Duration::from_secs(10) {
        view = view_request(&sock);
        if view.is_none() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let view_latency = t.elapsed();

    let (worst_age, answered, junk_sent) = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch_sample_age(&d, &stop));
        let junk: Vec<_> = (0..8u64)
            .map(|seed| {
                let stop = Arc::clone(&stop);
                let sock = sock.clone();
                s.spawn(move || send_junk(&sock, seed, &stop))
            })
            .collect();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        let sent: u64 = junk.into_iter().map(|j| j.join().unwrap()).sum();
        let (age, n) = watcher.join().unwrap();
        (age, n, sent)
    });
    drop(idle);
    // Past the request-line timeout every connection the load opened is
    // closed on the daemon's side.
    std::thread::sleep(pptune::publish::control::REQUEST_LINE_TIMEOUT + Duration::from_secs(1));
    let after = view_request(&sock);
    let (rss1, fds1) = (d.rss_kib(), d.fds());
    println!(
        "MEASURE control_garbage secs={secs} junk_connections={junk_sent} idle_clients=200 \
         fds={fds0}->{fds_idle}(idle)->{fds1} view_latency_ms={} worst_sample_age_s={worst_age:.3} \
         rss_kib={rss0}->{rss1}",
        view_latency.as_millis()
    );
    assert!(
        view.is_some(),
        "no view while 200 idle clients hold the socket"
    );
    assert!(after.is_some(), "no view after the garbage");
    assert!(
        fds_idle <= fds0 + pptune::publish::control::MAX_CLIENTS + 2,
        "200 idle clients took {} descriptors",
        fds_idle - fds0
    );
    assert!(
        view_latency <= pptune::publish::control::REQUEST_LINE_TIMEOUT + Duration::from_secs(2),
        "a view took {view_latency:?} behind idle clients"
    );
    assert!(fds1 <= fds0, "descriptors grew {fds0} -> {fds1}");
    assert!(answered > 0);
    assert!(worst_age <= 2.0, "sample age reached {worst_age:.2} s");
    assert!(rss1 <= rss0 + 4096, "RSS grew {rss0} -> {rss1} KiB");
}

/// A `view` request over the control socket; `Some` when a view came back.
fn view_request(sock: &Path) -> Option<serde_json::Value> {
    let mut s = UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"{\"cmd\":\"view\"}\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let v: serde_json::Value = serde_json::from_str(out.trim()).ok()?;
    (v["reply"] == "view").then_some(v)
}

/// Connects again and again until `stop`, each time sending one kind of
/// junk: random bytes, a line past the 64 KiB limit, JSON of the wrong
/// shape, or half a line and a close. Returns the connections made.
fn send_junk(sock: &Path, seed: u64, stop: &AtomicBool) -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = UnixStream::connect(sock) else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        n += 1;
        let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let payload: Vec<u8> = match rnd() % 4 {
            0 => (0..rnd() % 4096).map(|_| rnd().to_le_bytes()[0]).collect(),
            1 => vec![b'x'; 70 * 1024],
            2 => b"{\"cmd\":\"restore\",\"interfaces\":42}\n".to_vec(),
            _ => b"{\"cmd\":\"vie".to_vec(),
        };
        let _ = s.write_all(&payload);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    }
    n
}

#[test]
#[ignore = "needs root (a throwaway network namespace); run with --include-ignored"]
fn two_daemons_started_at_once_one_runs_and_the_other_says_why() {
    require_root("a throwaway network namespace");
    let ns = TempNetns::create("race").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), "mode: observe\n").unwrap();
    let rounds = 10;
    for round in 0..rounds {
        // Different runtime directories: the state lock alone would not
        // keep them apart; the per-namespace instance socket must.
        let mut a = Daemon::spawn(&ns, dir.path(), &format!("a{round}"));
        let mut b = Daemon::spawn(&ns, dir.path(), &format!("b{round}"));
        std::thread::sleep(Duration::from_secs(3));
        let (ea, eb) = (a.try_wait().unwrap(), b.try_wait().unwrap());
        let log = |r: &str| {
            std::fs::read_to_string(dir.path().join(format!("{r}{round}.log"))).unwrap_or_default()
        };
        let (winner, loser, loser_log) = match (ea, eb) {
            (None, Some(st)) => (a, st, log("b")),
            (Some(st), None) => (b, st, log("a")),
            _ => panic!(
                "round {round}: not exactly one running: a={ea:?} b={eb:?}\n{}\n{}",
                log("a"),
                log("b")
            ),
        };
        assert!(!loser.success(), "round {round}: {loser:?}");
        assert!(
            loser_log.contains("another pptune is running in this network namespace"),
            "round {round}: {loser_log}"
        );
        let mut winner = winner;
        winner.kill().unwrap();
        winner.wait().unwrap();
    }
    println!("MEASURE instance_race rounds={rounds} exactly_one_ran={rounds}");
}
