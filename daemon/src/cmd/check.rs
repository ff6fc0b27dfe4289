//! `pptune check`: load and validate the policy, change nothing.

use std::path::Path;
use std::process::ExitCode;

use super::{ex_config, load_policy};

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
