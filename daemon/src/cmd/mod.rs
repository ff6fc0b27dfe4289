//! Stage 5, the commands: the command line ([`cli`]) and what its help
//! says beyond the options ([`help`]), one file per command, and
//! [`dispatch`]. Startup glue around the library: anyhow lives only here
//! and in `main`.

mod check;
pub mod cli;
mod export;
pub mod fleet;
pub mod help;
mod history;
mod plan;
pub mod reclaim;
pub mod record;
pub mod replay;
mod restore;
mod run;
pub mod status;
mod verify;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use policy::engine::Original;

use crate::act::state::{self, StateFile};
use cli::Command;

/// Runs one command to its exit code.
///
/// # Errors
/// What the command could not do, for `main` to print with its causes.
pub async fn dispatch(command: Command, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run {
            metrics_listen,
            web_config_file,
            ..
        } => run::run(config, metrics_listen, web_config_file.as_deref()).await,
        Command::Status {
            interfaces, json, ..
        } => status::status(interfaces, json.on, config).await,
        Command::Plan {
            json,
            detailed_exitcode,
            ..
        } => plan::plan(config, json.on, detailed_exitcode).await,
        Command::Check { .. } => Ok(check::check(config)),
        Command::Verify { interfaces, json } => verify::verify(&interfaces, json.on).await,
        Command::Export { format, interfaces } => export::export(format, &interfaces).await,
        Command::Restore { interfaces } => restore::restore(interfaces).await,
        Command::Record {
            duration, output, ..
        } => record::record(config, duration, output).await,
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
        } => replay::replay(
            &file,
            config,
            against.as_deref(),
            &replay::ReplayArgs {
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
        } => history::history(since.as_deref(), &interfaces, json.on),
        Command::Fleet {
            command:
                cli::FleetCommand::Suggest {
                    prometheus,
                    since,
                    min_hosts,
                    selector,
                    output,
                },
        } => fleet::suggest(&fleet::SuggestArgs {
            prometheus: &prometheus,
            since,
            min_hosts,
            selector: &selector,
            output: output.as_deref(),
        }),
    }
}

pub(crate) fn ex_config() -> ExitCode {
    ExitCode::from(u8::try_from(config::EX_CONFIG).unwrap_or(78))
}

/// Loads the policy; on error prints every problem and returns the exit
/// code.
pub(crate) fn load_policy(path: Option<&Path>) -> Result<config::Loaded, ExitCode> {
    config::load(path)
        .inspect(|l| check::say_warnings(&l.warnings))
        .map_err(|e| {
            eprint!("{}", crate::human::printable(&config::render(&e)));
            ex_config()
        })
}

/// The record, read without the lock (the daemon writes it by rename, so a
/// reader never sees half a file), for `plan`, `verify`, `export` and
/// `restore -i`. `None` when there is none or it is from another boot
/// (nothing pptune set is live then).
///
/// # Errors
/// A record is there but cannot be read or parsed: `verify` said every
/// knob held (exit 0) over a record it could not read.
pub(crate) fn read_record() -> anyhow::Result<Option<StateFile>> {
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
pub(crate) fn recorded_originals() -> anyhow::Result<Vec<Original>> {
    Ok(read_record()?.map(|r| r.originals()).unwrap_or_default())
}

/// Refuses names given to `-i` that are neither a kernel interface nor in
/// pptune's record.
pub(crate) fn require_known(
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
