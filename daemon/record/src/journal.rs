//! The change journal beside the recording: one JSON line per change pptune
//! made and per outcome its evaluation reached, appended as they happen.
//! Small (a change is rare), so it keeps far more history than the rolling
//! recording; `pptune history` reads it. One older generation
//! (`changes.jsonl.1`) is kept when it grows past [`ROTATE_AT`].

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use policy::engine::{ActionRecord, Outcome};
use policy::plan::{Decision, Knob};
use serde::{Deserialize, Serialize};

/// The journal's file name in the state directory.
pub const FILE: &str = "changes.jsonl";
/// Size at which the journal is moved to `changes.jsonl.1`.
pub const ROTATE_AT: u64 = 4 << 20;

/// One line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    /// A daemon run began (changes of earlier runs still pending then were
    /// closed as inconclusive by that run).
    Run { run: u64, unix_ms: u64 },
    /// A change, with the decision that asked for it.
    Change(Box<Change>),
    /// The evaluation of change (`run`, `seq`) reached an outcome.
    Outcome {
        run: u64,
        seq: u64,
        unix_ms: u64,
        outcome: Outcome,
    },
    /// An original was put back: every earlier change of this knob on this
    /// device is undone.
    Restore(Box<Restore>),
}

/// Who put an original back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestoredBy {
    /// `pptune restore` with no daemon running.
    Command,
    /// `pptune restore`, carried out by the running daemon.
    ControlSocket,
    /// The daemon, stopping under `on_stop: restore`.
    DaemonStop,
}

impl std::fmt::Display for RestoredBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Command => "pptune restore",
            Self::ControlSocket => "pptune restore, through the daemon",
            Self::DaemonStop => "the daemon stopping (on_stop: restore)",
        })
    }
}

/// A restore as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    pub unix_ms: u64,
    pub by: RestoredBy,
    pub device: String,
    pub device_key: String,
    pub knob: Knob,
    /// The original, set again.
    pub to: u32,
}

/// Appends the restores in `restored` (device name, device key, knob,
/// original) to the journal in `dir`.
///
/// # Errors
/// The journal cannot be written.
pub fn append_restores(
    dir: &Path,
    by: RestoredBy,
    unix_ms: u64,
    restored: &[(String, String, Knob, u32)],
) -> std::io::Result<()> {
    let entries: Vec<Entry> = restored
        .iter()
        .map(|(device, key, knob, to)| {
            Entry::Restore(Box::new(Restore {
                unix_ms,
                by,
                device: device.clone(),
                device_key: key.clone(),
                knob: *knob,
                to: *to,
            }))
        })
        .collect();
    append(&dir.join(FILE), &entries)
}

/// Appends `entries`, moving a file past [`ROTATE_AT`] to the older
/// generation first. Not followed through a symlink.
fn append(path: &Path, entries: &[Entry]) -> std::io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= ROTATE_AT) {
        std::fs::rename(path, path.with_extension("jsonl.1"))?;
    }
    let mut text = String::new();
    for e in entries {
        text.push_str(&serde_json::to_string(e).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    let mut f = config::file::open_for_write(path, OpenOptions::new().create(true).append(true))?;
    f.write_all(text.as_bytes())?;
    f.sync_data()
}

/// A change as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub run: u64,
    pub seq: u64,
    pub unix_ms: u64,
    pub device: String,
    pub device_key: String,
    pub knob: Knob,
    pub from: u32,
    pub to: u32,
    pub id: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub evidence: Option<BTreeMap<String, f64>>,
    pub outcome: Outcome,
}

/// The daemon's journal writer.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    run: u64,
    next_seq: u64,
    /// Changes in the engine's history already journaled: identity
    /// (device key, knob, at) → (seq, outcome written).
    known: Vec<((String, Knob, Duration), u64, Outcome)>,
    started: bool,
}

impl Journal {
    #[must_use]
    pub fn new(dir: &Path, run: u64) -> Self {
        Self {
            path: dir.join(FILE),
            run,
            next_seq: 0,
            known: Vec::new(),
            started: false,
        }
    }

    /// Journals what is new in the engine's `history` since the last pass:
    /// changes (with the decision of this pass that made them) and
    /// outcomes. The history a run starts with came from the previous run,
    /// which journaled it.
    ///
    /// # Errors
    /// The journal cannot be written.
    pub fn observe(
        &mut self,
        history: &[ActionRecord],
        decisions: &[Decision],
        now: Duration,
        unix_ms: u64,
    ) -> std::io::Result<()> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            for a in history {
                self.known
                    .push(((a.device.key(), a.knob, a.at), u64::MAX, a.outcome.clone()));
            }
            out.push(Entry::Run {
                run: self.run,
                unix_ms,
            });
        }
        let mut seen = Vec::with_capacity(history.len());
        for a in history {
            let ident = (a.device.key(), a.knob, a.at);
            let when = unix_ms.saturating_sub(
                u64::try_from(now.saturating_sub(a.at).as_millis()).unwrap_or(u64::MAX),
            );
            match self.known.iter_mut().find(|k| k.0 == ident) {
                Some(k) => {
                    if k.2 != a.outcome && k.1 != u64::MAX {
                        k.2 = a.outcome.clone();
                        out.push(Entry::Outcome {
                            run: self.run,
                            seq: k.1,
                            unix_ms,
                            outcome: a.outcome.clone(),
                        });
                    }
                }
                None => {
                    let dec = decisions
                        .iter()
                        .find(|d| d.device_id == a.device && d.action.knob() == Some(a.knob));
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    out.push(Entry::Change(Box::new(Change {
                        run: self.run,
                        seq,
                        unix_ms: when,
                        device: dec.map_or_else(|| a.device.key(), |d| d.device.clone()),
                        device_key: a.device.key(),
                        knob: a.knob,
                        from: a.from,
                        to: a.to,
                        id: dec.map(|d| d.id.to_string()),
                        reason: dec.map(|d| d.reason.as_str().to_owned()),
                        message: dec.map(|d| d.message.clone()),
                        evidence: dec.map(|d| d.evidence.to_map()),
                        outcome: a.outcome.clone(),
                    })));
                    self.known.push((ident.clone(), seq, a.outcome.clone()));
                }
            }
            seen.push(ident);
        }
        // What the engine forgot, the journal need not follow.
        self.known.retain(|k| seen.contains(&k.0));
        append(&self.path, &out)
    }

    /// Changes journaled by this writer (this run).
    #[must_use]
    pub fn changes(&self) -> u64 {
        self.next_seq
    }

    /// Journals restores the daemon made ([`append_restores`]).
    ///
    /// # Errors
    /// The journal cannot be written.
    pub fn restored(
        &self,
        by: RestoredBy,
        unix_ms: u64,
        restored: &[(String, String, Knob, u32)],
    ) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        append_restores(dir, by, unix_ms, restored)
    }
}

/// A change read back, with its latest outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRow {
    #[serde(flatten)]
    pub change: Change,
    /// When the latest outcome was journaled.
    pub outcome_unix_ms: Option<u64>,
    /// The restore that undid this change (the first one after it).
    pub restored: Option<Restore>,
}

/// The largest journal file read: it rotates at [`ROTATE_AT`], so a file
/// twice that size was not written by pptune (refused from its length).
pub const MAX_FILE_BYTES: u64 = 2 * ROTATE_AT;

/// Reads the journal in `dir` (the older generation first), each file as
/// [`config::file::read_regular`] reads: regular files of at most
/// [`MAX_FILE_BYTES`]. A line that does not parse (a torn last line) or is
/// not UTF-8 is skipped and reported, by file and line. Neither file
/// there is no change yet: no rows.
///
/// # Errors
/// A file exists and cannot be read.
pub fn read(dir: &Path) -> Result<(Vec<HistoryRow>, Vec<String>), config::file::ReadError> {
    let cur = dir.join(FILE);
    let old = cur.with_extension("jsonl.1");
    let mut files = Vec::new();
    for p in [&old, &cur] {
        match config::file::read_regular(p, MAX_FILE_BYTES) {
            Ok(bytes) => files.push((p, bytes)),
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    let mut warnings = Vec::new();
    let mut rows: Vec<HistoryRow> = Vec::new();
    let mut last_run = None;
    let lines = files.iter().flat_map(|(p, bytes)| {
        bytes
            .split(|&b| b == b'\n')
            .enumerate()
            .map(move |(n, line)| (*p, n + 1, line))
    });
    for (path, n, line) in lines {
        let line = match std::str::from_utf8(line) {
            Ok(l) => l,
            Err(e) => {
                warnings.push(format!(
                    "{}: line {n} skipped: not UTF-8 ({e})",
                    path.display()
                ));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(line) {
            Ok(Entry::Run { run, .. }) => last_run = Some(run),
            Ok(Entry::Change(c)) => rows.push(HistoryRow {
                change: *c,
                outcome_unix_ms: None,
                restored: None,
            }),
            Ok(Entry::Restore(r)) => {
                for row in rows.iter_mut().filter(|row| {
                    row.restored.is_none()
                        && row.change.device_key == r.device_key
                        && row.change.knob == r.knob
                }) {
                    row.restored = Some((*r).clone());
                }
            }
            Ok(Entry::Outcome {
                run,
                seq,
                unix_ms,
                outcome,
            }) => {
                if let Some(r) = rows
                    .iter_mut()
                    .rev()
                    .find(|r| r.change.run == run && r.change.seq == seq)
                {
                    r.change.outcome = outcome;
                    r.outcome_unix_ms = Some(unix_ms);
                }
            }
            Err(e) => warnings.push(format!("{}: line {n} skipped: {e}", path.display())),
        }
    }
    // A run that ended with a change under evaluation: the next run closed
    // it as inconclusive (state.rs `close_pending`), so does the journal.
    for r in &mut rows {
        if r.change.outcome == Outcome::Pending && last_run.is_some_and(|l| l != r.change.run) {
            r.change.outcome = Outcome::Inconclusive;
        }
    }
    Ok((rows, warnings))
}
