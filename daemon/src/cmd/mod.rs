//! Stage 5, the commands: the command line ([`cli`]) and the commands'
//! bodies, startup glue around the library (anyhow lives only here and in
//! `main`).

pub mod cli;
pub mod replay;
pub mod status;

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use policy::Policy;
use policy::engine::{Observation, Original};
use policy::snapshot::Snapshot;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::act::rollout;
use crate::act::state::{self, StateError, StateFile, StateStore};
use crate::publish::control::{self, Reply, Request};
use crate::publish::logging::action_text;
use crate::publish::metrics::Metrics;
use crate::publish::notify::Notifier;
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::sample::{Kernel, SampleScope};
use crate::service::{Engine, Options, PolicyEngine, PolicySource};

fn ex_config() -> ExitCode {
    ExitCode::from(u8::try_from(config::EX_CONFIG).unwrap_or(78))
}

/// Loads the policy; on error prints every problem and returns the exit
/// code.
fn load_policy(path: Option<&Path>) -> Result<config::Loaded, ExitCode> {
    config::load(path).map_err(|e| {
        eprint!("{}", crate::human::printable(&config::render(&e)));
        ex_config()
    })
}

/// `--config` re-read on SIGHUP.
struct ConfigSource(Option<PathBuf>);

impl PolicySource for ConfigSource {
    fn load(&self) -> Result<Policy, String> {
        config::load(self.0.as_deref())
            .map(|l| l.policy)
            .map_err(|e| config::render(&e))
    }
}

/// `pptune check`.
#[must_use]
pub fn check(path: Option<&Path>) -> ExitCode {
    match load_policy(path) {
        Ok(l) => {
            // The web config the policy names is part of what `run` needs.
            if let Some(w) = &l.policy.daemon.metrics_web_config
                && let Err(e) = crate::publish::http::Web::load(w)
            {
                crate::say_err!("daemon.metrics_web_config: {e}");
                crate::say_err!("1 problem found; the policy was not applied");
                return ex_config();
            }
            if l.default_applied {
                crate::say!("policy OK: no policy file found, the embedded default policy applies");
            } else {
                let files: Vec<String> =
                    l.sources.iter().map(|p| p.display().to_string()).collect();
                crate::say!("policy OK: {}", files.join(", "));
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// The metrics endpoint on `addr`, under `web`'s TLS and basic auth when
/// there is one.
fn serve_metrics(
    addr: SocketAddr,
    web: Option<Arc<crate::publish::http::Web>>,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = crate::publish::http::bind(addr)
        .with_context(|| format!("binding the metrics listener on {addr}"))?;
    let security = web.as_ref().map_or_else(
        || "plain HTTP, no authentication".to_owned(),
        |w| w.describe(),
    );
    tracing::info!(%addr, %security, "serving metrics at /metrics");
    Ok(tokio::spawn(crate::publish::http::serve_secured(
        listener,
        Arc::clone(metrics),
        crate::publish::http::Limits::default(),
        web,
    )))
}

/// `pptune run`.
pub async fn run(
    path: Option<&Path>,
    listen: Option<SocketAddr>,
    web_config: Option<&Path>,
) -> anyhow::Result<ExitCode> {
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
    if loaded.default_applied {
        tracing::info!("no policy file: the embedded default policy applies");
    }
    let kernel = Arc::new(NetlinkKernel::connect().await?);
    // One daemon per network namespace, before anything else is taken.
    let _instance = state::InstanceLock::take()?;
    let dir = state::runtime_dir();
    let store = StateStore::open(&dir, state::read_boot_id()?).with_context(|| {
        format!(
            "the runtime directory {} (set RUNTIME_DIRECTORY to use another)",
            dir.display()
        )
    })?;
    let state_dir = crate::record::state_dir();
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
        .map(|addr| serve_metrics(addr, web, &metrics))
        .transpose()?;
    if http.is_none() {
        tracing::info!(
            "no metrics endpoint (daemon.metrics_listen: null): /metrics, /healthz and /readyz are not served"
        );
    }
    let (reload_tx, reload_rx) = mpsc::unbounded_channel();
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
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
        store: Some(store),
        host_id,
        control_socket: Some(control::socket_path(&dir)),
        metrics,
        reload: reload_rx,
        backoff_base: policy::gates::BACKOFF_BASE,
        coexist: crate::act::coexist::Roots::from_env(),
        recording: Some(state_dir),
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

/// `pptune status`: the kernel's view (the netlink helper's renderer), then
/// the running daemon's.
pub async fn status(interfaces: Vec<String>, json: bool) -> anyhow::Result<ExitCode> {
    let code = crate::cmd::status::run(crate::cmd::status::StatusArgs {
        interfaces: interfaces.clone(),
        json,
    })
    .await?;
    if !json {
        let view = control::query(&control::socket_path(&state::runtime_dir())).await;
        crate::say_part!(
            "\n{}",
            crate::publish::view::render(view.as_ref(), &interfaces)
        );
    }
    Ok(code)
}

/// The record, read without the lock (the daemon writes it by rename, so a
/// reader never sees half a file), for `plan`, `verify`, `export` and
/// `restore -i`. `None` when there is none or it is from another boot
/// (nothing pptune set is live then).
///
/// # Errors
/// A record is there but cannot be read or parsed: `verify` said every
/// knob held (exit 0) over a record it could not read.
fn read_record() -> anyhow::Result<Option<StateFile>> {
    let path = state::runtime_dir().join("state.json");
    let text = match config::file::read_regular_text(&path, state::MAX_STATE_BYTES) {
        Ok(t) => t,
        Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
        Err(e) => return Err(anyhow::Error::new(e).context("reading pptune's state record")),
    };
    let rec: StateFile = serde_json::from_str(&text)
        .with_context(|| format!("parsing pptune's state record {}", path.display()))?;
    Ok((state::read_boot_id()? == rec.boot_id).then_some(rec))
}

/// The originals in pptune's record, for the engine.
fn recorded_originals() -> anyhow::Result<Vec<Original>> {
    Ok(read_record()?.map(|r| r.originals()).unwrap_or_default())
}

/// `pptune plan`. With `detailed_exitcode`, exit 2 when the plan
/// recommends any change (whatever the mode), 0 when it holds everything.
pub async fn plan(
    path: Option<&Path>,
    json: bool,
    detailed_exitcode: bool,
) -> anyhow::Result<ExitCode> {
    let policy = match load_policy(path) {
        Ok(l) => l.policy,
        Err(code) => return Ok(code),
    };
    let (samples, span) = policy::engine::findings_needed(&policy);
    let interval = policy.timing.interval;
    // Progress is for a person watching; a pipe or a log gets none.
    let progress = !json && std::io::stderr().is_terminal();
    if progress {
        crate::say_err!(
            "pptune plan: sampling {samples} times over {}s (every {}s: {} window(s) of {}s) to reach a finding; nothing is changed",
            span.as_secs(),
            interval.as_secs_f64(),
            policy.timing.windows_for_finding,
            policy.timing.window.as_secs_f64(),
        );
    }
    let (plan, taken, sampled_for) = sample_until_found(&policy, samples, progress).await?;
    let changes = plan
        .decisions
        .iter()
        .any(|d| d.action != policy::plan::Action::Hold);
    let done = if detailed_exitcode && changes {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    };
    let host = rollout::host_id(Path::new("/"));
    let standing = rollout::Standing::for_host(&policy, &host.value);
    let enforcing = standing.enforcing();
    if json {
        let v = serde_json::json!({
            "schema_version": 1,
            "samples": taken,
            "duration_s": sampled_for.as_secs_f64(),
            "host_enforcing": enforcing,
            "decisions": plan.decisions,
        });
        crate::human::print_json(&v)?;
        return Ok(done);
    }
    print_plan(&plan, &standing, host.source);
    Ok(done)
}

/// Samples as often as the policy needs for a finding (see `plan`): the
/// last plan, how many samples it took, and how long from the first.
async fn sample_until_found(
    policy: &Policy,
    samples: u32,
    progress: bool,
) -> anyhow::Result<(policy::Plan, u32, Duration)> {
    let interval = policy.timing.interval;
    let kernel = NetlinkKernel::connect().await?;
    let originals = recorded_originals()?;
    let mut engine = PolicyEngine::default();
    let origin = Instant::now();
    let mut prev: Option<(Snapshot, Duration)> = None;
    let mut plan = policy::Plan::default();
    let mut taken = 0;
    // `samples` closes the last window when every pass takes `interval`; a
    // slow host (or a slow netlink dump) drifts the window phase, and a plan
    // that stopped mid-window would answer "gathering" for a device with a
    // finding. So sample on, up to as many again, until no device is
    // mid-window.
    for i in 0..samples.saturating_mul(2) {
        if i > 0 {
            tokio::time::sleep(interval).await;
        }
        let snap = kernel.sample(&SampleScope::default()).await?;
        let now = origin.elapsed();
        let obs = Observation {
            previous: prev.as_ref().map(|(s, _)| s),
            current: &snap,
            elapsed: prev
                .as_ref()
                .map_or(Duration::ZERO, |(_, t)| now.saturating_sub(*t)),
            now,
            local_time: None,
            history: &[],
            overrides: &[],
            originals: &originals,
            backoff: &policy::engine::NO_BACKOFF,
        };
        plan = engine.decide(policy, &obs);
        prev = Some((snap, now));
        taken = i + 1;
        if progress {
            if taken <= samples {
                eprint!("\rsample {taken}/{samples}");
            } else {
                eprint!("\rsample {taken}/{samples} (+ closing the open window)");
            }
        }
        // Nothing selected, or nothing that more samples could judge:
        // answer now instead of sampling for nothing.
        if plan.decisions.iter().all(|d| d.reason.cannot_judge()) {
            break;
        }
        if taken >= samples
            && !plan
                .decisions
                .iter()
                .any(|d| d.reason == policy::ReasonCode::Gathering)
        {
            break;
        }
    }
    if progress {
        eprintln!();
    }
    Ok((plan, taken, origin.elapsed()))
}

/// `pptune plan`'s text: the host's standing, then each decision with its
/// message, evidence and recommendation id.
fn print_plan(plan: &policy::Plan, standing: &rollout::Standing, host_source: &str) {
    let enforcing = standing.enforcing();
    if !enforcing {
        crate::say!(
            "rollout: {} (host id from {})",
            standing.describe(),
            host_source
        );
    }
    if plan.decisions.is_empty() {
        crate::say!("no interface is selected by the policy (or none exposes page pools)");
    }
    for d in &plan.decisions {
        let mode = if d.mode == policy::Mode::Enforce && enforcing {
            "enforce: run would do this"
        } else {
            "observe: run would only recommend this"
        };
        crate::say!(
            "{} — {} [{}] ({mode})",
            d.device,
            action_text(&d.action),
            d.reason
        );
        crate::say!("    {}", d.message);
        let ev: Vec<String> = d
            .evidence
            .iter()
            .map(|(k, v)| format!("{k}={v:.4}"))
            .collect();
        if !ev.is_empty() {
            crate::say!("    evidence: {}", ev.join(" "));
        }
        crate::say!("    recommendation id: {}", d.id);
    }
}

/// `pptune verify`: 0 when every knob pptune set holds its value, 2 when
/// one differs.
pub async fn verify(interfaces: &[String], json: bool) -> anyhow::Result<ExitCode> {
    let kernel = NetlinkKernel::connect().await?;
    let devices = kernel.sample(&SampleScope::default()).await?.devices;
    let rec = read_record()?;
    let names: Vec<String> = devices.iter().map(|d| d.name.clone()).collect();
    require_known(interfaces, &names, rec.as_ref())?;
    let checks = crate::act::verify::verify(rec.as_ref(), &devices, interfaces);
    let holds = checks.iter().all(crate::act::verify::Check::holds);
    if json {
        let v = serde_json::json!({
            "schema_version": 1,
            "holds": holds,
            "knobs": checks.iter().map(|c| serde_json::json!({
                "device": c.device,
                "knob": c.knob.to_string(),
                "expected": c.expected,
                "live": c.live,
                "holds": c.holds(),
            })).collect::<Vec<_>>(),
        });
        crate::human::print_json(&v)?;
    } else {
        crate::say_part!("{}", crate::act::verify::render(&checks));
    }
    Ok(if holds {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `pptune export`: the values pptune set, per device present, in the
/// chosen owner's format.
pub async fn export(
    format: crate::act::coexist::ExportFormat,
    interfaces: &[String],
) -> anyhow::Result<ExitCode> {
    let kernel = NetlinkKernel::connect().await?;
    let devices = kernel.sample(&SampleScope::default()).await?.devices;
    let rec = read_record()?;
    let names: Vec<String> = devices.iter().map(|d| d.name.clone()).collect();
    require_known(interfaces, &names, rec.as_ref())?;
    let mut out = String::new();
    let mut refused = Vec::new();
    for d in &devices {
        if !interfaces.is_empty() && !interfaces.contains(&d.name) {
            continue;
        }
        let values: std::collections::BTreeMap<policy::Knob, u32> = rec
            .as_ref()
            .map(crate::act::verify::expectations)
            .unwrap_or_default()
            .into_iter()
            .filter(|(id, ..)| id.key() == d.id.key())
            .map(|(_, _, k, v)| (k, v))
            .collect();
        if !values.is_empty() {
            match crate::act::coexist::export(format, d, &values) {
                Ok(s) => {
                    out.push_str(&s);
                    out.push('\n');
                }
                Err(e) => refused.push(e.to_string()),
            }
        }
    }
    // All or nothing: output redirected into a file is installed as a
    // whole, so a device left out must not pass unnoticed.
    if !refused.is_empty() {
        anyhow::bail!(
            "nothing exported: {} cannot be written in this format:\n  {}",
            if refused.len() == 1 {
                "one device"
            } else {
                "some devices"
            },
            refused.join("\n  ")
        );
    }
    if out.is_empty() {
        anyhow::bail!("pptune has set nothing it still owns on these devices: nothing to export");
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Refuses names given to `-i` that are neither a kernel interface nor in
/// pptune's record.
fn require_known(
    requested: &[String],
    kernel: &[String],
    record: Option<&StateFile>,
) -> anyhow::Result<()> {
    let unknown: Vec<&str> = requested
        .iter()
        .filter(|n| {
            !kernel.contains(n)
                && !record.is_some_and(|r| r.devices.values().any(|d| d.last_name == **n))
        })
        .map(String::as_str)
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "no interface named {}: not in the kernel and not in pptune's record {}",
        unknown.join(", "),
        state::runtime_dir().join("state.json").display()
    )
}

/// `pptune restore`: with the daemon stopped, restore from the record under
/// its lock; with the daemon running (it holds the lock), ask it to.
pub async fn restore(interfaces: Vec<String>) -> anyhow::Result<ExitCode> {
    let dir = state::runtime_dir();
    if !interfaces.is_empty() {
        let kernel = NetlinkKernel::connect().await?;
        let names: Vec<String> = kernel
            .sample(&SampleScope::default())
            .await?
            .devices
            .into_iter()
            .map(|d| d.name)
            .collect();
        require_known(&interfaces, &names, read_record()?.as_ref())?;
    }
    let (lines, ok) = match StateStore::open(&dir, state::read_boot_id()?) {
        Err(StateError::Locked { .. }) => {
            let sock = control::socket_path(&dir);
            match control::request(
                &sock,
                &Request::Restore {
                    interfaces: interfaces.clone(),
                },
            )
            .await
            {
                Ok(Reply::Restored { lines, ok }) => (lines, ok),
                Ok(Reply::Error { message }) => anyhow::bail!("the daemon refused: {message}"),
                Ok(Reply::View(_)) => anyhow::bail!("unexpected reply from the daemon"),
                Err(e) => anyhow::bail!(
                    "the state record is locked by a running pptune, and its control socket {} does not answer: {e}",
                    sock.display()
                ),
            }
        }
        Err(e) => return Err(e.into()),
        Ok(store) => {
            // Held while restoring: no daemon starts acting meanwhile. A
            // daemon already running here keeps its originals under
            // another runtime directory, so an empty record here is not
            // "nothing to restore".
            let _instance = match state::InstanceLock::take() {
                Ok(lock) => lock,
                Err(StateError::OtherInstance) => anyhow::bail!(
                    "another pptune (a daemon, or a restore) is running in this network \
                     namespace with another runtime directory than {}: the record of originals \
                     it acts on is not here. Run restore with RUNTIME_DIRECTORY set to the \
                     daemon's (the unit's is /run/pptune), or stop the daemon",
                    dir.display()
                ),
                Err(e) => return Err(e.into()),
            };
            let (mut rec, stale) = store.load()?;
            if let Some(why) = stale {
                store.clear()?;
                crate::say!("nothing to restore: the record was stale ({why}); cleared");
                return Ok(ExitCode::SUCCESS);
            }
            let kernel = NetlinkKernel::connect().await?;
            let snap = kernel.sample(&SampleScope::default()).await?;
            let (lines, ok, done) = crate::act::actuator::restore_originals(
                &kernel,
                &mut rec,
                &snap.devices,
                &interfaces,
            )
            .await;
            // After the act, before the record: an unwritable journal does
            // not undo a restore, it is said.
            if let Err(e) = crate::record::journal::append_restores(
                &crate::record::state_dir(),
                crate::record::journal::RestoredBy::Command,
                crate::clock::unix_ms(),
                &done,
            ) {
                crate::say_err!(
                    "pptune restore: warning: the change journal in {} was not written: {e}",
                    crate::record::state_dir().display()
                );
            }
            rec.prune();
            if rec.devices.is_empty() {
                store.clear()?;
            } else {
                store.save(&rec)?;
            }
            (lines, ok)
        }
    };
    for i in &interfaces {
        if !lines.iter().any(|l| l.starts_with(i.as_str())) {
            crate::say!("{i}: nothing recorded to restore");
        }
    }
    if interfaces.is_empty() && lines.is_empty() {
        crate::say!("nothing recorded to restore");
    }
    for l in lines {
        crate::say!("{l}");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `pptune record`.
pub async fn record(
    path: Option<&Path>,
    duration: Option<Duration>,
    output: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    match load_policy(path) {
        Ok(l) => crate::cmd::replay::record(&l.policy, duration, output).await,
        Err(code) => Ok(code),
    }
}

/// `pptune replay`.
pub fn replay(
    file: &Path,
    path: Option<&Path>,
    against: Option<&Path>,
    args: &crate::cmd::replay::ReplayArgs,
) -> anyhow::Result<ExitCode> {
    let selection = match args.selection() {
        Ok(s) => s,
        Err(msg) => {
            crate::say_err!("pptune: {msg}");
            return Ok(ExitCode::from(2));
        }
    };
    let policy = match load_policy(path) {
        Ok(l) => l.policy,
        Err(code) => return Ok(code),
    };
    let against = match against.map(|p| load_policy(Some(p))).transpose() {
        Ok(b) => b.map(|l| l.policy),
        Err(code) => return Ok(code),
    };
    crate::cmd::replay::replay_cmd(file, &policy, against.as_ref(), args, &selection)
}

/// `pptune history`.
pub fn history(since: Option<&str>, interfaces: &[String], json: bool) -> anyhow::Result<ExitCode> {
    let since = match since.map(crate::cmd::replay::parse_time).transpose() {
        Ok(s) => s,
        Err(msg) => {
            crate::say_err!("pptune: {msg}");
            return Ok(ExitCode::from(2));
        }
    };
    crate::cmd::replay::history(since, interfaces, json)
}
