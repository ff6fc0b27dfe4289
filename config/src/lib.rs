//! pptune's policy files: YAML → a validated [`policy::Policy`], with every
//! problem reported at once, each with file:line:column and a hint.
//!
//! What it is not: it applies nothing and knows nothing about the kernel.
//! `config → policy` is its only internal edge.
//!
//! # Where policies come from
//!
//! [`load`] is the one function every command calls with its `--config`
//! flag:
//!
//! - `--config FILE`: the embedded default, then that file;
//! - `--config DIR`: the embedded default, then `DIR/policy.yaml` (or
//!   `DIR/policy.yml`; both is an error), then `DIR/policy.d/*.yaml` and
//!   `*.yml` in lexical order; any other file in `policy.d`, and any other
//!   YAML file in `DIR` when there is no main file, is reported as ignored
//!   ([`Warning`]);
//! - no flag: as `DIR`, with `DIR` = the first path in
//!   `$CONFIGURATION_DIRECTORY` (systemd's `ConfigurationDirectory=`) or
//!   `/etc/pptune`.
//!
//! A path given with `--config` must exist; the default directory may be
//! empty, and then the embedded default policy applies alone.
//!
//! # How a file is checked
//!
//! 1. each file is parsed into a spanned tree (syntax errors stop only
//!    that file);
//! 2. each tree is checked against the JSON Schema generated from
//!    [`raw::RawPolicy`] (unknown keys, types, ranges, enum values), all
//!    problems collected;
//! 3. the trees are merged over the embedded default (see [`merge`] rules
//!    in docs/policy.md), invalid entries left out;
//! 4. the merged document is converted, and contradictions between keys
//!    are reported at the value that has to change.
#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

mod build;
mod convert;
mod dirs;
mod error;
pub mod file;
pub mod fleet;
mod listing;
mod merge;
mod path;
pub mod raw;
mod schema;
mod tree;
mod values;
pub mod web;

pub use dirs::{Dir, systemd_directory};
pub use error::{Error, Errors, Warning, check_exit_code, render};
pub use listing::{DROP_IN_EXTENSIONS, MAIN_FILES};
pub use values::{LISTEN_EXAMPLES, MAX_DURATION, parse_bytes, parse_duration, parse_listen};

use build::{build, build_partial, tree_to_json};
use listing::{Listing, dir_files, ignored_warning, policy_file, read_policy_file};

/// `EX_CONFIG` from sysexits.h: `pptune check` and `pptune run` exit with it
/// on an invalid policy, and the unit's `RestartPreventExitStatus=78` stops
/// systemd from restarting into the same error.
pub const EX_CONFIG: i32 = 78;

/// The embedded default policy (`config/src/default.yaml`).
pub const DEFAULT_POLICY_YAML: &str = include_str!("default.yaml");

/// [`DEFAULT_POLICY_YAML`]'s value as compact JSON, made from it at build
/// time (`config/build.rs`): a load with no policy file reads this.
pub(crate) const DEFAULT_POLICY_JSON: &str =
    include_str!(concat!(env!("OUT_DIR"), "/default.json"));

/// Display name of the embedded default in locations.
pub const DEFAULT_SOURCE_NAME: &str = "<embedded default policy>";

/// The largest policy file read: the YAML parser's own input budget. A
/// longer file is refused from its length, before any byte is read.
pub const MAX_POLICY_FILE_BYTES: u64 = 1 << 20;
/// The most bytes all policy files of one load may have together (every
/// reload reads them all): four files at the largest size. Checked from
/// each file's length before it is read.
pub const MAX_POLICY_TOTAL_BYTES: u64 = 4 * MAX_POLICY_FILE_BYTES;

/// The default configuration directory when systemd does not pass one.
pub const DEFAULT_CONFIG_DIR: &str = "/etc/pptune";

/// A policy and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub policy: policy::Policy,
    /// Files merged over the embedded default, in merge order.
    pub sources: Vec<PathBuf>,
    /// No file was found: the embedded default policy applies alone.
    pub default_applied: bool,
    /// What the load noticed but did not refuse: files it ignored, a
    /// selector naming no driver pptune knows. `check` prints them, `run`
    /// logs them at every load.
    pub warnings: Vec<Warning>,
}

/// Loads the policy as every command does (see the crate docs); `path` is
/// the `--config` flag. Reads `$CONFIGURATION_DIRECTORY` when no flag is given.
pub fn load(path: Option<&Path>) -> Result<Loaded, Errors> {
    let env = std::env::var_os("CONFIGURATION_DIRECTORY");
    load_with_config_dir(path, env.as_deref())
}

/// [`load`] with the value of `$CONFIGURATION_DIRECTORY` passed in (tests
/// must not change the process environment).
pub fn load_with_config_dir(
    path: Option<&Path>,
    configuration_directory: Option<&OsStr>,
) -> Result<Loaded, Errors> {
    let mut errors = Errors::default();
    let mut listing = Listing::default();
    let dir = match path {
        Some(p) if p.is_dir() => Some(p.to_path_buf()),
        Some(p) if p.symlink_metadata().is_err() => {
            errors.errors.push(Error::FindConfig {
                path: p.to_path_buf(),
            });
            return Err(errors);
        }
        Some(p) => match policy_file(p) {
            Ok(()) => {
                listing.files.push(p.to_path_buf());
                None
            }
            Err(e) => {
                errors.errors.push(e);
                return Err(errors);
            }
        },
        None => Some(
            systemd_directory(configuration_directory)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_DIR)),
        )
        .filter(|d| d.is_dir()),
    };
    if let Some(d) = &dir {
        listing = dir_files(d, &mut errors);
    }
    let files = listing.files;
    let mut docs = Vec::new();
    let mut read = 0_u64;
    for f in &files {
        match read_policy_file(f, read) {
            Ok(text) => {
                read = read.saturating_add(u64::try_from(text.len()).unwrap_or(u64::MAX));
                docs.push((f.display().to_string(), text));
            }
            Err(e) => {
                let spent = matches!(e, Error::TooMuchPolicy { .. });
                errors.errors.push(e);
                if spent {
                    break;
                }
            }
        }
    }
    // The shadow file is read even when the policy has other problems:
    // every problem in one run.
    let built = build_partial(&docs);
    let mut policy = built.policy;
    errors.errors.extend(built.errors.errors);
    errors.warnings.extend(built.warnings);
    if let Some(shadow) = policy.as_mut().and_then(|p| p.shadow.as_mut()) {
        match load_shadow(&shadow.path) {
            Ok(s) => shadow.policy = Some(Box::new(s)),
            Err(more) => errors.errors.extend(more.errors),
        }
    }
    // Other YAML files beside a missing main file are not read: say so
    // (except those the policy names, the shadow and the web config).
    let named: Vec<&Path> = policy.as_ref().map_or_else(Vec::new, |p| {
        p.shadow
            .iter()
            .map(|s| s.path.as_path())
            .chain(p.daemon.metrics_web_config.as_deref())
            .collect()
    });
    for f in &listing.ignored {
        if named.iter().any(|n| n == f) {
            continue;
        }
        errors.warnings.push(ignored_warning(f, dir.as_deref()));
    }
    match policy {
        Some(policy) if errors.errors.is_empty() => Ok(Loaded {
            policy,
            default_applied: files.is_empty(),
            sources: files,
            warnings: errors.warnings,
        }),
        partial => {
            errors.partial = partial.map(Box::new);
            Err(errors)
        }
    }
}

/// The shadow policy file at `path`, merged over the embedded default as a
/// one-file configuration (no drop-ins), with every problem located in it.
fn load_shadow(path: &Path) -> Result<policy::Policy, Errors> {
    let one = |e: Error| Errors {
        errors: vec![e],
        ..Errors::default()
    };
    if path.symlink_metadata().is_err() {
        return Err(one(Error::FindShadow {
            path: path.to_owned(),
        }));
    }
    policy_file(path).map_err(one)?;
    let text = read_policy_file(path, 0).map_err(one)?;
    let shadow = build(&[(path.display().to_string(), text)])?;
    if shadow.shadow.is_some() {
        return Err(one(Error::NestedShadow {
            path: path.to_owned(),
        }));
    }
    Ok(shadow)
}

/// Validates one policy document (merged over the embedded default) given
/// as text; `name` is used in locations. For tests and `check` on stdin.
pub fn parse_str(name: &str, text: &str) -> Result<policy::Policy, Errors> {
    build(&[(name.to_owned(), text.to_owned())])
}

/// Validates several documents as `--config DIR` does (each `(name,
/// text)` merged over the embedded default in order, like `policy.yaml`
/// then its drop-ins), without touching the filesystem. For the fuzzer and
/// tests of the drop-in merge.
pub fn parse_docs(docs: &[(String, String)]) -> Result<policy::Policy, Errors> {
    build(docs)
}

/// The embedded default policy alone.
pub fn default_policy() -> Result<policy::Policy, Errors> {
    build(&[])
}

/// The JSON Schema of a policy file, as shipped in
/// `packaging/policy.schema.json` (pretty-printed, trailing newline).
#[must_use]
pub fn schema_json() -> String {
    let defaults = tree::parse(DEFAULT_POLICY_YAML, 0)
        .ok()
        .map(|t| tree_to_json(&t));
    let schema = schema::generate(defaults.as_ref());
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}
