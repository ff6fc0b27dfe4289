//! The recording (docs/recording.md): what pptune saw and did, pass by
//! pass, as compressed, checksummed frames in rolling segment files under
//! the state directory, bounded by `daemon.recording_max_bytes`; and the
//! change journal `pptune history` reads.
//!
//! - [`format`]: the on-disk records and the snapshot delta coding;
//! - [`file`]: frames and segments, torn-tail handling;
//! - [`Recorder`]: the writer the daemon (and `pptune record`) uses;
//! - [`Recording`]: the reader `replay` and `history` use;
//! - [`journal`]: one JSON line per change and per outcome.
//! - `varint`: the snapshot block's numbers on the wire (varints, zigzag
//!   deltas) and its bounded reader;
//! - [`counterfactual`]: a policy run as if its own changes had been made
//!   (the ring model), for replay and the daemon's shadow policy;
//! - `live`: the counterfactual on the daemon's live passes, without a
//!   copy of the sample;
//! - [`replay`]: the policy engine over a recording's passes.
//!
//! A crate apart from the daemon (Cargo.toml says why); the daemon's live
//! side (what a pass writes, the recording's metrics) is its
//! `publish::recording` module.

pub mod coder;
pub mod counterfactual;
pub mod file;
pub mod format;
pub mod journal;
mod live;
mod model;
pub mod replay;
mod varint;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use policy::Policy;
use policy::engine::{ENGINE_STATE_VERSION, EngineState};
use policy::snapshot::Snapshot;

use coder::Coder;
pub use file::RecordError;
use file::{SegmentReader, SegmentWriter};
use format::{EngineBlob, FORMAT_VERSION, Pass, PrevPass, Record, SnapRec, Start, StartReason};

/// Wall-clock time since the epoch (zero before it).
#[must_use]
pub fn now_unix() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Wall-clock milliseconds since the epoch: the times a recording and the
/// journal carry.
#[must_use]
pub fn unix_ms() -> u64 {
    u64::try_from(now_unix().as_millis()).unwrap_or(u64::MAX)
}

/// The state directory ([`config::Dir::choose`] says where).
#[must_use]
pub fn state_dir() -> PathBuf {
    config::Dir::State.path()
}

/// The daemon's recording directory under the state directory.
#[must_use]
pub fn recording_dir(state: &Path) -> PathBuf {
    state.join("recording")
}

/// A segment is at most this share of the cap, so deleting the oldest one
/// gives back at most an eighth of the history.
const SEGMENTS_PER_CAP: u64 = 8;
/// A closed segment whose first record has not been read yet.
const UNDATED: u64 = u64::MAX;
const MIN_SEGMENT: u64 = 64 << 10;

fn segment_share(max_bytes: u64) -> u64 {
    (max_bytes / SEGMENTS_PER_CAP).max(MIN_SEGMENT)
}

/// Where a recorder writes.
#[derive(Debug)]
enum Target {
    /// Rolling segments in a directory, capped.
    Dir { dir: PathBuf, max_bytes: u64 },
    /// One file, no cap (`pptune record -o`).
    File(PathBuf),
}

/// The writer.
#[derive(Debug)]
pub struct Recorder {
    target: Target,
    run: u64,
    writer: String,
    host: String,
    policy: Option<String>,
    seg: Option<SegmentWriter>,
    reason: StartReason,
    next_seq: u64,
    /// Closed segments, oldest first: path, size, first pass time.
    closed: VecDeque<(PathBuf, u64, u64)>,
    /// First pass time of the open segment.
    seg_start_ms: u64,
    sync: bool,
}

fn host_name() -> String {
    config::file::read_regular_text(std::path::Path::new("/proc/sys/kernel/hostname"), 4096)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn policy_json(p: &Policy) -> Option<String> {
    serde_json::to_string(p).ok()
}

impl Recorder {
    /// The daemon's rolling recording in `dir` (created), capped at
    /// `max_bytes` including what earlier runs left there; `version` is
    /// the writer's, recorded in every segment.
    ///
    /// # Errors
    /// The directory cannot be created or listed.
    pub fn rolling(
        dir: &Path,
        max_bytes: u64,
        policy: &Policy,
        version: &str,
    ) -> Result<Self, RecordError> {
        std::fs::create_dir_all(dir).map_err(|cause| RecordError::Io {
            path: dir.to_owned(),
            cause,
        })?;
        let mut closed = VecDeque::new();
        let mut next_seq = 0;
        // Sizes only: a directory of many segments costs a listing and a
        // stat each, never a decompression each (the oldest kept one is
        // dated below, after the cap has deleted what it must).
        for (n, p) in file::segments(dir)? {
            let size = std::fs::metadata(&p).map_or(0, |m| m.len());
            closed.push_back((p, size, UNDATED));
            next_seq = n + 1;
        }
        let mut r = Self::new(
            Target::Dir {
                dir: dir.to_owned(),
                max_bytes,
            },
            "daemon",
            version,
            Some(policy),
        );
        r.closed = closed;
        r.next_seq = next_seq;
        r.sync = true;
        r.enforce_cap();
        Ok(r)
    }

    /// One file at `path` (must not exist), no cap.
    #[must_use]
    pub fn single(path: &Path, version: &str) -> Self {
        Self::new(Target::File(path.to_owned()), "record", version, None)
    }

    fn new(target: Target, role: &str, version: &str, policy: Option<&Policy>) -> Self {
        Self {
            target,
            run: unix_ms(),
            writer: format!("pptune {version} {role}"),
            host: host_name(),
            policy: policy.and_then(policy_json),
            seg: None,
            reason: StartReason::Run,
            next_seq: 0,
            closed: VecDeque::new(),
            seg_start_ms: 0,
            sync: false,
        }
    }

    /// Whether the next pass opens a segment (the caller then passes the
    /// engine's memory to [`Recorder::write`]).
    #[must_use]
    pub fn needs_start(&self) -> bool {
        self.seg.is_none()
    }

    /// The policy was reloaded; a changed one starts a new segment (the
    /// engine starts afresh).
    pub fn policy_reloaded(&mut self, p: &Policy, changed: bool) {
        if changed {
            self.policy = policy_json(p);
            self.close(StartReason::Reload);
        }
    }

    /// Ends the open segment, if any, and keeps the cap: every path that
    /// ends a segment (rotation, reload, a failed write) comes here.
    fn close(&mut self, reason: StartReason) {
        if let Some(s) = self.seg.take() {
            self.closed
                .push_back((s.path().to_owned(), s.disk_size(), self.seg_start_ms));
        }
        self.reason = reason;
        self.enforce_cap();
    }

    /// Writes one pass: `snap` as seen, `previous` the sample before it
    /// (with its monotonic time), `engine` the memory before deciding
    /// (asked only when a segment opens), `pass` builds the record around
    /// the encoded snapshot.
    ///
    /// # Errors
    /// I/O: the recording then misses this pass (the next one opens a new
    /// segment, so the reader never decodes across the hole).
    pub fn write(
        &mut self,
        engine: impl FnOnce() -> Option<EngineState>,
        previous: Option<(&Snapshot, Duration)>,
        snap: &Snapshot,
        pass: impl FnOnce(SnapRec) -> Pass,
    ) -> Result<(), RecordError> {
        let res = self.write_inner(engine, previous, snap, pass);
        if res.is_err() {
            // Whatever was half-written, the next pass starts clean.
            self.close(StartReason::Run);
        }
        res
    }

    fn write_inner(
        &mut self,
        engine: impl FnOnce() -> Option<EngineState>,
        previous: Option<(&Snapshot, Duration)>,
        snap: &Snapshot,
        pass: impl FnOnce(SnapRec) -> Pass,
    ) -> Result<(), RecordError> {
        if self.seg.is_none() {
            let path = match &self.target {
                Target::Dir { dir, .. } => {
                    let Some(name) = file::segment_name(self.next_seq) else {
                        return Err(RecordError::SequenceExhausted(dir.clone()));
                    };
                    self.next_seq += 1;
                    dir.join(name)
                }
                Target::File(p) => p.clone(),
            };
            let mut seg = SegmentWriter::create(&path, self.sync)?;
            let previous = previous.map(|(s, at)| PrevPass {
                now_ns: format::nanos(at),
                snapshot: seg.coder.encode(s),
            });
            let start = Start {
                format: FORMAT_VERSION,
                reason: self.reason,
                run: self.run,
                unix_ms: unix_ms(),
                writer: self.writer.clone(),
                host: self.host.clone(),
                counters: Coder::counter_names(),
                policy: self.policy.clone(),
                engine: engine().and_then(|e| {
                    serde_json::to_string(&e).ok().map(|json| EngineBlob {
                        version: ENGINE_STATE_VERSION,
                        json,
                    })
                }),
                previous,
            };
            // Registered only once its Start record is down: a segment
            // without one is of no use to a reader and is not left behind.
            let began = start.unix_ms;
            if let Err(e) = seg.append(&Record::Start(Box::new(start))) {
                seg.discard();
                return Err(e);
            }
            self.seg_start_ms = began;
            self.seg = Some(seg);
        }
        let Some(seg) = self.seg.as_mut() else {
            return Ok(());
        };
        let rec = pass(seg.coder.encode(snap));
        seg.append(&Record::Pass(Box::new(rec)))?;
        if let Target::Dir { max_bytes, .. } = self.target
            && seg.size() >= segment_share(max_bytes)
        {
            self.close(StartReason::Rotate);
        }
        Ok(())
    }

    /// Deletes the oldest closed segments until they and a full open
    /// segment fit the cap (the open one may pass its share by one pass).
    fn enforce_cap(&mut self) {
        let Target::Dir { max_bytes, .. } = self.target else {
            return;
        };
        let room = max_bytes.saturating_sub(segment_share(max_bytes));
        while self.closed.iter().map(|c| c.1).sum::<u64>() > room {
            let Some((p, _, _)) = self.closed.pop_front() else {
                break;
            };
            if let Err(e) = std::fs::remove_file(&p)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %p.display(), error = %e, "cannot delete an old recording segment");
            }
        }
        self.date_oldest();
    }

    /// Reads when the oldest kept segment began from its first record, once
    /// (segments found at start are listed undated): one bounded record
    /// read when the oldest changes, not one per segment.
    fn date_oldest(&mut self) {
        if let Some(front) = self.closed.front_mut()
            && front.2 == UNDATED
        {
            front.2 = SegmentReader::open(&front.0)
                .ok()
                .and_then(|mut r| r.next_record())
                .map_or(0, |r| match r {
                    Record::Start(s) => s.unix_ms,
                    Record::Pass(p) => p.unix_ms,
                });
        }
    }

    /// Bytes on disk, every segment included.
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.closed.iter().map(|(_, s, _)| s).sum::<u64>()
            + self.seg.as_ref().map_or(0, SegmentWriter::size)
    }

    /// When the oldest segment kept began (ms since the epoch), if any.
    #[must_use]
    pub fn oldest_unix_ms(&self) -> Option<u64> {
        self.closed
            .front()
            .map(|c| if c.2 == UNDATED { 0 } else { c.2 })
            .or(self.seg.as_ref().map(|_| self.seg_start_ms))
    }
}

/// One item of a recording read back.
#[derive(Debug)]
pub enum Item {
    /// A segment began; `previous` is the sample before its first pass.
    Start {
        start: Box<Start>,
        previous: Option<(Snapshot, Duration)>,
    },
    /// A pass, with its snapshot decoded.
    Pass { pass: Box<Pass>, snapshot: Snapshot },
}

/// One item of [`Recording::next_into`]: a pass's snapshot went into the
/// caller's buffer.
#[derive(Debug)]
pub enum Next {
    /// A segment began; `previous` is the sample before its first pass.
    Start {
        start: Box<Start>,
        previous: Option<(Snapshot, Duration)>,
    },
    /// A pass; its snapshot is in the buffer.
    Pass(Box<Pass>),
}

/// The reader: every segment in order, torn tails skipped with a warning.
#[derive(Debug)]
pub struct Recording {
    files: VecDeque<PathBuf>,
    current: Option<(SegmentReader, Coder)>,
    /// One line per segment that ended early or could not be read.
    pub warnings: Vec<String>,
}

impl Recording {
    /// A file, or a directory of segments.
    ///
    /// # Errors
    /// Nothing readable at `path`: not one of its segments is a recording
    /// of this format.
    pub fn open(path: &Path) -> Result<Self, RecordError> {
        let mut files: VecDeque<PathBuf> = file::files(path)?.into();
        let mut warnings = Vec::new();
        // Say a wrong file or format up front rather than as a warning;
        // segments that cannot be opened before the first that can (one
        // a crash left without its header) are skipped with a warning.
        while let Some(first) = files.front() {
            match SegmentReader::open(first) {
                Ok(_) => break,
                Err(e) if files.len() > 1 => {
                    warnings.push(format!("{e}: segment skipped"));
                    files.pop_front();
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Self {
            files,
            current: None,
            warnings,
        })
    }

    /// The next item, or `None` at the end; each pass's snapshot in a
    /// fresh buffer ([`Self::next_into`] reuses one).
    pub fn next_item(&mut self) -> Option<Item> {
        let mut snapshot = Snapshot::default();
        Some(match self.next_into(&mut snapshot)? {
            Next::Start { start, previous } => Item::Start { start, previous },
            Next::Pass(pass) => Item::Pass { pass, snapshot },
        })
    }

    /// The next item, or `None` at the end. A pass's snapshot is decoded
    /// into `snap`, reusing its vectors (whatever it held is overwritten).
    pub fn next_into(&mut self, snap: &mut Snapshot) -> Option<Next> {
        loop {
            if self.current.is_none() {
                let p = self.files.pop_front()?;
                match SegmentReader::open(&p) {
                    Ok(r) => self.current = Some((r, Coder::default())),
                    Err(e) => {
                        self.warnings.push(format!("{e}: segment skipped"));
                        continue;
                    }
                }
            }
            let (reader, coder) = self.current.as_mut()?;
            let Some(rec) = reader.next_record() else {
                if let Some(w) = reader.warning() {
                    self.warnings.push(w.to_owned());
                }
                self.current = None;
                continue;
            };
            match rec {
                Record::Start(start) => {
                    *coder = Coder::for_counters(&start.counters);
                    let previous = match &start.previous {
                        Some(p) => {
                            let mut s = Snapshot::default();
                            match coder.decode_into(&p.snapshot, reader.block(), &mut s) {
                                Ok(()) => Some((s, Duration::from_nanos(p.now_ns))),
                                Err(e) => {
                                    self.skip_segment(&e.to_string());
                                    continue;
                                }
                            }
                        }
                        None => None,
                    };
                    return Some(Next::Start { start, previous });
                }
                Record::Pass(_) if !coder.started() => {
                    self.skip_segment("a pass before the segment's Start record");
                }
                Record::Pass(pass) => match coder.decode_into(&pass.snapshot, reader.block(), snap)
                {
                    Ok(()) => return Some(Next::Pass(pass)),
                    Err(e) => self.skip_segment(&e.to_string()),
                },
            }
        }
    }

    fn skip_segment(&mut self, why: &str) {
        self.warnings
            .push(format!("{why}: the rest of the segment is skipped"));
        self.current = None;
    }
}

#[cfg(test)]
mod tests;
