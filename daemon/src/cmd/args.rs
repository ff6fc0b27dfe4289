//! What several commands' command lines share: `--config`, `--json`, the
//! parsers of listen addresses, durations and Prometheus URLs, and the
//! usage error (exit 2) they give.

use std::net::SocketAddr;
use std::path::PathBuf;

/// `--config PATH` on a command that reads the policy.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArg {
    /// Policy file or directory (default: $CONFIGURATION_DIRECTORY or
    /// /etc/pptune; the embedded default policy when none exists).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// `--json`, the same flag with the same help on every command that has
/// it; the output rule is [`crate::human::write_json`].
#[derive(Debug, Clone, Copy, Default, clap::Args)]
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

pub(crate) fn parse_listen(s: &str) -> Result<SocketAddr, UsageError> {
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

pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, UsageError> {
    config::parse_duration(s).ok_or_else(|| UsageError::Duration(s.to_owned()))
}
