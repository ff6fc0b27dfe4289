//! `pptune check`: load and validate the policy, change nothing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::args::ConfigArg;
use super::ex_config;

/// `pptune check`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Policy file or directory to check (the same as --config).
    #[arg(value_name = "FILE", conflicts_with = "config")]
    pub file: Option<PathBuf>,
}

/// `pptune check`: every problem at once (the policy files, the shadow
/// file and the web config the policy names), then what was read and what
/// was ignored.
#[must_use]
pub fn check(path: Option<&Path>) -> ExitCode {
    let mut errors = match config::load(path) {
        Ok(l) => {
            let web = l.policy.daemon.metrics_web_config.as_deref();
            match web.and_then(web_config_problem) {
                None => {
                    say_warnings(&l.warnings);
                    say_ok(&l);
                    return ExitCode::SUCCESS;
                }
                Some(e) => config::Errors {
                    errors: vec![e],
                    warnings: l.warnings,
                    partial: None,
                },
            }
        }
        Err(e) => e,
    };
    // The web config the policy names is part of what `run` needs.
    if let Some(e) = errors
        .partial
        .as_ref()
        .and_then(|p| p.daemon.metrics_web_config.as_deref())
        .and_then(web_config_problem)
    {
        errors.errors.push(e);
    }
    eprint!("{}", crate::human::printable(&config::render(&errors)));
    ex_config()
}

fn web_config_problem(path: &Path) -> Option<config::Error> {
    crate::publish::http::Web::load(path)
        .err()
        .map(|e| config::Error::Named {
            key: "daemon.metrics_web_config",
            message: e.to_string(),
        })
}

/// The load's warnings, on stderr: a file not read, a driver no device has.
pub(crate) fn say_warnings(warnings: &[config::Warning]) {
    for w in warnings {
        crate::say_err!("{w}");
    }
}

fn say_ok(l: &config::Loaded) {
    if l.default_applied {
        crate::say!("policy OK: no policy file found, the embedded default policy applies");
    } else {
        let files: Vec<String> = l.sources.iter().map(|p| p.display().to_string()).collect();
        crate::say!("policy OK: read {}", files.join(", "));
    }
}
