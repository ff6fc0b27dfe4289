//! The command line (clap derive). `--config PATH` means the same wherever
//! it is accepted: a policy file, or a directory holding `policy.yaml` and
//! `policy.d/*.yaml`. Only the commands that read the policy accept it
//! (after the command name, or before it as `pptune --config PATH run`);
//! `status` and `restore` refuse it instead of ignoring it.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use super::args::UsageError;
use super::help::after_help;
use crate::VERSION;

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

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground (the systemd unit runs this).
    #[command(after_long_help = after_help("run"))]
    Run(super::run::RunArgs),
    /// Show page pools, queues, rings and channels, and the running
    /// daemon's view.
    #[command(after_long_help = after_help("status"))]
    Status(super::status::StatusArgs),
    /// Sample the live kernel as often as the policy needs for a finding and
    /// print what `run` would do, and why. Changes nothing.
    #[command(after_long_help = after_help("plan"))]
    Plan(super::plan::PlanArgs),
    /// Validate the policy: exit 0 when valid, 78 (EX_CONFIG) otherwise.
    #[command(after_long_help = after_help("check"))]
    Check(super::check::CheckArgs),
    /// Check that the live rings/channels still hold the values pptune set:
    /// exit 0 when they do (or pptune set nothing it still owns), 2 when one
    /// differs, listing it. For configuration management and compliance.
    #[command(after_long_help = after_help("verify"))]
    Verify(super::verify::VerifyArgs),
    /// Print the values pptune set, per device, as a systemd `.link` file,
    /// a NetworkManager fragment or a TuneD profile fragment, to make them
    /// permanent and turn enforcement off.
    #[command(after_long_help = after_help("export"))]
    Export(super::export::ExportArgs),
    /// Put back the original rings/channels pptune recorded, and clear the
    /// record.
    #[command(after_long_help = after_help("restore"))]
    Restore(super::restore::RestoreArgs),
    /// Record what the kernel reports, every policy interval, into one
    /// recording file (see recording.md in the documentation), for a host
    /// that runs no daemon.
    #[command(after_long_help = after_help("record"))]
    Record(super::record::RecordArgs),
    /// Run the policy over a recording (a file, or the daemon's recording
    /// directory) and print what it would have decided; changes nothing.
    #[command(after_long_help = after_help("replay"))]
    Replay(super::replay::ReplayArgs),
    /// Fleet mode: what the fleet's Prometheus knows, for every host.
    #[command(after_long_help = after_help("fleet"))]
    Fleet {
        #[command(subcommand)]
        command: FleetCommand,
    },
    /// Every change pptune made, with its evidence and outcome, across
    /// restarts (the change journal in the state directory).
    #[command(after_long_help = after_help("history"))]
    History(super::history::HistoryArgs),
}

/// `pptune fleet …`.
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Write a policy drop-in of starting rings per device class (driver,
    /// model, firmware, MTU, link speed) from the rings the fleet's hosts
    /// converged to, with the evidence in comments. Reads Prometheus;
    /// changes nothing else.
    Suggest(super::fleet::SuggestArgs),
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
            Command::Run(a) => a.config.config.as_deref(),
            Command::Plan(a) => a.config.config.as_deref(),
            Command::Record(a) => a.config.config.as_deref(),
            Command::Replay(a) => a.config.config.as_deref(),
            Command::Status(a) => a.config.config.as_deref(),
            Command::Check(a) => a.config.config.as_deref().or(a.file.as_deref()),
            Command::Verify(_)
            | Command::Export(_)
            | Command::Restore(_)
            | Command::History(_)
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
            Self::Run(_) => "run",
            Self::Status(_) => "status",
            Self::Plan(_) => "plan",
            Self::Check(_) => "check",
            Self::Verify(_) => "verify",
            Self::Export(_) => "export",
            Self::Restore(_) => "restore",
            Self::Record(_) => "record",
            Self::Replay(_) => "replay",
            Self::History(_) => "history",
            Self::Fleet { .. } => "fleet",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fleet suggest --help` names the device class's fields as the
    /// drop-in's comments do.
    #[test]
    fn suggest_help_names_the_five_class_fields() {
        use clap::CommandFactory as _;
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("fleet")
            .and_then(|f| f.find_subcommand_mut("suggest"))
            .expect("fleet suggest")
            .render_long_help()
            .to_string();
        // Class's fields, as the drop-in's comments name them.
        let five = "(driver, model, firmware, MTU, link speed)";
        assert!(help.contains(five), "{five} not in {help}");
    }
}
