//! What is wrong with a policy, and what is only odd: the errors and
//! warnings a load reports, and their rendering for `check` and `run`.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::{EX_CONFIG, MAX_POLICY_FILE_BYTES, MAX_POLICY_TOTAL_BYTES};

/// Something in the policy input that is probably not what was meant,
/// though the policy is valid: a file that is not read, a driver name no
/// device will have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// `file:line:column`, or the file's path.
    pub location: String,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: warning: {}", self.location, self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n    hint: {h}")?;
        }
        Ok(())
    }
}

/// One problem with the policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A `--config` path that does not exist.
    #[error("{}: no such policy file or directory", path.display())]
    FindConfig { path: PathBuf },
    #[error("{}: cannot read the policy file", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A policy path that exists but is not a regular file (or a symlink to
    /// one): a directory, a FIFO, a socket, a dangling symlink. Never
    /// skipped, so a broken deployment is not mistaken for "no policy".
    #[error("{}: not a policy file: {what}", path.display())]
    NotAFile { path: PathBuf, what: &'static str },
    /// A file larger than a policy file can be; checked before reading.
    #[error("{}: {size} bytes, more than the {MAX_POLICY_FILE_BYTES} a policy file may have", path.display())]
    TooLarge { path: PathBuf, size: u64 },
    /// The files before this one and this one together are larger than
    /// all policy files may be; it and the files after it are not read.
    #[error("{}: with the policy files before it, {total} bytes, more than the {MAX_POLICY_TOTAL_BYTES} all policy files together may have; it and the files after it were not read", path.display())]
    TooMuchPolicy { path: PathBuf, total: u64 },
    /// The policy's `shadow` names a file that does not exist.
    #[error("{}: no such shadow policy file (named by `shadow`)", path.display())]
    FindShadow { path: PathBuf },
    /// A directory with both `policy.yaml` and `policy.yml`.
    #[error("{}: two main policy files, {} and {}", dir.display(), crate::MAIN_FILES[0], crate::MAIN_FILES[1])]
    TwoMainFiles { dir: PathBuf },
    /// A file the policy names (the metrics web config) that does not
    /// load; found by the command that loads it, reported with the rest.
    #[error("{key}: {message}")]
    Named { key: &'static str, message: String },
    /// The shadow policy names a shadow of its own.
    #[error("{}: shadow: a shadow policy cannot name a shadow of its own", path.display())]
    NestedShadow { path: PathBuf },
    /// Bytes that are not UTF-8, at the first bad byte.
    #[error("{location}: not UTF-8 text")]
    NotUtf8 { location: String },
    #[error("{}: cannot list policy drop-ins", path.display())]
    ListDropIns {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// YAML that does not parse; `message` is the parser's, in words for
    /// the person who wrote the file (no parser options, no snippet: the
    /// location says where).
    #[error("{location}: not valid YAML: {message}")]
    ParseYaml { location: String, message: String },
    /// A value that breaks the schema or contradicts another value.
    #[error("{location}: {key}: {message}")]
    InvalidValue {
        /// `file:line:column`.
        location: String,
        /// Dotted key path, e.g. `rings.min` or `selectors[1].mode`.
        key: String,
        message: String,
        hint: Option<String>,
    },
}

impl Error {
    /// The hint, for errors that carry one.
    #[must_use]
    pub fn hint(&self) -> Option<&str> {
        match self {
            Self::InvalidValue { hint, .. } => hint.as_deref(),
            Self::FindConfig { .. } => Some("pass an existing file or directory to --config"),
            Self::NotAFile { .. } => {
                Some("replace it with a regular YAML file, or remove it to use the defaults")
            }
            Self::TooLarge { .. } | Self::TooMuchPolicy { .. } => {
                Some("a policy is a few kilobytes of YAML")
            }
            Self::FindShadow { .. } => {
                Some("create the file, or set `shadow: null` to run without a shadow policy")
            }
            Self::NestedShadow { .. } => Some("remove `shadow` from the shadow policy file"),
            Self::TwoMainFiles { .. } => {
                Some("keep one: merge the other into it, or move it to policy.d/ as a drop-in")
            }
            _ => None,
        }
    }
}

/// Every problem found in one run.
#[derive(Debug, Default)]
pub struct Errors {
    pub errors: Vec<Error>,
    /// What would be [`Loaded::warnings`] had the policy loaded.
    pub warnings: Vec<Warning>,
    /// The policy as far as it could be built (invalid entries left out),
    /// so a command can check the files it names and report their
    /// problems with these; `None` when nothing could be built.
    pub partial: Option<Box<policy::Policy>>,
}

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&render(self))
    }
}

impl std::error::Error for Errors {}

/// Renders every error as text for `pptune check` and `pptune run`: one
/// `file:line:column: key: message` line each, the cause and hint indented
/// below, and a count at the end.
#[must_use]
pub fn render(errors: &Errors) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for w in &errors.warnings {
        let _ = writeln!(out, "{w}");
    }
    for e in &errors.errors {
        let _ = writeln!(out, "{e}");
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            for line in s.to_string().lines() {
                let _ = writeln!(out, "    {line}");
            }
            src = s.source();
        }
        if let Some(h) = e.hint() {
            let _ = writeln!(out, "    hint: {h}");
        }
    }
    let n = errors.errors.len();
    let _ = writeln!(
        out,
        "{n} problem{} found; the policy was not applied",
        if n == 1 { "" } else { "s" }
    );
    out
}

/// The exit code for `pptune check`: 0 when valid, [`EX_CONFIG`] otherwise.
#[must_use]
pub fn check_exit_code<T>(result: &Result<T, Errors>) -> i32 {
    if result.is_ok() { 0 } else { EX_CONFIG }
}
