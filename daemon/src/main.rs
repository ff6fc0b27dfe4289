//! `pptune`: parse the command line, set up logging and a tokio runtime,
//! dispatch. Everything else lives in the library (`pptune::*`).

use std::process::ExitCode;

use clap::Parser;
use pptune::cmd;
use pptune::cmd::cli::{Cli, Command};

/// Gives SIGPIPE back its default action, as a C program has it: a one-shot
/// command whose reader went away (`pptune status | head -1`) ends quietly,
/// killed by SIGPIPE like `cat` would be, instead of panicking on EPIPE.
/// The daemon keeps Rust's default (ignored, EPIPE returned): a scraper or
/// control client that hangs up must not kill it.
#[allow(unsafe_code)]
fn default_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists;
    // SIG_DFL is a valid disposition and no handler code is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run { .. }) {
        default_sigpipe();
    }
    let config = match cli.config_path() {
        Ok(c) => c.map(std::path::Path::to_owned),
        Err(msg) => {
            pptune::say_err!("pptune: {msg}");
            return ExitCode::from(2);
        }
    };
    // The daemon logs; the one-shot commands print for a person.
    if let Command::Run { log_format, .. } = &cli.command {
        match pptune::publish::logging::filter_from_env() {
            Ok(filter) => pptune::publish::logging::init(*log_format, filter),
            Err(e) => {
                pptune::say_err!("pptune: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            pptune::say_err!("pptune: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = config.as_deref();
    let result = rt.block_on(async {
        match cli.command {
            Command::Run {
                metrics_listen,
                web_config_file,
                ..
            } => cmd::run(config, metrics_listen, web_config_file.as_deref()).await,
            Command::Status { interfaces, json } => cmd::status(interfaces, json.on).await,
            Command::Plan {
                json,
                detailed_exitcode,
                ..
            } => cmd::plan(config, json.on, detailed_exitcode).await,
            Command::Check { .. } => Ok(cmd::check(config)),
            Command::Verify { interfaces, json } => cmd::verify(&interfaces, json.on).await,
            Command::Export { format, interfaces } => cmd::export(format, &interfaces).await,
            Command::Restore { interfaces } => cmd::restore(interfaces).await,
            Command::Record {
                duration, output, ..
            } => cmd::record(config, duration, output).await,
            Command::Replay {
                file,
                against,
                since,
                until,
                interfaces,
                series,
                plot,
                json,
                ..
            } => cmd::replay(
                &file,
                config,
                against.as_deref(),
                &pptune::cmd::replay::ReplayArgs {
                    since,
                    until,
                    interfaces,
                    series,
                    plot,
                    json: json.on,
                },
            ),
            Command::History {
                since,
                interfaces,
                json,
            } => cmd::history(since.as_deref(), &interfaces, json.on),
        }
    });
    // A policy load stuck in its blocking thread (a wedged file system)
    // cannot be joined: waiting for it would turn SIGTERM into the stop
    // timeout's SIGKILL. Everything the daemon keeps is written by now.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => code,
        Err(e) => {
            // Display with the cause chain, not Debug.
            pptune::say_err!("pptune: {e:#}");
            ExitCode::FAILURE
        }
    }
}
