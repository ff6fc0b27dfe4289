//! `pptune history`: the change journal, for people or as JSON.

use std::process::ExitCode;

use anyhow::Context as _;

use super::args::JsonFlag;
use super::replay::{parse_time, when};
use crate::record::journal::{self, HistoryRow};
use crate::record::state_dir;

/// `pptune history`'s arguments.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// Only changes since then: a duration ago (24h) or an RFC 3339 time.
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Only this interface (repeatable).
    #[arg(long = "interface", short = 'i', value_name = "NAME")]
    pub interfaces: Vec<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `pptune history`.
pub fn history(args: &HistoryArgs) -> anyhow::Result<ExitCode> {
    let (since, interfaces, json) = (args.since.as_deref(), &args.interfaces, args.json.on);
    let since = match since.map(parse_time).transpose() {
        Ok(s) => s,
        Err(msg) => {
            crate::say_err!("pptune: {msg}");
            return Ok(ExitCode::from(2));
        }
    };
    let dir = state_dir();
    let (rows, warnings) = journal::read(&dir).with_context(|| {
        format!(
            "reading the change journal in {} (set STATE_DIRECTORY to read another)",
            dir.display()
        )
    })?;
    for w in &warnings {
        crate::say_err!("pptune history: warning: {w}");
    }
    let rows: Vec<&HistoryRow> = rows
        .iter()
        .filter(|r| since.is_none_or(|s| r.change.unix_ms >= s))
        .filter(|r| interfaces.is_empty() || interfaces.contains(&r.change.device))
        .collect();
    if json {
        let v = serde_json::json!({ "schema_version": 1, "changes": rows });
        crate::human::print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        crate::say!(
            "no changes recorded in {}",
            dir.join(journal::FILE).display()
        );
    }
    for r in rows {
        let c = &r.change;
        // A change put back is not in effect, whatever its evaluation said.
        let undone = r.restored.as_ref().map_or_else(String::new, |u| {
            format!(
                "; undone: {} restored to {} at {} by {}",
                c.knob,
                u.to,
                when(u.unix_ms),
                u.by
            )
        });
        crate::say!(
            "{} {} {} {} -> {} [{}] outcome: {}{undone}",
            when(c.unix_ms),
            c.device,
            c.knob,
            c.from,
            c.to,
            c.reason.as_deref().unwrap_or("-"),
            c.outcome
        );
        if let Some(m) = &c.message {
            crate::say!("    {m}");
        }
        if let Some(ev) = &c.evidence {
            let ev: Vec<String> = ev.iter().map(|(k, v)| format!("{k}={v:.4}")).collect();
            if !ev.is_empty() {
                crate::say!("    evidence: {}", ev.join(" "));
            }
        }
        if let Some(id) = &c.id {
            crate::say!("    recommendation id: {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
