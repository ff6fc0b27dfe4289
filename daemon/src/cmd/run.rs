//! `pptune run`: the daemon, with its endpoint, signals and files.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use policy::Policy;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::args::{ConfigArg, parse_listen};
use super::lock::InstanceLock;
use super::{ex_config, load_policy};
use crate::act::rollout;
use crate::act::state::{self, StateStore};
use crate::publish::control;
use crate::publish::logging::LogFormat;
use crate::publish::metrics::Metrics;
use crate::publish::notify::Notifier;
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::service::{Options, PolicyEngine, PolicyNotLoaded, PolicySource};

/// `--config` re-read on SIGHUP.
struct ConfigSource(Option<PathBuf>);

impl PolicySource for ConfigSource {
    fn load(&self) -> Result<Policy, PolicyNotLoaded> {
        config::load(self.0.as_deref())
            .map(|l| {
                for w in &l.warnings {
                    tracing::warn!("policy: {w}");
                }
                l.policy
            })
            .map_err(|e| PolicyNotLoaded(config::render(&e)))
    }
}

/// A directory `run` opens: with CAP_NET_ADMIN (`observe_only` false) it
/// must open; without, the daemon only observes and needs no file, so a
/// directory it cannot use is `why` in the log and `None`. Another pptune
/// holding it is an error either way.
fn optional_when_observing<T>(
    opened: Result<T, state::StateError>,
    observe_only: bool,
    dir: &Path,
    why: &str,
) -> Result<Option<T>, state::StateError> {
    match opened {
        Ok(t) => Ok(Some(t)),
        Err(e) if observe_only && !matches!(e, state::StateError::Locked { .. }) => {
            tracing::warn!(
                directory = %dir.display(),
                error = %crate::human::cause(&e),
                "{why}"
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// How long `run` waits between attempts to bind a metrics port another
/// process holds (`daemon.metrics_port_taken: retry`).
const PORT_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// The metrics endpoint on `addr`, under `web`'s TLS and basic auth when
/// there is one. A port another process holds is `taken`'s choice: refuse
/// to start, or start without the endpoint and bind it once it is free.
fn serve_metrics(
    addr: SocketAddr,
    web: Option<Arc<crate::publish::http::Web>>,
    metrics: &Arc<Metrics>,
    taken: policy::policy::PortTaken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use policy::policy::PortTaken;
    let in_use = |e: &std::io::Error| e.kind() == std::io::ErrorKind::AddrInUse;
    let first = match crate::publish::http::bind(addr) {
        Ok(l) => Some(l),
        Err(e) if in_use(&e) && taken == PortTaken::Retry => {
            tracing::warn!(
                %addr,
                error = %crate::human::cause(&e),
                "the metrics port is taken by another process (`ss -ltnp 'sport = {}'` names it): running without /metrics, /healthz and /readyz, binding again every {}s (daemon.metrics_port_taken: exit refuses to start instead)",
                addr.port(),
                PORT_RETRY.as_secs()
            );
            None
        }
        Err(e) => {
            let why = if in_use(&e) {
                " (daemon.metrics_port_taken: exit; `retry` starts without the endpoint)"
            } else {
                ""
            };
            return Err(e).with_context(|| format!("binding the metrics listener on {addr}{why}"));
        }
    };
    let security = web.as_ref().map_or_else(
        || "plain HTTP, no authentication".to_owned(),
        |w| w.describe(),
    );
    let metrics = Arc::clone(metrics);
    Ok(tokio::spawn(async move {
        let listener = match first {
            Some(l) => l,
            None => loop {
                tokio::time::sleep(PORT_RETRY).await;
                match crate::publish::http::bind(addr) {
                    Ok(l) => break l,
                    Err(e) if in_use(&e) => {}
                    Err(e) => {
                        tracing::error!(%addr, error = %crate::human::cause(&e), "binding the metrics listener failed: no endpoint");
                        return;
                    }
                }
            },
        };
        tracing::info!(%addr, %security, "serving metrics at /metrics");
        crate::publish::http::serve_secured(
            listener,
            metrics,
            crate::publish::http::Limits::default(),
            web,
        )
        .await;
    }))
}

/// `pptune run`'s arguments.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Prometheus listen address, `address:port` or `:port` for every
    /// address (overrides the policy's daemon.metrics_listen; default
    /// 127.0.0.1:9864).
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub metrics_listen: Option<SocketAddr>,
    /// TLS and basic auth for the metrics endpoint: a web config file
    /// in the Prometheus exporter-toolkit format (node_exporter's
    /// --web.config.file); overrides daemon.metrics_web_config.
    #[arg(long, value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,
}

/// `pptune run`.
pub async fn run(path: Option<&Path>, args: &RunArgs) -> anyhow::Result<ExitCode> {
    let (listen, web_config) = (args.metrics_listen, args.web_config_file.as_deref());
    let loaded = match load_policy(path) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let policy = loaded.policy;
    let web = match web_config.or(policy.daemon.metrics_web_config.as_deref()) {
        None => None,
        Some(p) => match crate::publish::http::Web::load(p) {
            Ok(w) => Some(Arc::new(w)),
            Err(e) => {
                crate::say_err!("pptune: metrics web config: {e}");
                return Ok(ex_config());
            }
        },
    };
    if let Some(why) = crate::clock::local_zone_problem() {
        tracing::warn!(
            cause = why,
            "the local time zone does not load: change windows and the log's times are in UTC"
        );
    }
    if loaded.default_applied {
        tracing::info!("no policy file: the embedded default policy applies");
    }
    let kernel = Arc::new(NetlinkKernel::connect().await?);
    // One daemon per network namespace, before anything else is taken.
    let _instance = InstanceLock::take().await?;
    let dir = state::runtime_dir();
    // Without CAP_NET_ADMIN the daemon can only observe, and observing
    // needs no file: a directory it cannot write is a warning then, not
    // the end (an unprivileged user with no XDG_RUNTIME_DIR). With it, the
    // originals a restore needs must be recordable before anything acts.
    let observe_only = !netlink::caps::has_cap_net_admin().unwrap_or(true);
    let store = optional_when_observing(
        StateStore::open(&dir, state::read_boot_id()?),
        observe_only,
        &dir,
        "the runtime directory cannot be used: observing without a state record or control socket (`pptune status` cannot ask this daemon; set RUNTIME_DIRECTORY or XDG_RUNTIME_DIR to a writable directory to have them); without CAP_NET_ADMIN nothing is changed, so no original needs recording",
    )
    .with_context(|| {
        format!(
            "the runtime directory {} (set RUNTIME_DIRECTORY to use another)",
            dir.display()
        )
    })?;
    let state_dir = crate::record::state_dir();
    let state_dir_lock = optional_when_observing(
        state::lock_directory(&state_dir, state::STATE_DIR_LOCK),
        observe_only,
        &state_dir,
        "the state directory cannot be used: observing without a recording or change journal (set STATE_DIRECTORY or XDG_STATE_HOME to a writable directory to have them)",
    )
    .with_context(|| {
        format!(
            "the state directory {} holds another pptune's recording and change journal (set STATE_DIRECTORY to use another)",
            state_dir.display()
        )
    })?;
    tracing::info!(
        runtime_directory = %dir.display(),
        state_directory = %state_dir.display(),
        "files: the originals a restore needs and the control socket in the runtime directory, the recording and the change journal in the state directory"
    );
    let metrics = Arc::new(Metrics::new());
    // The policy always has an address (the embedded default gives one)
    // unless a file set `daemon.metrics_listen: null`: no endpoint at all.
    let http = listen
        .or(policy.daemon.metrics_listen)
        .map(|addr| serve_metrics(addr, web, &metrics, policy.daemon.metrics_port_taken))
        .transpose()?;
    if http.is_none() {
        tracing::info!(
            "no metrics endpoint (daemon.metrics_listen: null): /metrics, /healthz and /readyz are not served"
        );
    }
    let (reload_tx, reload_rx) = mpsc::unbounded_channel();
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    // A SIGHUP held since main's first line is a reload now.
    crate::publish::notify::hold_sighup(false);
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            if reload_tx.send(()).is_err() {
                break;
            }
        }
    });
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: finishing and stopping"),
            _ = int.recv() => tracing::info!("SIGINT: finishing and stopping"),
        }
    };
    let host_id = rollout::host_id(Path::new("/"));
    let opts = Options {
        notifier: Notifier::from_env(),
        control_socket: store.as_ref().map(|_| control::socket_path(&dir)),
        store,
        host_id,
        metrics,
        reload: reload_rx,
        backoff_base: policy::gates::BACKOFF_BASE,
        coexist: crate::act::coexist::Roots::from_env(),
        recording: state_dir_lock.as_ref().map(|_| state_dir),
    };
    let source = Box::new(ConfigSource(path.map(Path::to_owned)));
    let result = crate::service::run(
        kernel,
        PolicyEngine::default(),
        source,
        policy,
        opts,
        shutdown,
    )
    .await;
    if let Some(http) = http {
        http.abort();
    }
    result?;
    Ok(ExitCode::SUCCESS)
}
