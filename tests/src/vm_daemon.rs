//! `pptune run` as a process in the test VM, for the suites that run the
//! real daemon against ppsim (vm_closed_loop, vm_crashpoints, vm_faults,
//! vm_personalities, vm_replay): the start, the looks at it and the stop
//! every such test repeats, written once. (The loop in-process on the fake
//! kernel is [`crate::daemon`].)
//!
//! A [`Daemon`] keeps its files in the test's directory, laid out as under
//! systemd: its policy (one of `tests/policies`, narrowed to the test's
//! device), the runtime directory `run/` (state record, control socket),
//! the state directory `state/` (recording, change journal), and its log
//! `pptune.log` (stdout and stderr, appended across restarts).
// A harness that cannot do what the test asked fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::{Instant, sleep};

use crate::bin::pptune_bin;
use crate::repo_root;

/// The policy `name` of `tests/policies` written to `dir`, its selector
/// `"ppsim*"` narrowed to `device` when one is given (the test's own, so a
/// device another test left behind is not touched).
#[must_use]
pub fn policy_file(dir: &Path, name: &str, device: Option<&str>) -> PathBuf {
    let src = repo_root().join("tests/policies").join(name);
    let mut text = std::fs::read_to_string(&src).unwrap();
    if let Some(dev) = device {
        assert!(
            text.contains("\"ppsim*\""),
            "{}: no \"ppsim*\" to narrow",
            src.display()
        );
        text = text.replace("\"ppsim*\"", &format!("\"{dev}\""));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// One `pptune run` under test, killed on drop. Built with [`Daemon::new`]
/// and the options after it, started with [`Daemon::start`] (or
/// [`Daemon::start_ready`]); [`Daemon::spawn`] starts it again on the same
/// files.
#[derive(Debug)]
pub struct Daemon {
    child: Option<Child>,
    config: PathBuf,
    run: PathBuf,
    state: PathBuf,
    log: PathBuf,
    listen: Option<String>,
    /// `NOTIFY_SOCKET` and `WATCHDOG_USEC` as systemd sets them, else
    /// neither.
    notify: Option<(PathBuf, Duration)>,
}

impl Daemon {
    /// A daemon with `policy` ([`policy_file`]) and its files in `dir`; no
    /// `--metrics-listen` (the policy's address), no notify socket. Not
    /// started.
    #[must_use]
    pub fn new(dir: &Path, policy: &str, device: Option<&str>) -> Self {
        Self {
            child: None,
            config: policy_file(dir, policy, device),
            run: dir.join("run"),
            state: dir.join("state"),
            log: dir.join("pptune.log"),
            listen: None,
            notify: None,
        }
    }

    /// `--metrics-listen 127.0.0.1:PORT`.
    #[must_use]
    pub fn metrics_port(self, port: u16) -> Self {
        self.metrics_listen(&format!("127.0.0.1:{port}"))
    }

    /// `--metrics-listen ADDR`.
    #[must_use]
    pub fn metrics_listen(mut self, addr: &str) -> Self {
        self.listen = Some(addr.to_owned());
        self
    }

    /// Another runtime directory than `dir/run` (a file system of the
    /// test's own).
    #[must_use]
    pub fn runtime_dir(mut self, run: &Path) -> Self {
        self.run = run.to_owned();
        self
    }

    /// Under a systemd-like notify socket with a watchdog period.
    #[must_use]
    pub fn notify(mut self, socket: &Path, watchdog: Duration) -> Self {
        self.notify = Some((socket.to_owned(), watchdog));
        self
    }

    /// Started, not waited for.
    #[must_use]
    pub fn start(mut self) -> Self {
        self.spawn();
        self
    }

    /// Started, and its first sample taken ([`Daemon::ready`]).
    pub async fn start_ready(mut self) -> Self {
        self.spawn();
        self.ready().await;
        self
    }

    /// Starts the process (again, on the same files; one still running is
    /// killed first).
    pub fn spawn(&mut self) {
        self.kill9();
        let mut c = self.command();
        c.arg("--config").arg(&self.config).arg("run");
        if let Some(addr) = &self.listen {
            c.args(["--metrics-listen", addr]);
        }
        if let Some((socket, period)) = &self.notify {
            c.env("NOTIFY_SOCKET", socket)
                .env("WATCHDOG_USEC", period.as_micros().to_string());
        }
        self.child = Some(self.logged(&mut c).spawn().unwrap());
    }

    /// `pptune` on the daemon's runtime and state directories, info logs,
    /// none of systemd's variables; no arguments yet.
    #[must_use]
    pub fn command(&self) -> Command {
        let mut c = Command::new(pptune_bin());
        c.env("RUNTIME_DIRECTORY", &self.run)
            .env("STATE_DIRECTORY", &self.state)
            .env("PPTUNE_LOG", "info")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("JOURNAL_STREAM");
        c
    }

    /// `pptune ARGS` on the daemon's files, with `--config` for the
    /// commands that read the policy (the others refuse it); its output.
    #[must_use]
    pub fn cmd(&self, args: &[&str]) -> Output {
        let mut c = self.command();
        if args
            .first()
            .is_some_and(|a| matches!(*a, "run" | "plan" | "record" | "replay" | "check"))
        {
            c.arg("--config").arg(&self.config);
        }
        c.args(args).output().unwrap()
    }

    /// [`Daemon::cmd`] started in the background, its output in the log.
    #[must_use]
    pub fn spawn_cmd(&self, args: &[&str]) -> Child {
        let mut c = self.command();
        c.args(args);
        self.logged(&mut c).spawn().unwrap()
    }

    fn logged<'c>(&self, c: &'c mut Command) -> &'c mut Command {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        c.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
    }

    #[must_use]
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// `RUNTIME_DIRECTORY`: the state record and the control socket.
    #[must_use]
    pub fn run_dir(&self) -> &Path {
        &self.run
    }

    /// `STATE_DIRECTORY`: the recording and the change journal.
    #[must_use]
    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon runs").id()
    }

    /// Whether it still runs (`false` after an exit of any kind).
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    #[must_use]
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `n` lines of the log, for failure messages.
    #[must_use]
    pub fn tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// The whole response to `GET path` on the metrics address; empty when
    /// there is none or it does not answer.
    #[must_use]
    pub fn get(&self, path: &str) -> String {
        self.listen
            .as_deref()
            .and_then(|addr| crate::http::get(addr, path, &[]))
            .unwrap_or_default()
    }

    /// The `/metrics` exposition (empty when it does not answer).
    #[must_use]
    pub fn metrics(&self) -> String {
        crate::http::body(&self.get("/metrics")).to_owned()
    }

    /// Sum of the samples of `family` whose label set contains every
    /// `labels` entry (`key="value"`).
    #[must_use]
    pub fn metric(&self, family: &str, labels: &[&str]) -> f64 {
        crate::exposition::sample_sum(&self.metrics(), family, labels)
    }

    /// What the control socket says, if it answers.
    pub async fn view(&self) -> Option<pptune::publish::control::DaemonView> {
        pptune::publish::control::query(&pptune::publish::control::socket_path(&self.run)).await
    }

    /// The state record (`run/state.json`).
    #[must_use]
    pub fn state(&self) -> serde_json::Value {
        let t = std::fs::read_to_string(self.run.join("state.json")).unwrap();
        serde_json::from_str(&t).unwrap()
    }

    /// Waits (60 s at most) for the first sample: the control view has a
    /// sample age.
    pub async fn ready(&mut self) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            assert!(self.alive(), "pptune exited early:\n{}", self.tail(40));
            if self
                .view()
                .await
                .is_some_and(|v| v.last_sample_age_s.is_some())
            {
                return;
            }
            sleep(Duration::from_millis(200)).await;
        }
        panic!("pptune never took a sample:\n{}", self.tail(40));
    }

    pub fn signal(&self, sig: Signal) {
        let pid = i32::try_from(self.pid()).unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).unwrap();
    }

    /// SIGTERM and the exit code (30 s at most).
    pub async fn term(&mut self) -> Option<i32> {
        self.signal(Signal::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return st.code();
            }
            sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "pptune did not stop within 30 s of SIGTERM:\n{}",
            self.tail(40)
        );
    }

    /// SIGKILL, and the process reaped.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Fails the test with `failures` and the log's tail unless empty.
    pub fn assert_none(&self, failures: &[String]) {
        assert!(
            failures.is_empty(),
            "{}\n--- log:\n{}",
            failures.join("\n"),
            self.tail(60)
        );
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}
