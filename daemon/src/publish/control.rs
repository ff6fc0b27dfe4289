//! The local control socket: `pptune status` asks the running daemon for its
//! view (managed devices and modes, originals, last decisions and outcomes,
//! operator overrides, backoffs); `pptune restore` asks it to restore while
//! it holds the state lock.
//!
//! Protocol: one JSON request line, one JSON reply line, then close. The
//! socket is mode 0600 under the runtime directory, and the peer's uid must
//! be root or the daemon's own (under `DynamicUser=` the daemon is not root,
//! and root may still ask), as irqbalance restricts its socket.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

/// Bumped on incompatible changes of [`DaemonView`].
pub const VIEW_SCHEMA_VERSION: u32 = 1;
const SOCKET: &str = "control.sock";
/// How long a client waits for a reply, and the daemon for a request to
/// finish: a restore of many devices takes seconds, a wedged daemon must
/// not hold `pptune restore` forever.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a client may take to send its request line (a few bytes): a
/// client that connects and says nothing must not hold a descriptor for
/// [`REQUEST_TIMEOUT`].
pub const REQUEST_LINE_TIMEOUT: Duration = Duration::from_secs(5);
/// Requests served at once; a client past this gets a "busy" reply and is
/// closed at once, so junk or idle clients cannot take the daemon's
/// descriptors (`LimitNOFILE=`) from netlink and `/metrics`.
pub const MAX_CLIENTS: usize = 16;

/// The control socket's path in a runtime directory.
#[must_use]
pub fn socket_path(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join(SOCKET)
}

/// What the daemon knows, for `pptune status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonView {
    pub schema_version: u32,
    pub pid: u32,
    pub version: String,
    /// Seconds since the daemon started.
    pub uptime_s: u64,
    /// Whether this host enforces: in the rollout fraction *and* some
    /// selector enforces (`rollout::Standing`, as the log and
    /// `pptune_rollout_enforcing` say).
    pub host_enforcing: bool,
    /// The same standing in one sentence (`rollout::Standing::describe`);
    /// empty from a daemon older than the field.
    #[serde(default)]
    pub rollout: String,
    /// The host's fleet arm (`enforce`, `holdout`, `observe`), as
    /// `pptune_rollout_arm` says; empty from a daemon older than the field.
    #[serde(default)]
    pub arm: String,
    pub rollout_fraction: Option<f64>,
    /// The policy's holdout fraction, when its rollout has one.
    #[serde(default)]
    pub rollout_holdout: Option<f64>,
    /// Where the host identity came from (`/etc/machine-id`, `NODE_NAME`…).
    pub host_id_source: String,
    /// The last reload's error, while the last good policy stays in force.
    pub policy_error: Option<String>,
    pub last_sample_age_s: Option<u64>,
    /// Wall times (unix ms) of the daemon's start and of its last
    /// successful sample, from which the reader computes `uptime_s` and
    /// `last_sample_age_s` ([`DaemonView::age_at`]): the view is built at
    /// each pass, and a loop that stopped passing serves its last one.
    #[serde(default)]
    pub started_unix_ms: Option<u64>,
    #[serde(default)]
    pub last_sample_unix_ms: Option<u64>,
    /// Passes the engine judged since the start: one per successful
    /// sample of the loop's cadence (a resync's sample outside it is none).
    #[serde(default)]
    pub passes: u64,
    /// The policy's memory budget (`budget.per_device_bytes`,
    /// `per_host_bytes`), which the ring cost estimates are judged against.
    #[serde(default)]
    pub memory_budget_per_device_bytes: Option<u64>,
    #[serde(default)]
    pub memory_budget_per_host_bytes: Option<u64>,
    pub devices: Vec<DeviceView>,
}

impl DaemonView {
    /// Recomputes every age and time left in the view for the reader's
    /// clock `now_unix_ms` from the wall times the daemon put in it (a view
    /// from a daemon older than those keeps the ages it was built with).
    pub fn age_at(&mut self, now_unix_ms: u64) {
        let since = |t: u64| now_unix_ms.saturating_sub(t) / 1000;
        let until = |t: u64| t.saturating_sub(now_unix_ms).div_ceil(1000);
        if let Some(t) = self.started_unix_ms {
            self.uptime_s = since(t);
        }
        if let Some(t) = self.last_sample_unix_ms {
            self.last_sample_age_s = Some(since(t));
        }
        for d in &mut self.devices {
            for a in &mut d.last_actions {
                if let Some(t) = a.at_unix_ms {
                    a.age_s = since(t);
                }
            }
            if let Some(b) = &mut d.backoff
                && let Some(t) = b.retry_at_unix_ms
            {
                b.retry_in_s = until(t);
            }
            if let (Some((_, left)), Some(t)) = (&mut d.evaluating, d.evaluating_until_unix_ms) {
                *left = until(t);
            }
        }
    }
}

/// One device as the daemon sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceView {
    pub name: String,
    pub ifindex: u32,
    /// `DeviceId::key()`.
    pub identity: String,
    /// `enforce`, `observe`, or `unmanaged` (no selector matches).
    pub mode: String,
    /// Originals recorded before the first change: (knob, value).
    pub originals: Vec<(String, u32)>,
    pub last_decision: Option<DecisionView>,
    pub last_actions: Vec<ActionView>,
    /// Knobs an operator took over.
    pub overrides: Vec<String>,
    pub backoff: Option<BackoffView>,
    /// An evaluation window in progress: (knob, seconds left).
    pub evaluating: Option<(String, u64)>,
    /// When that window closes (unix ms).
    #[serde(default)]
    pub evaluating_until_unix_ms: Option<u64>,
    /// What its rings cost by the estimate the memory budget gates on
    /// (`policy::engine::current_device_bytes`), for a selected device.
    #[serde(default)]
    pub ring_cost_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionView {
    /// `hold`, `ring.rx 256 -> 1024` …
    pub action: String,
    pub reason: String,
    pub message: String,
    pub recommendation: String,
    /// Times in a row this same decision was made.
    pub repeats: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActionView {
    pub knob: String,
    pub from: u32,
    pub to: u32,
    /// `pending`, `effective`, `ineffective`, `reverted`, `refused: …`.
    pub outcome: String,
    pub reason: String,
    pub age_s: u64,
    /// When it was made (unix ms).
    #[serde(default)]
    pub at_unix_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackoffView {
    pub failures: u32,
    pub retry_in_s: u64,
    pub last_error: String,
    /// When the backoff ends (unix ms).
    #[serde(default)]
    pub retry_at_unix_ms: Option<u64>,
}

/// A request on the socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    View,
    /// Restore originals (all devices, or these interface names) and clear
    /// their record.
    Restore {
        interfaces: Vec<String>,
    },
}

/// The reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// Boxed: the view is large beside the other replies.
    View(Box<DaemonView>),
    Restored {
        lines: Vec<String>,
        ok: bool,
    },
    Error {
        message: String,
    },
}

/// A restore the loop must carry out (it owns the kernel and the record).
#[derive(Debug)]
pub struct RestoreRequest {
    pub interfaces: Vec<String>,
    pub reply: oneshot::Sender<(Vec<String>, bool)>,
}

/// Errors of the control socket.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("binding control socket {path}")]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Binds the socket (replacing a stale one from a previous run) with mode
/// 0600.
pub fn bind(path: &Path) -> Result<UnixListener, ControlError> {
    let err = |source| ControlError::Bind {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let l = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    Ok(l)
}

fn own_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Serves requests until the task is dropped.
pub async fn serve(
    listener: UnixListener,
    view: Arc<Mutex<DaemonView>>,
    restore: mpsc::Sender<RestoreRequest>,
) {
    let me = own_uid();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CLIENTS));
    let mut failures = crate::publish::logging::AcceptFailures::new("control");
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                failures.failed(&e).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Best effort, never waiting on the client: it gets the reason
            // if its socket buffer has room, and is closed either way.
            let _ = stream.try_write(busy_reply().as_bytes());
            continue;
        };
        let allowed = stream
            .peer_cred()
            .is_ok_and(|c| c.uid() == 0 || Some(c.uid()) == me);
        let view = Arc::clone(&view);
        let restore = restore.clone();
        tokio::spawn(async move {
            // On timeout the handler (and the reply receiver with it) is
            // dropped: a restore still queued is then not carried out.
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, handle(stream, allowed, &view, &restore))
                .await;
            drop(slot);
        });
    }
}

/// The reply line to a client past [`MAX_CLIENTS`].
fn busy_reply() -> String {
    let mut line = serde_json::to_string(&Reply::Error {
        message: format!("busy: more than {MAX_CLIENTS} control requests at once; try again"),
    })
    .unwrap_or_default();
    line.push('\n');
    line
}

async fn handle(
    stream: UnixStream,
    allowed: bool,
    view: &Mutex<DaemonView>,
    restore: &mpsc::Sender<RestoreRequest>,
) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut line = String::new();
    // One line of at most 64 KiB: a request is tiny.
    let mut r = BufReader::new(r.take(64 * 1024));
    match tokio::time::timeout(REQUEST_LINE_TIMEOUT, r.read_line(&mut line)).await {
        Ok(read) => read?,
        Err(_) => return Ok(()),
    };
    let reply = if allowed {
        match serde_json::from_str::<Request>(&line) {
            Ok(Request::View) => match view.lock() {
                Ok(v) => Reply::View(Box::new(v.clone())),
                Err(_) => Reply::Error {
                    message: "view unavailable".into(),
                },
            },
            Ok(Request::Restore { interfaces }) => {
                let (tx, rx) = oneshot::channel();
                let sent = restore
                    .send(RestoreRequest {
                        interfaces,
                        reply: tx,
                    })
                    .await;
                if sent.is_err() {
                    Reply::Error {
                        message: "the daemon is stopping".into(),
                    }
                } else {
                    tokio::select! {
                        done = rx => match done {
                            Ok((lines, ok)) => Reply::Restored { lines, ok },
                            Err(_) => Reply::Error {
                                message: "the daemon is stopping".into(),
                            },
                        },
                        // The client left (timed out, interrupted): drop
                        // the receiver so the loop skips the request if it
                        // has not started it.
                        () = gone(&mut r, &w) => return Ok(()),
                    }
                }
            }
            Err(e) => Reply::Error {
                message: format!("bad request: {e}"),
            },
        }
    } else {
        Reply::Error {
            message: "permission denied: root only".into(),
        }
    };
    let mut out = serde_json::to_string(&reply).unwrap_or_default();
    out.push('\n');
    w.write_all(out.as_bytes()).await?;
    w.shutdown().await
}

/// Resolves once the client is gone: its socket closed in both directions
/// (what follows its request is read and ignored). A client that only shut
/// its sending side after the request (`shutdown(SHUT_WR)`, as `socat` or
/// `nc -N` do) still reads the reply: from its end-of-file on this waits
/// for nothing. The kernel tells the two apart: a unix stream whose peer
/// closed is hung up (`EPOLLHUP`, tokio's write-closed), one whose peer
/// shut its sending side only reads end-of-file.
async fn gone(r: &mut (impl tokio::io::AsyncRead + Unpin), w: &OwnedWriteHalf) {
    let mut buf = [0u8; 256];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    match w.ready(tokio::io::Interest::WRITABLE).await {
        Ok(ready) if !ready.is_write_closed() => std::future::pending().await,
        _ => {}
    }
}

/// Sends one request and reads the reply, within [`REQUEST_TIMEOUT`].
pub async fn request(path: &Path, req: &Request) -> std::io::Result<Reply> {
    tokio::time::timeout(REQUEST_TIMEOUT, exchange(path, req))
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no reply within {} s; the request was withdrawn",
                    REQUEST_TIMEOUT.as_secs()
                ),
            ))
        })
}

async fn exchange(path: &Path, req: &Request) -> std::io::Result<Reply> {
    let stream = UnixStream::connect(path).await?;
    let (r, mut w) = stream.into_split();
    let mut line = serde_json::to_string(req).map_err(std::io::Error::other)?;
    line.push('\n');
    w.write_all(line.as_bytes()).await?;
    let mut reply = String::new();
    BufReader::new(r).read_line(&mut reply).await?;
    serde_json::from_str(&reply).map_err(std::io::Error::other)
}

/// The running daemon's view, or `None` when no daemon answers (not
/// running, or not permitted). For `pptune status`.
pub async fn query(path: &Path) -> Option<DaemonView> {
    match tokio::time::timeout(Duration::from_secs(2), request(path, &Request::View)).await {
        Ok(Ok(Reply::View(mut v))) => {
            // Ages as of now, not as of the pass that built the view.
            v.age_at(crate::clock::unix_ms());
            Some(*v)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every age and time left follows the reader's clock; a view without
    /// wall times (an older daemon's) keeps its own.
    #[test]
    fn ages_are_computed_for_the_readers_clock() {
        let t0 = 1_800_000_000_000;
        let mut v = DaemonView {
            started_unix_ms: Some(t0),
            last_sample_unix_ms: Some(t0 + 10_000),
            devices: vec![DeviceView {
                last_actions: vec![ActionView {
                    at_unix_ms: Some(t0 + 5_000),
                    ..ActionView::default()
                }],
                backoff: Some(BackoffView {
                    retry_at_unix_ms: Some(t0 + 100_000),
                    ..BackoffView::default()
                }),
                evaluating: Some(("ring.rx".into(), 0)),
                evaluating_until_unix_ms: Some(t0 + 40_500),
                ..DeviceView::default()
            }],
            ..DaemonView::default()
        };
        v.age_at(t0 + 30_000);
        assert_eq!((v.uptime_s, v.last_sample_age_s), (30, Some(20)));
        let d = &v.devices[0];
        assert_eq!(d.last_actions[0].age_s, 25);
        assert_eq!(d.backoff.as_ref().map(|b| b.retry_in_s), Some(70));
        assert_eq!(d.evaluating, Some(("ring.rx".into(), 11)));
        let mut old = DaemonView {
            uptime_s: 7,
            last_sample_age_s: Some(1),
            ..DaemonView::default()
        };
        old.age_at(t0);
        assert_eq!((old.uptime_s, old.last_sample_age_s), (7, Some(1)));
    }
}
