//! Segment files: a header, then frames `[length u32 LE][crc32 u32 LE]
//! [payload]`, each payload one [`Record`] compressed with raw deflate:
//! `[CBOR length u32 LE][CBOR][snapshot block]` (docs/recording.md). A frame is written with one `write` and
//! synced, so a crash loses at most the pass being written; a torn or
//! corrupt frame ends its segment with a warning and the reader goes on
//! with the next segment.

use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

use super::coder::Coder;
use super::format::{FORMAT_VERSION, OLDEST_READ, Record};

/// First bytes of every segment: magic, then the format version (u32 LE).
pub const MAGIC: &[u8; 8] = b"PPTUNREC";
/// Segment file extension.
pub const EXTENSION: &str = "pptrec";
/// A record larger than this, compressed or inflated, is corruption, not a
/// pass: a 2048-pool keyframe is well under 1 MiB compressed and a few MiB
/// inflated. The reader allocates no more for one frame (a frame's length
/// is also checked against the bytes left in the file, and inflating stops
/// at this bound), and the snapshot decoder no more than one number per
/// byte of it (coder.rs).
pub const MAX_RECORD: u32 = 16 << 20;
/// A frame's bound: a record's, plus what deflate adds to bytes it cannot
/// compress (5 bytes per stored block of up to 64 KiB).
const MAX_FRAME: u32 = MAX_RECORD + (MAX_RECORD >> 10);
/// The deflate level, chosen by measurement (BENCHMARKS.md §6): zlib-rs's
/// level 1 writes 23 % more than its level 2 for a third less write time;
/// levels above 2 gain under 1 % and cost more.
const COMPRESSION: Compression = Compression::new(2);

/// Why a recording cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The cause is part of the message, not also a `source()`.
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: io::Error },
    #[error("{path} is not a pptune recording (no PPTUNREC header)")]
    NotRecording { path: PathBuf },
    #[error("{path} is recording format {found}; this pptune reads formats {OLDEST_READ} to {FORMAT_VERSION}{}", older(.found))]
    Version { path: PathBuf, found: u32 },
    #[error("{0}: no recording segments (*.pptrec) there")]
    Empty(PathBuf),
    /// Not a regular file, or (from its length) not a segment pptune wrote.
    #[error(transparent)]
    NotRegular(config::file::ReadError),
    #[error("encoding a record: {0}")]
    Encode(String),
    #[error(
        "{0}: the recording's segment numbers are used up (segment {LAST_SEQ} exists); \
         move the recording directory aside to start a new one"
    )]
    SequenceExhausted(PathBuf),
}

/// What to do with an older recording.
fn older(found: &u32) -> &'static str {
    if *found < OLDEST_READ {
        " (format 1 was written by pptune before the columnar snapshot block; \
         replay it with the pptune that wrote it)"
    } else {
        ""
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |cause| RecordError::Io {
        path: path.to_owned(),
        cause,
    }
}

/// The snapshot block a record carries after its CBOR.
fn block_of(rec: &Record) -> &[u8] {
    match rec {
        Record::Pass(p) => &p.snapshot.block,
        Record::Start(s) => s.previous.as_ref().map_or(&[], |p| &p.snapshot.block),
    }
}

/// One record as the bytes of a frame (header included).
///
/// # Errors
/// The record cannot be serialised (not expected for these types).
pub fn frame(rec: &Record) -> Result<Vec<u8>, RecordError> {
    // Serialised first, compressed in one go: the serialiser's many small
    // writes straight into the compressor cost more than the compression.
    let block = block_of(rec);
    let mut raw = Vec::with_capacity(4 + 1024 + block.len());
    raw.extend_from_slice(&[0_u8; 4]);
    ciborium::into_writer(rec, &mut raw).map_err(|e| RecordError::Encode(e.to_string()))?;
    let cbor = u32::try_from(raw.len() - 4).map_err(|e| RecordError::Encode(e.to_string()))?;
    raw[..4].copy_from_slice(&cbor.to_le_bytes());
    raw.extend_from_slice(block);
    // The reader's bound, kept by the writer too: a pass it would refuse
    // is not written.
    if raw.len() > MAX_RECORD as usize {
        return Err(RecordError::Encode(format!(
            "a pass of {} bytes, more than the {MAX_RECORD} a record may have",
            raw.len()
        )));
    }
    let mut head = Vec::with_capacity(8 + raw.len() / 2);
    head.extend_from_slice(&[0_u8; 8]);
    let mut enc = DeflateEncoder::new(head, COMPRESSION);
    enc.write_all(&raw)
        .map_err(|e| RecordError::Encode(e.to_string()))?;
    let mut out = enc
        .finish()
        .map_err(|e| RecordError::Encode(e.to_string()))?;
    let payload = out.get(8..).unwrap_or_default();
    let len = u32::try_from(payload.len()).map_err(|e| RecordError::Encode(e.to_string()))?;
    let crc = crc32fast::hash(payload);
    out[..4].copy_from_slice(&len.to_le_bytes());
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// A segment being written.
#[derive(Debug)]
pub struct SegmentWriter {
    path: PathBuf,
    file: File,
    size: u64,
    sync: bool,
    /// The delta-coding memory of this segment.
    pub coder: Coder,
}

impl SegmentWriter {
    /// Creates `path` (which must not exist) and writes the header.
    ///
    /// # Errors
    /// The file cannot be created or written.
    pub fn create(path: &Path, sync: bool) -> Result<Self, RecordError> {
        let file = config::file::create_new(path).map_err(io_err(path))?;
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let mut seg = Self {
            path: path.to_owned(),
            file,
            size: 0,
            sync,
            coder: Coder::writer(),
        };
        if let Err(e) = seg.write_frame(&head) {
            seg.discard();
            return Err(e);
        }
        Ok(seg)
    }

    /// Writes `bytes` as one write (then fdatasync when asked) and counts
    /// them.
    fn write_frame(&mut self, bytes: &[u8]) -> Result<(), RecordError> {
        self.file.write_all(bytes).map_err(io_err(&self.path))?;
        if self.sync {
            self.file.sync_data().map_err(io_err(&self.path))?;
        }
        self.size += bytes.len() as u64;
        Ok(())
    }

    /// Deletes the segment: one that never got its header or its Start
    /// record holds nothing a reader can use (on a full filesystem every
    /// pass would otherwise leave one behind).
    pub fn discard(self) {
        if let Err(e) = fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot delete an unfinished recording segment");
        }
    }

    /// Bytes on disk: what was counted, or more when a write failed
    /// half-way (the torn tail still takes room under the cap).
    #[must_use]
    pub fn disk_size(&self) -> u64 {
        self.file
            .metadata()
            .map_or(self.size, |m| m.len().max(self.size))
    }

    /// Appends one record as one write (then fdatasync when asked).
    ///
    /// # Errors
    /// Encoding or I/O failed; the segment may then end in a torn frame,
    /// which readers skip.
    pub fn append(&mut self, rec: &Record) -> Result<u64, RecordError> {
        let bytes = frame(rec)?;
        self.write_frame(&bytes)?;
        Ok(bytes.len() as u64)
    }

    #[must_use]
    pub fn size(&self) -> u64 {
        self.size
    }

    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Digits in a segment's sequence number as the writer names it:
/// `0000000042.pptrec`.
const SEQ_DIGITS: usize = 10;
/// The last sequence number a segment can have: numbers never wrap, and a
/// name past it is not a segment (so a file planted as
/// `18446744073709551615.pptrec` cannot make the next number overflow).
pub const LAST_SEQ: u64 = 9_999_999_999;

/// The file name of segment `n`, if `n` is a segment number.
#[must_use]
pub fn segment_name(n: u64) -> Option<String> {
    (n <= LAST_SEQ).then(|| format!("{n:0SEQ_DIGITS$}.{EXTENSION}"))
}

/// The sequence number a segment's file name carries, if it is one.
fn segment_number(p: &Path) -> Option<u64> {
    if p.extension().and_then(|x| x.to_str()) != Some(EXTENSION) {
        return None;
    }
    let stem = p.file_stem()?.to_str()?;
    if !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().filter(|n| *n <= LAST_SEQ)
}

/// The segments of a recording directory, oldest first (by the sequence
/// number in the name, [`segment_name`]).
///
/// # Errors
/// The directory cannot be listed.
pub fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, RecordError> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        let p = e.path();
        if let Some(n) = segment_number(&p) {
            v.push((n, p));
        }
    }
    v.sort();
    Ok(v)
}

/// The files a path names: one segment, or a directory's segments.
///
/// # Errors
/// Nothing readable there.
pub fn files(path: &Path) -> Result<Vec<PathBuf>, RecordError> {
    let meta = fs::metadata(path).map_err(io_err(path))?;
    if meta.is_dir() {
        let v: Vec<PathBuf> = segments(path)?.into_iter().map(|(_, p)| p).collect();
        if v.is_empty() {
            return Err(RecordError::Empty(path.to_owned()));
        }
        Ok(v)
    } else {
        Ok(vec![path.to_owned()])
    }
}

/// Reads the records of one segment in order. A torn or corrupt frame ends
/// the segment: [`SegmentReader::warning`] then says where and why.
#[derive(Debug)]
pub struct SegmentReader {
    path: PathBuf,
    input: BufReader<File>,
    /// The file's length when opened; a segment being written grows, so
    /// [`Self::next_record`] looks again before refusing a frame as longer
    /// than the file.
    size: u64,
    offset: u64,
    done: bool,
    warning: Option<String>,
    buf: Vec<u8>,
    raw: Vec<u8>,
    /// Where the last record's snapshot block sits in `raw`.
    block_at: usize,
}

impl SegmentReader {
    /// Opens `path` and checks its header.
    ///
    /// # Errors
    /// Unreadable, not a recording, or a format this build does not read.
    pub fn open(path: &Path) -> Result<Self, RecordError> {
        let (file, size) = config::file::open_regular(path).map_err(|e| match e {
            config::file::ReadError::Io { cause, .. } => RecordError::Io {
                path: path.to_owned(),
                cause,
            },
            other => RecordError::NotRegular(other),
        })?;
        let mut input = BufReader::with_capacity(1 << 20, file);
        let mut head = [0_u8; 12];
        input
            .read_exact(&mut head)
            .map_err(|_| RecordError::NotRecording {
                path: path.to_owned(),
            })?;
        if &head[..8] != MAGIC {
            return Err(RecordError::NotRecording {
                path: path.to_owned(),
            });
        }
        let found = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if !(OLDEST_READ..=FORMAT_VERSION).contains(&found) {
            return Err(RecordError::Version {
                path: path.to_owned(),
                found,
            });
        }
        Ok(Self {
            path: path.to_owned(),
            input,
            size,
            offset: 12,
            done: false,
            warning: None,
            buf: Vec::new(),
            raw: Vec::new(),
            block_at: 0,
        })
    }

    /// Why the segment ended early, if it did.
    #[must_use]
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    fn torn(&mut self, why: &str) -> Option<Record> {
        self.done = true;
        self.warning = Some(format!(
            "{}: {why} at byte {}: the rest of this segment is skipped",
            self.path.display(),
            self.offset
        ));
        None
    }

    /// The next complete record; `None` at the end or at a torn frame.
    pub fn next_record(&mut self) -> Option<Record> {
        if self.done {
            return None;
        }
        let mut head = [0_u8; 8];
        let mut got = 0;
        while got < head.len() {
            match self.input.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.torn(&format!("read error {e}")),
            }
        }
        if got == 0 {
            self.done = true;
            return None;
        }
        if got < head.len() {
            return self.torn("torn frame header");
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if len > MAX_FRAME {
            return self.torn(&format!(
                "implausible frame length {len} (a frame is at most {MAX_FRAME} bytes)"
            ));
        }
        let need = self.offset + 8 + u64::from(len);
        if need > self.size {
            self.size = self
                .input
                .get_ref()
                .metadata()
                .map_or(self.size, |m| m.len());
        }
        if need > self.size {
            return self.torn(&format!(
                "frame length {len} runs past the end of the file ({} bytes)",
                self.size
            ));
        }
        self.buf.resize(len as usize, 0);
        if self.input.read_exact(&mut self.buf).is_err() {
            return self.torn("torn frame (shorter than its length)");
        }
        if crc32fast::hash(&self.buf) != crc {
            return self.torn("frame checksum mismatch");
        }
        self.raw.clear();
        if let Err(e) = DeflateDecoder::new(&self.buf[..])
            .take(u64::from(MAX_RECORD) + 1)
            .read_to_end(&mut self.raw)
        {
            return self.torn(&format!("undecompressible record ({e})"));
        }
        if self.raw.len() > MAX_RECORD as usize {
            return self.torn(&format!(
                "record inflates past {MAX_RECORD} bytes (a frame of {len})"
            ));
        }
        let cbor_len = self
            .raw
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let Some(cbor) = cbor_len.and_then(|n| self.raw.get(4..4 + n)) else {
            return self.torn("record shorter than its CBOR length");
        };
        let rec: Result<Record, _> = ciborium::from_reader(cbor);
        match rec {
            Ok(r) => {
                self.block_at = 4 + cbor.len();
                self.offset += 8 + u64::from(len);
                Some(r)
            }
            Err(e) => self.torn(&format!("undecodable record ({e})")),
        }
    }

    /// The snapshot block of the record [`Self::next_record`] last returned.
    #[must_use]
    pub fn block(&self) -> &[u8] {
        self.raw.get(self.block_at..).unwrap_or_default()
    }
}
