//! Stage 5, the commands: the command line ([`cli`]) and what its help
//! says beyond the options ([`help`]), one file per command with its own
//! arguments (what they share in `args`), and [`dispatch`], which hands
//! each command its arguments whole. Startup glue around the library: anyhow lives only here
//! and in `main`.

mod args;
mod check;
pub mod cli;
mod export;
pub mod fleet;
pub mod help;
mod history;
mod lock;
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
        Command::Run(a) => run::run(config, &a).await,
        Command::Status(a) => status::status(&a, config).await,
        Command::Plan(a) => plan::plan(config, &a).await,
        Command::Check(_) => Ok(check::check(config)),
        Command::Verify(a) => verify::verify(&a).await,
        Command::Export(a) => export::export(&a).await,
        Command::Restore(a) => restore::restore(&a).await,
        Command::Record(a) => record::record(config, &a).await,
        Command::Replay(a) => replay::replay(config, &a),
        Command::History(a) => history::history(&a),
        Command::Fleet {
            command: cli::FleetCommand::Suggest(a),
        } => fleet::suggest(&a),
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
