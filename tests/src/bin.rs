//! The real `pptune` binary for tests that run it, and their common
//! prerequisite: root, for a throwaway network namespace.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// `PPTUNE_BIN`, else the `pptune` binary in this test's target directory. `cargo test -p
/// pptune-tests` builds the library only, and a binary left from an older
/// build would test old code, so ask cargo for it (a no-op when fresh).
///
/// # Panics
/// When the build fails: the test cannot run.
#[must_use]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub fn pptune_bin() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    // The VM suites get the host-built binary (tests/vm/test.sh sets it).
    if let Some(p) = std::env::var_os("PPTUNE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_owned();
    BUILT.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "-p", "pptune", "--bin", "pptune"])
            .env("CARGO_TARGET_DIR", dir.parent().unwrap())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "building pptune failed");
    });
    let bin = dir.join("pptune");
    assert!(bin.exists(), "{} missing", bin.display());
    bin
}

/// `unshare -n sh -c SCRIPT pptune ...`: `SCRIPT` runs in a throwaway
/// network namespace with the pptune binary as `$0`; further `.arg`s are
/// `$1`, `$2`, ... Tests never touch the host's interfaces.
#[must_use]
pub fn in_netns(script: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args(["-n", "sh", "-c", script]).arg(pptune_bin());
    c
}

/// A veth pair `ppt0`/`ppt1` of 4 RX and 4 TX queues each (so that its
/// channels can be changed), as a command of an [`in_netns`] script.
pub const ADD_VETH: &str = "ip link add ppt0 numrxqueues 4 numtxqueues 4 type veth peer name ppt1 numrxqueues 4 numtxqueues 4";

/// `pptune --config "$1" run`, its metrics on a free loopback port, in a
/// throwaway network namespace with its loopback and an [`ADD_VETH`]
/// pair up; the config path is the next `.arg`.
#[must_use]
pub fn run_beside_veth() -> Command {
    in_netns(&format!(
        "ip link set lo up && {ADD_VETH} && ip link set ppt0 up && ip link set ppt1 up && exec \"$0\" --config \"$1\" run --metrics-listen 127.0.0.1:0"
    ))
}

/// Where a daemon a test starts keeps its files: `RUNTIME_DIRECTORY` (the
/// state record, the control socket) and `STATE_DIRECTORY` (the recording,
/// the change journal), both `dir`, never the host's `/run/pptune` or
/// `/var/lib/pptune`.
pub trait DaemonDirs {
    fn daemon_dirs(&mut self, dir: impl AsRef<std::ffi::OsStr>) -> &mut Self;
}

impl DaemonDirs for Command {
    fn daemon_dirs(&mut self, dir: impl AsRef<std::ffi::OsStr>) -> &mut Self {
        self.env("RUNTIME_DIRECTORY", dir.as_ref())
            .env("STATE_DIRECTORY", dir.as_ref())
    }
}

/// A daemon (or command) a test starts in the background: its output
/// discarded but for its log (stderr), which goes to a file.
pub trait SpawnLogged {
    /// Spawns it, stdout to nowhere, stderr to `log` (created).
    ///
    /// # Panics
    /// When the file cannot be created or the command not started.
    fn spawn_logged(&mut self, log: impl AsRef<std::path::Path>) -> std::process::Child;
}

impl SpawnLogged for Command {
    #[allow(clippy::unwrap_used)]
    fn spawn_logged(&mut self, log: impl AsRef<std::path::Path>) -> std::process::Child {
        self.stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    }
}

/// Whether this process runs as root (the netlink crate's one check).
pub use netlink::netns::is_root;

/// Fails the test unless it runs as root: a test that cannot run must not
/// pass. (`tests/run-all.sh` and CI run as root.)
///
/// # Panics
/// When not root.
pub fn require_root(why: &str) {
    assert!(
        is_root(),
        "this test needs root ({why}); run the suite as root (tests/run-all.sh does)"
    );
}

/// A fake `NOTIFY_SOCKET` in `dir` for a daemon under test: its path and
/// the socket, whose reads wait at most 200 ms.
///
/// # Panics
/// When the socket cannot be bound.
#[must_use]
#[allow(clippy::unwrap_used)]
pub fn notify_socket(dir: &std::path::Path) -> (PathBuf, std::os::unix::net::UnixDatagram) {
    let path = dir.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    (path, sock)
}

/// A temporary directory for a test's files, with `policy` written in it
/// as `policy.yaml`: the directory (removed on drop) and the policy's path.
///
/// # Panics
/// When the directory or the file cannot be made.
#[must_use]
#[allow(clippy::unwrap_used)]
pub fn policy_in_tempdir(policy: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_policy(dir.path(), policy);
    (dir, path)
}

/// `policy` written in `dir` as `policy.yaml`; its path.
///
/// # Panics
/// When the file cannot be written.
#[must_use]
#[allow(clippy::unwrap_used)]
pub fn write_policy(dir: &std::path::Path, policy: &str) -> PathBuf {
    let path = dir.join("policy.yaml");
    std::fs::write(&path, policy).unwrap();
    path
}

/// Writes the state record a daemon leaves after changing `name`'s RX
/// channels `from` → `to` (effective) into `dir/state.json`, for tests of
/// `verify`, `export` and `restore` on a veth, which has no page pools for
/// pptune to change anything by itself.
///
/// # Panics
/// When the boot id cannot be read or the file not written.
#[allow(clippy::unwrap_used)]
pub fn write_channels_record(dir: &std::path::Path, name: &str, from: u32, to: u32) {
    use policy::engine::Outcome;
    use policy::{ChannelField, Knob};
    use pptune::act::state::{StateFile, StoredAction, read_boot_id};
    let id = policy::snapshot::DeviceId {
        name_fallback: Some(name.into()),
        ..Default::default()
    };
    let knob = Knob::Channels(ChannelField::Rx);
    let mut rec = StateFile::new(read_boot_id().unwrap());
    rec.record_original(&id, name, knob, from);
    rec.push_action(
        &id,
        name,
        StoredAction {
            knob,
            from,
            to,
            at_unix_ms: 0,
            reason: "channels_grow_healthy".into(),
            outcome: Outcome::Effective,
        },
    );
    let path = dir.join("state.json");
    std::fs::write(&path, serde_json::to_string(&rec).unwrap()).unwrap();
    // As the daemon writes it: a record others can write is not trusted
    // (whatever the test's umask).
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
}

/// The resident set of process `pid` in KiB (`VmRSS` of `/proc/PID/status`).
///
/// # Panics
/// When the process is gone or the field is missing.
#[must_use]
#[allow(clippy::expect_used)]
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("/proc/PID/status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// Open descriptors of process `pid`: the fewest of ten looks 50 ms apart,
/// since the daemon opens and closes some within a pass (ethtool ioctl,
/// /proc), so one look can catch a pass in the middle.
///
/// # Panics
/// When the process is gone.
#[must_use]
#[allow(clippy::expect_used)]
pub fn open_fds(pid: u32) -> usize {
    (0..10)
        .map(|i| {
            if i > 0 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .expect("/proc/PID/fd")
                .count()
        })
        .min()
        .unwrap_or(0)
}

/// Runs `packaging/prometheus/render.py` with `args` and `--out out`; the
/// process's output, whatever its status.
///
/// # Panics
/// When python3 cannot be started.
#[must_use]
#[allow(clippy::expect_used)]
pub fn render_rules(args: &[&str], out: &std::path::Path) -> std::process::Output {
    std::process::Command::new("python3")
        .arg(crate::repo_root().join("packaging/prometheus/render.py"))
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("python3 (render.py)")
}

/// The words of a man page that name files: font escapes and `\-`
/// undone, split at white space and punctuation around a path.
pub fn file_words(page: &str) -> Vec<String> {
    let text = page
        .replace("\\-", "-")
        .replace("\\fB", " ")
        .replace("\\fR", " ")
        .replace("\\fI", " ");
    text.split(|c: char| {
        c.is_whitespace() || matches!(c, '`' | '(' | ')' | ',' | ';' | '"' | '\'' | ':')
    })
    .map(|w| w.trim_end_matches(['.', '\\']).to_owned())
    .filter(|w| w.contains('/'))
    .collect()
}
