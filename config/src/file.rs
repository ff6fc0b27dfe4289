//! Reading a file that someone other than this process may have put there
//! (a policy, the state record, the change journal, a recording segment, a
//! TuneD profile): the one rule every such read goes through.
//!
//! - Regular files only, judged on the opened descriptor (`fstat`), and the
//!   open itself cannot block: `O_NONBLOCK` makes opening a FIFO with no
//!   writer return at once, and the FIFO is then refused from its inode,
//!   never read (a read would wait forever).
//! - Never more than the caller's bound: the length is checked before any
//!   byte is read, and the read is bounded too, for a file that grows or a
//!   pseudo-file that reports no length.
//!
//! And the rule for a file this process writes in a directory another user
//! may be able to write to (a runtime directory made world-writable by
//! mistake): [`open_for_write`] never follows a symlink at the last
//! component and never blocks on a FIFO, and what it opened must be a
//! regular file. New files that replace another by rename are made by
//! `tempfile` (exclusive creation, an unpredictable name, mode 0600).

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The cause is part of the message, and not also a `source()`: an
    /// error chain printed whole (`{:#}`) said it twice.
    #[error("{}: {cause}", path.display())]
    Io { path: PathBuf, cause: io::Error },
    /// Not a regular file (or a symlink to one); `what` says what it is.
    #[error("{}: not a regular file: {what}", path.display())]
    NotAFile { path: PathBuf, what: &'static str },
    /// Longer than the caller's bound (from its length, or from what a
    /// bounded read found).
    #[error("{}: {size} bytes, more than the {limit} it may have", path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    /// A file that drives privileged actions, owned by another user or
    /// writable by others ([`read_trusted`]).
    #[error("{}: not trusted: {why}", path.display())]
    Untrusted { path: PathBuf, why: String },
}

impl ReadError {
    /// The underlying I/O error's kind, if it is one (`NotFound` for a
    /// missing file).
    #[must_use]
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Self::Io { cause, .. } => Some(cause.kind()),
            _ => None,
        }
    }
}

/// What a file is when it is not a regular file (`None` when it is).
#[must_use]
pub fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device node")
    } else {
        Some("not a regular file")
    }
}

/// Opens `path` for reading if it is a regular file (a symlink to one is
/// followed), without blocking on a FIFO; returns the file and its length.
///
/// # Errors
/// It cannot be opened or is not a regular file.
pub fn open_regular(path: &Path) -> Result<(File, u64), ReadError> {
    let io_err = |cause| ReadError::Io {
        path: path.to_owned(),
        cause,
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if let Some(what) = not_regular(&meta) {
        return Err(ReadError::NotAFile {
            path: path.to_owned(),
            what,
        });
    }
    Ok((file, meta.len()))
}

/// Opens `path` for writing with `opts` (create, append, truncate as the
/// caller sets them) plus `O_NOFOLLOW` (a symlink there fails with
/// `ELOOP` instead of redirecting the write), `O_NONBLOCK` (a FIFO fails
/// with `ENXIO` or is refused below instead of waiting) and `O_NOCTTY`;
/// then refuses anything but a regular file.
///
/// # Errors
/// It cannot be opened (a symlink: `ELOOP`), or is not a regular file.
pub fn open_for_write(path: &Path, opts: &mut OpenOptions) -> io::Result<File> {
    let file = opts
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if let Some(what) = not_regular(&file.metadata()?) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is {what}, not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// Creates the output file `path` of a command (a recording, a plot), which
/// must not exist: `O_CREAT | O_EXCL` refuses an existing file and any
/// symlink there (dangling or not) with `EEXIST`, so nothing is written
/// over or through one. The one rule for a command's new output file.
///
/// # Errors
/// It exists, or cannot be created.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                io::Error::new(
                    e.kind(),
                    format!("{} exists: not overwritten", path.display()),
                )
            } else {
                e
            }
        })
}

/// The bytes of the regular file `path`, at most `limit` of them.
///
/// # Errors
/// It cannot be opened or read, is not a regular file, or is longer than
/// `limit` (judged from its length before reading, and from the read).
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let (file, size) = open_regular(path)?;
    read_bounded(path, file, size, limit)
}

/// [`read_regular`] for a file whose content drives privileged actions or
/// decides who is trusted (the state record `restore` puts back, the web
/// config and the certificates, key and CA it names): also refused unless
/// it is owned by root or by this process's effective user and neither
/// group- nor world-writable, judged on the opened file. In a runtime
/// directory another user could write to, such a file could be theirs.
///
/// # Errors
/// As [`read_regular`], and [`ReadError::Untrusted`].
pub fn read_trusted(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use std::os::unix::fs::MetadataExt as _;
    let (file, size) = open_regular(path)?;
    let meta = file.metadata().map_err(|cause| ReadError::Io {
        path: path.to_owned(),
        cause,
    })?;
    let me = nix::unistd::geteuid().as_raw();
    let why = if meta.uid() != me && meta.uid() != 0 {
        Some(format!(
            "owned by uid {}, neither root nor this process's uid {me}",
            meta.uid()
        ))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "mode {:o} lets others write it",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    if let Some(why) = why {
        return Err(ReadError::Untrusted {
            path: path.to_owned(),
            why,
        });
    }
    read_bounded(path, file, size, limit)
}

fn read_bounded(path: &Path, file: File, size: u64, limit: u64) -> Result<Vec<u8>, ReadError> {
    let too_large = |size| ReadError::TooLarge {
        path: path.to_owned(),
        size,
        limit,
    };
    if size > limit {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|cause| ReadError::Io {
            path: path.to_owned(),
            cause,
        })?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > limit {
        return Err(too_large(read));
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
///
/// # Errors
/// As [`read_regular`]; bytes that are not UTF-8 are `InvalidData`.
pub fn read_regular_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    utf8(path, read_regular(path, limit)?)
}

/// [`read_trusted`] as UTF-8 text.
///
/// # Errors
/// As [`read_trusted`]; bytes that are not UTF-8 are `InvalidData`.
pub fn read_trusted_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    utf8(path, read_trusted(path, limit)?)
}

fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, ReadError> {
    String::from_utf8(bytes).map_err(|e| ReadError::Io {
        path: path.to_owned(),
        cause: io::Error::new(io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

#[cfg(test)]
mod tests {
    // No tokio in this crate: the bounds are on wall time (a FIFO read
    // would block forever, a sparse 1 TiB read would take minutes).
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::disallowed_types
    )]
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_regular_file_within_its_bound_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        assert_eq!(read_regular(&p, 5).unwrap(), b"hello");
        assert!(matches!(
            read_regular(&p, 4),
            Err(ReadError::TooLarge {
                size: 5,
                limit: 4,
                ..
            })
        ));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert_eq!(read_regular_text(&link, 5).unwrap(), "hello");
    }

    #[test]
    fn writing_never_follows_a_symlink_and_never_waits_on_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("root-only");
        std::fs::write(&target, b"secret").unwrap();
        let link = dir.path().join("changes.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = open_for_write(&link, OpenOptions::new().create(true).append(true)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let t = Instant::now();
        assert!(open_for_write(&fifo, OpenOptions::new().write(true)).is_err());
        assert!(t.elapsed() < Duration::from_secs(1));
        let dev = open_for_write(Path::new("/dev/null"), OpenOptions::new().write(true));
        assert!(dev.unwrap_err().to_string().contains("a device node"));
        let plain = dir.path().join("plain");
        open_for_write(&plain, OpenOptions::new().create(true).append(true)).unwrap();
        assert!(plain.is_file());
    }

    #[test]
    fn a_trusted_file_is_ours_and_writable_by_no_one_else() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        std::fs::write(&p, b"{}").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_trusted_text(&p, 2).unwrap(), "{}");
        for mode in [0o664, 0o646, 0o666] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            match read_trusted(&p, 2) {
                Err(ReadError::Untrusted { why, .. }) => {
                    assert!(why.contains("lets others write it"), "{why}");
                }
                other => panic!("{mode:o}: {other:?}"),
            }
        }
    }

    #[test]
    #[ignore = "needs root (chown to another user); tests/run-all.sh runs it"]
    fn a_trusted_file_owned_by_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        std::fs::write(&p, b"{}").unwrap();
        std::os::unix::fs::chown(&p, Some(65534), None).expect("chown needs root");
        match read_trusted(&p, 2) {
            Err(ReadError::Untrusted { why, .. }) => {
                assert!(why.contains("owned by uid 65534"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_sparse_file_is_refused_from_its_length_before_a_byte_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sparse");
        let f = File::create(&p).unwrap();
        f.set_len(1 << 40).unwrap();
        let t = Instant::now();
        assert!(matches!(
            read_regular(&p, 1 << 20),
            Err(ReadError::TooLarge { size, .. }) if size == 1 << 40
        ));
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_fifo_a_directory_and_a_device_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let t = Instant::now();
        for (p, what) in [
            (fifo.as_path(), "a FIFO"),
            (dir.path(), "a directory"),
            (Path::new("/dev/null"), "a device node"),
        ] {
            match read_regular(p, 1 << 20) {
                Err(ReadError::NotAFile { what: w, .. }) => assert_eq!(w, what, "{}", p.display()),
                other => panic!("{}: {other:?}", p.display()),
            }
        }
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(
            read_regular(&dir.path().join("missing"), 1)
                .unwrap_err()
                .io_kind(),
            Some(io::ErrorKind::NotFound)
        );
    }
}
