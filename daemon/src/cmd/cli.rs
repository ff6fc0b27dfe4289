//! The command line (clap derive). `--config PATH` means the same wherever
//! it is accepted: a policy file, or a directory holding `policy.yaml` and
//! `policy.d/*.yaml`. Only the commands that read the policy accept it
//! (after the command name, or before it as `pptune --config PATH run`);
//! `status` and `restore` refuse it instead of ignoring it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::help::after_help;
use crate::VERSION;
use crate::publish::logging::LogFormat;

/// pptune: autotunes NIC page_pool behaviour (RX ring size, RX queue count)
/// from the kernel's own page_pool statistics.
#[derive(Debug, Parser)]
#[command(
    name = "pptune",
    version = VERSION,
    about,
    long_about = None,
    arg_required_else_help = true,
    subcommand_required = true
)]
pub struct Cli {
    /// Policy file or directory, for the commands that read the policy
    /// (run, plan, check, record, replay, status).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// `--config PATH` on a command that reads the policy.
#[derive(Debug, Clone, Args)]
pub struct ConfigArg {
    /// Policy file or directory (default: $CONFIGURATION_DIRECTORY or
    /// /etc/pptune; the embedded default policy when none exists).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground (the systemd unit runs this).
    #[command(after_long_help = after_help("run"))]
    Run {
        #[command(flatten)]
        config: ConfigArg,
        /// Prometheus listen address, `address:port` or `:port` for every
        /// address (overrides the policy's daemon.metrics_listen; default
        /// 127.0.0.1:9864).
        #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
        metrics_listen: Option<SocketAddr>,
        /// TLS and basic auth for the metrics endpoint: a web config file
        /// in the Prometheus exporter-toolkit format (node_exporter's
        /// --web.config.file); overrides daemon.metrics_web_config.
        #[arg(long, value_name = "FILE")]
        web_config_file: Option<PathBuf>,
        /// Log format.
        #[arg(long, value_enum, default_value_t = LogFormat::Auto)]
        log_format: LogFormat,
    },
    /// Show page pools, queues, rings and channels, and the running
    /// daemon's view.
    #[command(after_long_help = after_help("status"))]
    Status {
        /// Only this interface (repeatable).
        #[arg(long = "interface", short = 'i', value_name = "NAME")]
        interfaces: Vec<String>,
        #[command(flatten)]
        json: JsonFlag,
        /// The policy whose reclaimable ring memory is shown (the modes
        /// come from the running daemon's view).
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Sample the live kernel as often as the policy needs for a finding and
    /// print what `run` would do, and why. Changes nothing.
    #[command(after_long_help = after_help("plan"))]
    Plan {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        json: JsonFlag,
        /// Exit 2 when `run` would change something (0 when it would hold
        /// everything), like `terraform plan -detailed-exitcode`.
        #[arg(long)]
        detailed_exitcode: bool,
    },
    /// Validate the policy: exit 0 when valid, 78 (EX_CONFIG) otherwise.
    #[command(after_long_help = after_help("check"))]
    Check {
        #[command(flatten)]
        config: ConfigArg,
        /// Policy file or directory to check (the same as --config).
        #[arg(value_name = "FILE", conflicts_with = "config")]
        file: Option<PathBuf>,
    },
    /// Check that the live rings/channels still hold the values pptune set:
    /// exit 0 when they do (or pptune set nothing it still owns), 2 when one
    /// differs, listing it. For configuration management and compliance.
    #[command(after_long_help = after_help("verify"))]
    Verify {
        /// Only this interface (repeatable).
        #[arg(long = "interface", short = 'i', value_name = "NAME")]
        interfaces: Vec<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Print the values pptune set, per device, as a systemd `.link` file,
    /// a NetworkManager fragment or a TuneD profile fragment, to make them
    /// permanent and turn enforcement off.
    #[command(after_long_help = after_help("export"))]
    Export {
        #[arg(long, value_enum)]
        format: super::export::ExportFormat,
        /// Only this interface (repeatable).
        #[arg(long = "interface", short = 'i', value_name = "NAME")]
        interfaces: Vec<String>,
    },
    /// Put back the original rings/channels pptune recorded, and clear the
    /// record.
    #[command(after_long_help = after_help("restore"))]
    Restore {
        /// Only this interface (repeatable).
        #[arg(long = "interface", short = 'i', value_name = "NAME")]
        interfaces: Vec<String>,
    },
    /// Record what the kernel reports, every policy interval, into one
    /// recording file (see recording.md in the documentation), for a host
    /// that runs no daemon.
    #[command(after_long_help = after_help("record"))]
    Record {
        #[command(flatten)]
        config: ConfigArg,
        /// How long (e.g. 10m, 24h; default: until interrupted).
        #[arg(long, value_name = "D", value_parser = parse_duration)]
        duration: Option<std::time::Duration>,
        /// The file to write (default: pptune-<time>.pptrec here).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Run the policy over a recording (a file, or the daemon's recording
    /// directory) and print what it would have decided; changes nothing.
    #[command(after_long_help = after_help("replay"))]
    Replay {
        /// Recording file or directory of segments.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        #[command(flatten)]
        config: ConfigArg,
        /// A second policy: print the difference between the two.
        #[arg(long, value_name = "POLICY")]
        against: Option<PathBuf>,
        /// Only passes since then: a duration ago (24h) or an RFC 3339 time.
        #[arg(long, value_name = "T")]
        since: Option<String>,
        /// Only passes until then: a duration ago (1h) or an RFC 3339 time.
        #[arg(long, value_name = "T")]
        until: Option<String>,
        /// Only this interface (repeatable).
        #[arg(long = "interface", short = 'i', value_name = "NAME")]
        interfaces: Vec<String>,
        /// Print one row per pass and device (time, ring, decision,
        /// recycle-miss and slow-refill share; B's too with --against)
        /// instead of the summary.
        #[arg(long, value_enum, value_name = "FORMAT", conflicts_with = "on")]
        series: Option<SeriesFormat>,
        /// Also draw, per device, the RX ring and the recycle-miss share
        /// over time (A and B with --against) into FILE, an SVG image.
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Fleet mode: what the fleet's Prometheus knows, for every host.
    #[command(after_long_help = after_help("fleet"))]
    Fleet {
        #[command(subcommand)]
        command: FleetCommand,
    },
    /// Every change pptune made, with its evidence and outcome, across
    /// restarts (the change journal in the state directory).
    #[command(after_long_help = after_help("history"))]
    History {
        /// Only changes since then: a duration ago (24h) or an RFC 3339 time.
        #[arg(long, value_name = "T")]
        since: Option<String>,
        /// Only this interface (repeatable).
        #[arg(long = "interface", short = 'i', value_name = "NAME")]
        interfaces: Vec<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

/// `pptune fleet …`.
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Write a policy drop-in of starting rings per device class (driver,
    /// model, firmware, MTU, link speed) from the rings the fleet's hosts
    /// converged to, with the evidence in comments. Reads Prometheus;
    /// changes nothing else.
    Suggest {
        /// The Prometheus (or Thanos/Mimir query) base URL, e.g.
        /// http://prometheus:9090; host:port alone means http://host:port.
        #[arg(long, value_name = "URL", value_parser = parse_prometheus)]
        prometheus: String,
        /// How far back to look (at most 720h).
        #[arg(long, value_name = "D", default_value = "168h", value_parser = parse_duration)]
        since: std::time::Duration,
        /// Hosts a class needs for a prior; fewer get none.
        #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
        min_hosts: u32,
        /// The label matchers that pick pptune's series.
        #[arg(long, value_name = "MATCHERS", default_value = r#"job="pptune""#)]
        selector: String,
        /// The drop-in to write (default: standard output); written only
        /// when the query succeeded.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

/// `replay --series FORMAT`: the per-pass rows' encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SeriesFormat {
    /// One JSON object per line.
    Jsonl,
    /// Comma-separated values with a header line (RFC 4180).
    Csv,
}

/// `--json`, the same flag with the same help on every command that has
/// it; the output rule is [`crate::human::write_json`].
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct JsonFlag {
    /// JSON for scripts instead of text: one line when stdout is a pipe or
    /// a file, indented when it is a terminal.
    #[arg(long = "json")]
    pub on: bool,
}

/// A command-line value or combination that cannot be used; exit 2.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("`{0}` is not an address:port or :port ({examples})", examples = config::LISTEN_EXAMPLES)]
    Listen(String),
    #[error("`{0}` is not a duration (e.g. 30s, 10m, 24h)")]
    Duration(String),
    #[error("`{0}` is neither a duration (24h, 30m) nor an RFC 3339 time")]
    Time(String),
    #[error("--since ({since}) is after --until ({until}): no pass can be selected")]
    SinceAfterUntil { since: String, until: String },
    #[error("`pptune {0}` does not read the policy, so --config is refused (it would be ignored)")]
    ConfigRefused(&'static str),
    #[error("--config given twice (before and after the command name)")]
    ConfigTwice,
    #[error(
        "`{0}` is not a Prometheus base URL: http:// or https:// then a host (e.g. http://prometheus:9090, or prometheus:9090 for plain HTTP)"
    )]
    PrometheusUrl(String),
}

fn parse_listen(s: &str) -> Result<SocketAddr, UsageError> {
    config::parse_listen(s).ok_or_else(|| UsageError::Listen(s.to_owned()))
}

/// `--prometheus`: an http(s) URL with a host; `host:port` (no scheme)
/// is taken as `http://host:port`, as Prometheus' own flags read it.
pub fn parse_prometheus(s: &str) -> Result<String, UsageError> {
    let bad = || UsageError::PrometheusUrl(s.to_owned());
    let url = if s.contains("://") {
        s.to_owned()
    } else {
        format!("http://{s}")
    };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(bad)?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') || host.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    Ok(url)
}

fn parse_duration(s: &str) -> Result<std::time::Duration, UsageError> {
    config::parse_duration(s).ok_or_else(|| UsageError::Duration(s.to_owned()))
}

impl Cli {
    /// The policy path the command uses, or why `--config` is refused:
    /// before the command name it is accepted only by commands that read
    /// the policy, and not twice.
    ///
    /// # Errors
    /// A message for the operator.
    pub fn config_path(&self) -> Result<Option<&Path>, UsageError> {
        let own = match &self.command {
            Command::Run { config, .. }
            | Command::Plan { config, .. }
            | Command::Record { config, .. }
            | Command::Replay { config, .. }
            | Command::Status { config, .. } => config.config.as_deref(),
            Command::Check { config, file } => config.config.as_deref().or(file.as_deref()),
            Command::Verify { .. }
            | Command::Export { .. }
            | Command::Restore { .. }
            | Command::History { .. }
            | Command::Fleet { .. } => {
                return match &self.config {
                    Some(_) => Err(UsageError::ConfigRefused(self.command.name())),
                    None => Ok(None),
                };
            }
        };
        match (&self.config, own) {
            (Some(_), Some(_)) => Err(UsageError::ConfigTwice),
            (Some(p), None) => Ok(Some(p.as_path())),
            (None, p) => Ok(p),
        }
    }
}

impl Command {
    /// The command's name as typed.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Run { .. } => "run",
            Self::Status { .. } => "status",
            Self::Plan { .. } => "plan",
            Self::Check { .. } => "check",
            Self::Verify { .. } => "verify",
            Self::Export { .. } => "export",
            Self::Restore { .. } => "restore",
            Self::Record { .. } => "record",
            Self::Replay { .. } => "replay",
            Self::History { .. } => "history",
            Self::Fleet { .. } => "fleet",
        }
    }
}
