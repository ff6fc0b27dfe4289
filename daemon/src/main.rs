//! `pptune`: parse the command line, set up logging and a tokio runtime,
//! dispatch. Everything else lives in the library (`pptune::*`).

use std::process::ExitCode;

use clap::Parser;
use pptune::cli::{Cli, Command};
use pptune::commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon logs structured lines; the one-shot commands print for a
    // person and log only warnings.
    if matches!(cli.command, None | Some(Command::Run { .. })) {
        pptune::logging::init();
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pptune: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = cli.config.as_deref();
    let result = rt.block_on(async {
        match cli.command {
            None => commands::run(config, None).await,
            Some(Command::Run { metrics_listen }) => commands::run(config, metrics_listen).await,
            Some(Command::Status { interfaces, json }) => {
                commands::status(config, interfaces, json).await
            }
            Some(Command::Plan { json }) => commands::plan(config, json).await,
            Some(Command::Check) => Ok(commands::check(config)),
            Some(Command::Restore { interfaces }) => commands::restore(interfaces).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            // Display with the cause chain, not Debug.
            eprintln!("pptune: {e:#}");
            ExitCode::FAILURE
        }
    }
}
