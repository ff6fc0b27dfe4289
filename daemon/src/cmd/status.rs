//! `pptune status`: what the kernel says about this host's page pools,
//! then what the running daemon says ([`status`]).
//!
//! `--interface NAME` (repeatable) fills `interfaces`; `--json` sets `json`
//! (the kernel's view and the daemon's in one document). Exit code 0, or 1
//! when a named interface does not exist.
//!
//! It samples through the same [`NetlinkKernel`] the daemon uses and
//! builds the [`Report`] (`report.rs`, the `--json` model) from the
//! resulting `Snapshot`, so the numbers a person sees are the numbers the
//! policy decides on; `render.rs` writes it for a person. Reads need no
//! privilege.

use std::io::Write as _;
use std::process::ExitCode;

use super::args::{ConfigArg, JsonFlag};
use crate::act::state;
use crate::publish::control;
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::sample::{Kernel, SampleScope};

mod render;
mod report;
pub use report::*;

/// `pptune status`'s arguments.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Only this interface (repeatable).
    #[arg(long = "interface", short = 'i', value_name = "NAME")]
    pub interfaces: Vec<String>,
    #[command(flatten)]
    pub json: JsonFlag,
    /// The policy whose reclaimable ring memory is shown (the modes
    /// come from the running daemon's view).
    #[command(flatten)]
    pub config: ConfigArg,
}

/// `pptune status`: the kernel's view, then the running daemon's, asked
/// once. `policy_path` is `--config`, given before or after the command
/// name.
pub async fn status(
    args: &StatusArgs,
    policy_path: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let mut report = kernel_report(args, policy_path).await?;
    let json = args.json.on;
    // Text: the kernel's part is out before the daemon is asked (which
    // may take until the query's timeout).
    if !json {
        print_report(&report, false)?;
    }
    let daemon = control::query(&control::socket_path(&state::runtime_dir())).await;
    if json {
        // The running daemon's view rides along in the JSON (`null` when no
        // daemon answers)…
        report.daemon = daemon;
        print_report(&report, true)?;
    } else {
        // …and follows the text.
        crate::say_part!(
            "\n{}",
            crate::publish::view::render(daemon.as_ref(), &args.interfaces)
        );
    }
    Ok(if report.missing_interfaces.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The kernel's view: one sample of the interfaces asked for, what
/// right-sizing could reclaim under the policy `run` would use, and which
/// other configuration sets each device's knobs.
async fn kernel_report(
    args: &StatusArgs,
    policy_path: Option<&std::path::Path>,
) -> anyhow::Result<Report> {
    let kernel = NetlinkKernel::connect_oneshot().await?;
    let snap = kernel
        .sample(&SampleScope {
            interfaces: args.interfaces.clone(),
        })
        .await?;
    let boottime = netlink::caps::boottime_secs().ok();
    let missing: Vec<String> = args
        .interfaces
        .iter()
        .filter(|n| !snap.devices.iter().any(|d| &d.name == *n))
        .cloned()
        .collect();
    let mut report = Report::build(&snap, boottime, missing);
    // What right-sizing could reclaim, under the policy `run` would use.
    match config::load(policy_path) {
        Ok(l) => report.reclaimable = Some(super::reclaim::Reclaimable::of(&l.policy, &snap)),
        Err(e) => {
            report.reclaimable_not_computed = Some(format!(
                "the policy does not load ({} error(s); `pptune check` says why)",
                e.errors.len()
            ));
        }
    }
    // The other tools' configuration is read once, not once per device.
    let sources = crate::act::coexist::Sources::read(&crate::act::coexist::Roots::from_env());
    for (i, d) in report.interfaces.iter_mut().zip(&snap.devices) {
        i.owners = sources
            .owners(d)
            .into_iter()
            .map(|(k, owner)| OwnerView {
                knob: k.to_string(),
                owner,
            })
            .collect();
    }
    Ok(report)
}

/// Prints the report on stdout; a closed pipe (`pptune status | head`) is
/// not an error.
fn print_report(report: &Report, json: bool) -> std::io::Result<()> {
    let out = std::io::stdout().lock();
    match write_report(report, json, out) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// Print the report: text, or JSON ([`crate::human::write_json`]).
fn write_report(
    report: &Report,
    json: bool,
    out: impl std::io::Write + std::io::IsTerminal,
) -> std::io::Result<()> {
    if json {
        return crate::human::write_json(report, out);
    }
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    out.write_all(crate::human::printable(&report.render_text()).as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::status::report::tests::snapshot;

    /// `--json` into a file or pipe is one line of JSON that reads back as
    /// the report; text mode prints the text rendering.
    #[test]
    fn json_for_a_script_is_one_line() {
        let report = Report::build(&snapshot(), Some(100), Vec::new());
        let mut f = tempfile::tempfile().unwrap();
        write_report(&report, true, f.try_clone().unwrap()).unwrap();
        use std::io::{Read as _, Seek as _};
        f.rewind().unwrap();
        let mut text = String::new();
        f.read_to_string(&mut text).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.ends_with('\n'));
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, serde_json::to_value(&report).unwrap());

        let mut f = tempfile::tempfile().unwrap();
        write_report(&report, false, f.try_clone().unwrap()).unwrap();
        f.rewind().unwrap();
        text.clear();
        f.read_to_string(&mut text).unwrap();
        assert_eq!(text, report.render_text());
    }
}
