//! The command line (clap derive). `--config PATH` is global and means the
//! same on every command: a policy file, or a directory holding
//! `policy.yaml` and `policy.d/*.yaml`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// pptune: autotunes NIC page_pool behaviour (RX ring size, RX queue count)
/// from the kernel's own page_pool statistics.
#[derive(Debug, Parser)]
#[command(name = "pptune", version, about, long_about = None)]
pub struct Cli {
    /// Policy file or directory (default: $CONFIGURATION_DIRECTORY or
    /// /etc/pptune; the embedded default policy when none exists).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon (the default when no command is given).
    Run {
        /// Prometheus listen address (overrides the policy's
        /// daemon.metrics_listen; default 127.0.0.1:9864).
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<SocketAddr>,
    },
    /// Show page pools, queues, rings and channels, and the running
    /// daemon's view.
    Status {
        /// Only this interface (repeatable).
        #[arg(long = "interface", short = 'i', value_name = "NAME")]
        interfaces: Vec<String>,
        /// JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Sample the live kernel as often as the policy needs for a finding and
    /// print what `run` would do, and why. Changes nothing.
    Plan {
        #[arg(long)]
        json: bool,
    },
    /// Validate the policy: exit 0 when valid, 78 (EX_CONFIG) otherwise.
    Check,
    /// Put back the original rings/channels pptune recorded, and clear the
    /// record.
    Restore {
        /// Only this interface (repeatable).
        #[arg(long = "interface", short = 'i', value_name = "NAME")]
        interfaces: Vec<String>,
    },
}
