//! Finding and reading the policy files: what a configuration directory
//! holds (the main file, the drop-ins, what is ignored) and the bounded read
//! of each file.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

use crate::{Error, Errors, MAX_POLICY_FILE_BYTES, MAX_POLICY_TOTAL_BYTES, Warning, file};

/// The main file's two names, in the order they are looked for.
pub const MAIN_FILES: [&str; 2] = ["policy.yaml", "policy.yml"];

/// The extensions a drop-in in `policy.d` may have.
pub const DROP_IN_EXTENSIONS: [&str; 2] = ["yaml", "yml"];

/// What a configuration directory holds: the files read, in merge order,
/// and the files not read that look like they were meant to be.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub files: Vec<PathBuf>,
    pub ignored: Vec<PathBuf>,
}

pub(crate) fn ignored_warning(f: &Path, dir: Option<&Path>) -> Warning {
    let d = dir.map_or_else(String::new, |d| d.display().to_string());
    Warning {
        location: f.display().to_string(),
        message: "ignored: not a policy file pptune reads".to_owned(),
        hint: Some(format!(
            "pptune reads {d}/policy.yaml (or policy.yml) and {d}/policy.d/*.yaml (or *.yml); rename it to be read, or remove it"
        )),
    }
}

/// `DIR/policy.yaml` (or `policy.yml`) then `DIR/policy.d/*.yaml` and
/// `*.yml` in lexical order (hidden files skipped, as systemd does for
/// drop-ins). Not read, and listed as ignored: any other file in
/// `policy.d`, and, when there is no main file, the YAML files in `DIR`.
pub(crate) fn dir_files(dir: &Path, errors: &mut Errors) -> Listing {
    let mut out = Listing::default();
    let mains: Vec<PathBuf> = MAIN_FILES
        .iter()
        .map(|n| dir.join(n))
        .filter(|m| m.symlink_metadata().is_ok())
        .collect();
    match mains.as_slice() {
        [] => out.ignored.extend(
            visible_files(dir)
                .into_iter()
                .filter(|p| has_extension(p, &DROP_IN_EXTENSIONS)),
        ),
        [main] => match policy_file(main) {
            Ok(()) => out.files.push(main.clone()),
            Err(e) => errors.errors.push(e),
        },
        _ => errors.errors.push(Error::TwoMainFiles {
            dir: dir.to_owned(),
        }),
    }
    let d = dir.join("policy.d");
    // Present in any form (a file, a dangling symlink): read_dir says why
    // it cannot be listed.
    if d.symlink_metadata().is_ok() {
        match std::fs::read_dir(&d) {
            Ok(rd) => {
                let mut entries: Vec<PathBuf> = rd
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| !hidden(p))
                    .collect();
                entries.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
                for p in entries {
                    if !has_extension(&p, &DROP_IN_EXTENSIONS) {
                        out.ignored.push(p);
                        continue;
                    }
                    match policy_file(&p) {
                        Ok(()) => out.files.push(p),
                        Err(e) => errors.errors.push(e),
                    }
                }
            }
            Err(source) => errors.errors.push(Error::ListDropIns { path: d, source }),
        }
    }
    out
}

fn hidden(p: &Path) -> bool {
    p.file_name()
        .and_then(OsStr::to_str)
        .is_none_or(|n| n.starts_with('.'))
}

fn has_extension(p: &Path, exts: &[&str]) -> bool {
    p.extension()
        .is_some_and(|e| exts.iter().any(|x| e == OsStr::new(x)))
}

/// The regular files (or symlinks to them) in `dir`, hidden ones left out,
/// in lexical order; an unreadable directory lists none.
fn visible_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| !hidden(p) && p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// `Ok` when `path` is a regular file or a symlink to one; otherwise says
/// what it is. Looks at the inode only: a FIFO is never opened (that would
/// block).
pub(crate) fn policy_file(path: &Path) -> Result<(), Error> {
    let what = match std::fs::metadata(path) {
        Ok(m) => match file::not_regular(&m) {
            None => return Ok(()),
            Some(what) => what,
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => "a symlink to a missing file",
        Err(source) => {
            return Err(Error::ReadFile {
                path: path.to_owned(),
                source,
            });
        }
    };
    Err(Error::NotAFile {
        path: path.to_owned(),
        what,
    })
}

/// Reads a policy file of at most [`MAX_POLICY_FILE_BYTES`] and at most
/// `budget` (what [`MAX_POLICY_TOTAL_BYTES`] leaves after the files read
/// before it), through [`file::read_regular`]: regular files only, the
/// length checked first and the read bounded too.
pub(crate) fn read_policy_file(path: &Path, read_before: u64) -> Result<String, Error> {
    let budget = MAX_POLICY_TOTAL_BYTES.saturating_sub(read_before);
    let bytes = match file::read_regular(path, MAX_POLICY_FILE_BYTES.min(budget)) {
        Ok(b) => b,
        Err(file::ReadError::TooLarge { size, .. }) if size > MAX_POLICY_FILE_BYTES => {
            return Err(Error::TooLarge {
                path: path.to_owned(),
                size,
            });
        }
        Err(file::ReadError::TooLarge { size, .. }) => {
            return Err(Error::TooMuchPolicy {
                path: path.to_owned(),
                total: read_before.saturating_add(size),
            });
        }
        Err(file::ReadError::NotAFile { what, .. }) => {
            return Err(Error::NotAFile {
                path: path.to_owned(),
                what,
            });
        }
        Err(file::ReadError::Io { cause, .. }) => {
            return Err(Error::ReadFile {
                path: path.to_owned(),
                source: cause,
            });
        }
        // read_regular judges no ownership.
        Err(e @ file::ReadError::Untrusted { .. }) => {
            return Err(Error::ReadFile {
                path: path.to_owned(),
                source: io::Error::other(e.to_string()),
            });
        }
    };
    String::from_utf8(bytes).map_err(|e| {
        let good = e
            .as_bytes()
            .get(..e.utf8_error().valid_up_to())
            .unwrap_or_default();
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(good.get(line_start..).unwrap_or_default())
            .chars()
            .count()
            + 1;
        Error::NotUtf8 {
            location: format!("{}:{line}:{column}", path.display()),
        }
    })
}
