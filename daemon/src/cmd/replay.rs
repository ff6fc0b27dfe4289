//! `pptune replay`: a recording under the recorded or another policy.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use policy::Policy;

use super::args::{ConfigArg, JsonFlag, UsageError};
use super::load_policy;
use crate::clock::unix_ms;
use crate::publish::logging::action_text;
use crate::replay::{Basis, Report, Selection, replay_selected};

pub mod plot;
pub mod series;

/// `pptune replay`.
pub fn replay(path: Option<&Path>, args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let selection = match args.selection() {
        Ok(s) => s,
        Err(msg) => {
            crate::say_err!("pptune: {msg}");
            return Ok(ExitCode::from(2));
        }
    };
    let policy = match load_policy(path) {
        Ok(l) => l.policy,
        Err(code) => return Ok(code),
    };
    let against = match args
        .against
        .as_deref()
        .map(|p| load_policy(Some(p)))
        .transpose()
    {
        Ok(b) => b.map(|l| l.policy),
        Err(code) => return Ok(code),
    };
    replay_cmd(&args.file, &policy, against.as_ref(), args, &selection)
}

/// `pptune replay`'s arguments.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReplayArgs {
    /// Recording file or directory of segments.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub config: ConfigArg,
    /// A second policy: print the difference between the two.
    #[arg(long, value_name = "POLICY")]
    pub against: Option<PathBuf>,
    /// Only passes since then: a duration ago (24h) or an RFC 3339 time.
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Only passes until then: a duration ago (1h) or an RFC 3339 time.
    #[arg(long, value_name = "T")]
    pub until: Option<String>,
    /// Only this interface (repeatable).
    #[arg(long = "interface", short = 'i', value_name = "NAME")]
    pub interfaces: Vec<String>,
    /// Print one row per pass and device (time, ring, decision,
    /// recycle-miss and slow-refill share; B's too with --against)
    /// instead of the summary.
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with = "on")]
    pub series: Option<SeriesFormat>,
    /// Also draw, per device, the RX ring and the recycle-miss share
    /// over time (A and B with --against) into FILE, an SVG image.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `replay --series FORMAT`: the per-pass rows' encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SeriesFormat {
    /// One JSON object per line.
    Jsonl,
    /// Comma-separated values with a header line (RFC 4180).
    Csv,
}

impl ReplayArgs {
    /// What of the replay is reported; the same selection feeds the
    /// summary, the series and the plot.
    ///
    /// # Errors
    /// A time that does not parse, or `--since` after `--until`.
    pub fn selection(&self) -> Result<Selection, UsageError> {
        let since_ms = self.since.as_deref().map(parse_time).transpose()?;
        let until_ms = self.until.as_deref().map(parse_time).transpose()?;
        if let (Some(s), Some(u)) = (since_ms, until_ms)
            && s > u
        {
            return Err(UsageError::SinceAfterUntil {
                since: when(s),
                until: when(u),
            });
        }
        Ok(Selection {
            since_ms,
            until_ms,
            interfaces: self.interfaces.clone(),
            series: self.series.is_some() || self.plot.is_some(),
        })
    }
}

fn replay_one(path: &Path, policy: &Policy, selection: &Selection) -> anyhow::Result<Report> {
    replay_selected(path, policy, selection)
        .with_context(|| format!("replaying {}", path.display()))
}

/// `pptune replay FILE [--against B] [--since T] [--until T] [-i NAME]...
/// [--series FORMAT] [--plot FILE]`.
///
/// # Errors
/// The recording cannot be read, nothing is selected, or the plot cannot
/// be written.
pub fn replay_cmd(
    path: &Path,
    policy: &Policy,
    against: Option<&Policy>,
    args: &ReplayArgs,
    selection: &Selection,
) -> anyhow::Result<ExitCode> {
    // An unwritable plot path is said before the replay, not after it.
    let plot = args.plot.as_deref().map(PlotTarget::check).transpose()?;
    let result = replay_and_show(path, policy, against, args, selection, plot.as_ref());
    if result.is_err()
        && let Some(p) = &plot
    {
        p.abandon();
    }
    result
}

fn replay_and_show(
    path: &Path,
    policy: &Policy,
    against: Option<&Policy>,
    args: &ReplayArgs,
    selection: &Selection,
    plot: Option<&PlotTarget>,
) -> anyhow::Result<ExitCode> {
    let a = replay_one(path, policy, selection)?;
    for w in &a.warnings {
        crate::say_err!("pptune replay: warning: {w}");
    }
    // No pass read is no evidence: it said "the policy holds every device
    // over the whole recording" and exited 0.
    if a.passes_read == 0 {
        anyhow::bail!(
            "{}: no pass could be read{}; nothing was replayed",
            path.display(),
            if a.warnings.is_empty() {
                " (the recording has none)"
            } else {
                " (the warnings above say why)"
            }
        );
    }
    if a.passes == 0 {
        anyhow::bail!(
            "{}: none of the {} pass(es) read is {}; nothing to show",
            path.display(),
            a.passes_read,
            window_text(selection)
        );
    }
    let b = against
        .map(|p| replay_one(path, p, selection))
        .transpose()?;
    if !selection.interfaces.is_empty() {
        let seen = |n: &String| {
            a.devices.contains_key(n) || b.as_ref().is_some_and(|b| b.devices.contains_key(n))
        };
        let missing: Vec<&str> = selection
            .interfaces
            .iter()
            .filter(|n| !seen(n))
            .map(String::as_str)
            .collect();
        if missing.len() == selection.interfaces.len() {
            anyhow::bail!(
                "{}: no device named {} is decided on by the policy in the passes selected",
                path.display(),
                missing.join(" or ")
            );
        }
        for n in missing {
            crate::say_err!(
                "pptune replay: warning: no device named {n} is decided on by the policy in the passes selected"
            );
        }
    }
    let no_rows = a.series.is_empty() && b.as_ref().is_none_or(|b| b.series.is_empty());
    if no_rows && (plot.is_some() || args.series.is_some()) {
        anyhow::bail!(
            "{}: the policy decides on no device in the {} pass(es) selected: no series to {}",
            path.display(),
            a.passes,
            if plot.is_some() { "plot" } else { "print" }
        );
    }
    if let Some(p) = plot {
        p.write(&plot::svg(&a, b.as_ref())?)?;
    }
    if let Some(format) = args.series {
        series::print(format, &a, b.as_ref())?;
    } else if args.json.on {
        let v = match &b {
            None => serde_json::json!({ "schema_version": 1, "replay": a }),
            Some(b) => serde_json::json!({
                "schema_version": 1,
                "a": a,
                "b": b,
                "difference": difference(&a, b),
            }),
        };
        crate::human::print_json(&v)?;
    } else {
        match &b {
            None => print_report(&a),
            Some(b) => print_against(&a, b),
        }
    }
    if let Some(p) = plot {
        crate::say_err!("pptune replay: plot written to {}", p.path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `between … and …` for the messages about an empty selection.
fn window_text(s: &Selection) -> String {
    match (s.since_ms, s.until_ms) {
        (Some(a), Some(b)) => format!("between {} and {}", when(a), when(b)),
        (Some(a), None) => format!("at or after {}", when(a)),
        (None, Some(b)) => format!("at or before {}", when(b)),
        (None, None) => "selected".to_owned(),
    }
}

/// The `--plot` file: created before the replay (a new file: an existing
/// file or a symlink there is refused, as `record --output` does, by
/// `config::file::create_new`), written through that descriptor, removed
/// again when the replay fails.
#[derive(Debug)]
struct PlotTarget {
    path: PathBuf,
    file: std::fs::File,
}

impl PlotTarget {
    fn check(path: &Path) -> anyhow::Result<Self> {
        let file = config::file::create_new(path)
            .with_context(|| format!("cannot write the plot to {}", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    fn write(&self, svg: &str) -> anyhow::Result<()> {
        use std::io::Write as _;
        (&self.file)
            .write_all(svg.as_bytes())
            .and_then(|()| self.file.sync_all())
            .with_context(|| format!("writing the plot to {}", self.path.display()))
    }

    fn abandon(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `ms` since the epoch in UTC, formatted by `fmt` (chrono's); the number
/// itself past chrono's range.
fn utc(ms: u64, fmt: &str) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(|| ms.to_string(), |t| t.format(fmt).to_string())
}

pub(crate) fn when(ms: u64) -> String {
    utc(ms, "%Y-%m-%d %H:%M:%S UTC")
}

fn print_report(r: &Report) {
    crate::say!(
        "{} pass(es){}",
        r.passes,
        match (r.first_unix_ms, r.last_unix_ms) {
            (Some(a), Some(b)) => format!(" from {} to {}", when(a), when(b)),
            _ => String::new(),
        }
    );
    if r.faithful_passes > 0 {
        crate::say!(
            "recorded policy: {} of {} pass(es) decided exactly as the daemon did",
            r.identical_passes,
            r.faithful_passes
        );
    }
    if r.decisions.is_empty() {
        crate::say!("no changes: the policy holds every device over the whole recording");
    }
    for row in &r.decisions {
        let d = &row.decision;
        let basis = match row.basis {
            Basis::Observed => "observed",
            Basis::Modelled => "MODELLED",
        };
        crate::say!(
            "{} {} — {} [{}] ({}, {basis})",
            when(row.unix_ms),
            d.device,
            action_text(&d.action),
            d.reason,
            match d.mode {
                policy::Mode::Enforce => "enforce",
                policy::Mode::Observe => "observe: recommended only",
            }
        );
        crate::say!("    {}", d.message);
        crate::say!("    recommendation id: {}", d.id);
    }
    for (name, s) in &r.devices {
        crate::say!(
            "{name}: {} change(s), ring {} -> {}, pool memory {}, recycle-miss share {}{}",
            s.changes,
            s.first_ring.map_or_else(|| "-".into(), |v| v.to_string()),
            s.final_ring.map_or_else(|| "-".into(), |v| v.to_string()),
            crate::human::bytes(s.pool_bytes),
            s.recycle_miss_share
                .map_or_else(|| "-".into(), |v| format!("{:.2} %", v * 100.0)),
            if s.modelled {
                " (modelled)"
            } else {
                " (observed)"
            }
        );
    }
}

/// Per device and in total, B minus A.
fn difference(a: &Report, b: &Report) -> serde_json::Value {
    let mut devs = serde_json::Map::new();
    let names: std::collections::BTreeSet<&String> =
        a.devices.keys().chain(b.devices.keys()).collect();
    let (mut ca, mut cb, mut ma, mut mb) = (0_i64, 0_i64, 0_i128, 0_i128);
    for n in names {
        let da = a.devices.get(n).cloned().unwrap_or_default();
        let db = b.devices.get(n).cloned().unwrap_or_default();
        ca += i64::from(da.changes);
        cb += i64::from(db.changes);
        ma += i128::from(da.pool_bytes);
        mb += i128::from(db.pool_bytes);
        devs.insert(
            n.clone(),
            serde_json::json!({
                "changes": [da.changes, db.changes],
                "final_ring": [da.final_ring, db.final_ring],
                "pool_bytes": [da.pool_bytes, db.pool_bytes],
                "recycle_miss_share": [da.recycle_miss_share, db.recycle_miss_share],
                "modelled": [da.modelled, db.modelled],
            }),
        );
    }
    serde_json::json!({
        "devices": devs,
        "total": {
            "changes": [ca, cb],
            "pool_bytes": [ma.to_string(), mb.to_string()],
        },
    })
}

fn print_against(a: &Report, b: &Report) {
    crate::say!("{} pass(es); A = --config, B = --against", a.passes);
    crate::say!(
        "{:<16} {:>9} {:>9} {:>13} {:>13} {:>14} {:>14}  basis",
        "device",
        "changes A",
        "changes B",
        "final ring A",
        "final ring B",
        "miss share A",
        "miss share B"
    );
    let names: std::collections::BTreeSet<&String> =
        a.devices.keys().chain(b.devices.keys()).collect();
    let opt = |v: Option<u32>| v.map_or_else(|| "-".into(), |v| v.to_string());
    let pct = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{:.2} %", v * 100.0));
    let (mut ca, mut cb, mut ma, mut mb) = (0, 0, 0_u64, 0_u64);
    for n in names {
        let da = a.devices.get(n).cloned().unwrap_or_default();
        let db = b.devices.get(n).cloned().unwrap_or_default();
        ca += da.changes;
        cb += db.changes;
        ma += da.pool_bytes;
        mb += db.pool_bytes;
        crate::say!(
            "{n:<16} {:>9} {:>9} {:>13} {:>13} {:>14} {:>14}  {}",
            da.changes,
            db.changes,
            opt(da.final_ring),
            opt(db.final_ring),
            pct(da.recycle_miss_share),
            pct(db.recycle_miss_share),
            if da.modelled || db.modelled {
                "modelled"
            } else {
                "observed"
            }
        );
    }
    crate::say!(
        "total: changes A {ca}, B {cb}; pool memory A {}, B {}",
        crate::human::bytes(ma),
        crate::human::bytes(mb)
    );
}

/// `--since` and `--until` (of `history` and `replay`): a duration ago
/// (`24h`) or an RFC 3339 time, as milliseconds since the epoch.
///
/// # Errors
/// Neither.
pub fn parse_time(s: &str) -> Result<u64, UsageError> {
    if let Some(d) = config::parse_duration(s) {
        return Ok(unix_ms().saturating_sub(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)));
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| u64::try_from(t.timestamp_millis()).unwrap_or(0))
        .map_err(|_| UsageError::Time(s.to_owned()))
}
