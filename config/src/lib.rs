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
use std::io;
use std::path::{Path, PathBuf};

use serde_saphyr::MessageFormatter as _;

mod convert;
mod dirs;
mod error;
pub mod file;
pub mod fleet;
mod merge;
mod path;
pub mod raw;
mod schema;
mod tree;
pub mod web;

pub use convert::{LISTEN_EXAMPLES, MAX_DURATION, parse_bytes, parse_duration, parse_listen};
pub use dirs::{Dir, systemd_directory};
pub use error::{Error, Errors, Warning, check_exit_code, render};

/// `EX_CONFIG` from sysexits.h: `pptune check` and `pptune run` exit with it
/// on an invalid policy, and the unit's `RestartPreventExitStatus=78` stops
/// systemd from restarting into the same error.
pub const EX_CONFIG: i32 = 78;

/// The embedded default policy (`config/src/default.yaml`).
pub const DEFAULT_POLICY_YAML: &str = include_str!("default.yaml");

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

/// The main file's two names, in the order they are looked for.
pub const MAIN_FILES: [&str; 2] = ["policy.yaml", "policy.yml"];

/// The extensions a drop-in in `policy.d` may have.
pub const DROP_IN_EXTENSIONS: [&str; 2] = ["yaml", "yml"];

/// What a configuration directory holds: the files read, in merge order,
/// and the files not read that look like they were meant to be.
#[derive(Debug, Default)]
struct Listing {
    files: Vec<PathBuf>,
    ignored: Vec<PathBuf>,
}

fn ignored_warning(f: &Path, dir: Option<&Path>) -> Warning {
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
fn dir_files(dir: &Path, errors: &mut Errors) -> Listing {
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

/// `Ok` when `path` is a regular file or a symlink to one; otherwise says
/// what it is. Looks at the inode only: a FIFO is never opened (that would
/// block).
fn policy_file(path: &Path) -> Result<(), Error> {
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
fn read_policy_file(path: &Path, read_before: u64) -> Result<String, Error> {
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

/// The schema every document is checked against. Generated once per
/// process: it depends only on [`raw::RawPolicy`], and generating it was a
/// tenth of a small file's load (RELIABILITY.md §1, the `policy` target).
fn checking_schema() -> &'static serde_json::Value {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| schema::generate(None))
}

/// The embedded default policy as a spanned tree, the base every load
/// merges onto. Parsed once per process (it is a constant, and parsing its
/// commented text was most of a small file's load), handed out as a copy.
/// A parse error is not kept: it cannot happen for the shipped text (the
/// tests load it) and, if it did, every call would report it afresh.
fn default_tree() -> Result<tree::Node, serde_saphyr::Error> {
    static TREE: std::sync::OnceLock<tree::Node> = std::sync::OnceLock::new();
    if let Some(t) = TREE.get() {
        return Ok(t.clone());
    }
    let t = tree::parse(DEFAULT_POLICY_YAML, 0)?;
    Ok(TREE.get_or_init(|| t).clone())
}

/// [`build_partial`], as a result: the policy only when nothing was wrong.
fn build(docs: &[(String, String)]) -> Result<policy::Policy, Errors> {
    let b = build_partial(docs);
    match b.policy {
        Some(p) if b.errors.errors.is_empty() => Ok(p),
        _ => Err(Errors {
            warnings: b.warnings,
            ..b.errors
        }),
    }
}

/// What [`build_partial`] made of the documents.
struct Built {
    /// The policy with invalid entries left out; `None` when none could be
    /// made.
    policy: Option<policy::Policy>,
    errors: Errors,
    warnings: Vec<Warning>,
}

/// The pipeline: parse → schema check per file → merge → convert.
fn build_partial(docs: &[(String, String)]) -> Built {
    let built = |policy, errors, warnings| Built {
        policy,
        errors,
        warnings,
    };
    let mut names = vec![DEFAULT_SOURCE_NAME.to_owned()];
    names.extend(docs.iter().map(|(n, _)| n.clone()));
    let at = |loc: tree::Loc| -> String {
        let file = names.get(loc.source).map_or("?", String::as_str);
        format!("{file}:{}:{}", loc.line, loc.column)
    };
    let mut errors = Errors::default();
    let schema = checking_schema();
    let mut base = match default_tree() {
        Ok(t) => t,
        Err(e) => {
            errors.errors.push(parse_error(DEFAULT_SOURCE_NAME, e));
            return built(None, errors, vec![]);
        }
    };
    let mut structural = Vec::new();
    for (i, (name, text)) in docs.iter().enumerate() {
        let mut doc = match tree::parse(text, i + 1) {
            Ok(d) => d,
            Err(e) => {
                errors.errors.push(parse_error(name, e));
                continue;
            }
        };
        let mut v = schema::Validator::new(schema);
        v.check(schema, &doc, "");
        // Leave invalid entries out so the semantic pass still runs on
        // the rest (every problem in one run).
        for issue in &v.issues {
            merge::remove_path(&mut doc, &issue.path);
        }
        structural.extend(v.issues);
        // A document that is not a mapping (a list, a scalar) was reported
        // above and has nothing to merge.
        if matches!(doc.value, tree::Value::Map(_)) {
            merge::merge(&mut base, doc);
        }
    }
    for i in structural {
        errors.errors.push(Error::InvalidValue {
            location: at(i.loc),
            key: display_key(&i.path),
            message: i.message,
            hint: i.hint,
        });
    }
    // The merged document must satisfy the schema too (a removed entry may
    // have left an item without a required key).
    prune_merged(&mut base, schema, &mut errors, &at);
    let raw: raw::RawPolicy = match serde_json::from_value(tree_to_json(&base)) {
        Ok(r) => r,
        // What the checks above reported is what the operator needs; a
        // second error about the same values, in serde's words, is not.
        Err(_) if !errors.errors.is_empty() => return built(None, errors, vec![]),
        Err(e) => {
            errors.errors.push(Error::InvalidValue {
                location: at(base.loc),
                key: "(document)".into(),
                message: format!(
                    "passes the schema but not pptune's policy structure; this is a bug in pptune, please report it ({e})"
                ),
                hint: None,
            });
            return built(None, errors, vec![]);
        }
    };
    let converted = convert::convert(&raw, &base);
    for i in converted.issues {
        errors.errors.push(Error::InvalidValue {
            location: at(i.loc),
            key: display_key(&i.path),
            message: i.message,
            hint: i.hint,
        });
    }
    let warnings = converted
        .warnings
        .into_iter()
        .map(|i| Warning {
            location: at(i.loc),
            message: format!("{}: {}", display_key(&i.path), i.message),
            hint: i.hint,
        })
        .collect();
    built(Some(converted.policy), errors, warnings)
}

/// Removing an invalid entry can leave its parent incomplete (a rollout
/// without `fraction`): drops such parents from the merged document too, a
/// few rounds at most, reporting them only when nothing else was.
fn prune_merged(
    base: &mut tree::Node,
    schema: &serde_json::Value,
    errors: &mut Errors,
    at: &dyn Fn(tree::Loc) -> String,
) {
    for _ in 0..8 {
        let mut v = schema::Validator::new(schema);
        v.check(schema, base, "");
        if v.issues.is_empty() {
            break;
        }
        let report = errors.errors.is_empty();
        for i in v.issues {
            merge::remove_path(base, &i.path);
            if report {
                errors.errors.push(Error::InvalidValue {
                    location: at(i.loc),
                    key: display_key(&i.path),
                    message: i.message,
                    hint: i.hint,
                });
            }
        }
    }
}

fn display_key(path: &str) -> String {
    if path.is_empty() {
        "(document)".to_owned()
    } else {
        path.to_owned()
    }
}

fn parse_error(name: &str, e: serde_saphyr::Error) -> Error {
    let location = match e.location() {
        Some(l) => format!("{name}:{}:{}", l.line(), l.column()),
        None => name.to_owned(),
    };
    let message = tree::Messages
        .format_message(e.without_snippet())
        .chars()
        .flat_map(|c| {
            // One line: a key's own line break or escape is shown, not done.
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    Error::ParseYaml { location, message }
}

fn tree_to_json(n: &tree::Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &n.value {
        tree::Value::Null => J::Null,
        tree::Value::Bool(b) => J::Bool(*b),
        tree::Value::Int(i) => i64::try_from(*i)
            .map(J::from)
            .or_else(|_| u64::try_from(*i).map(J::from))
            .unwrap_or(J::Null),
        tree::Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        tree::Value::Str(s) => J::String(s.clone()),
        tree::Value::Seq(items) => J::Array(items.iter().map(tree_to_json).collect()),
        tree::Value::Map(m) => J::Object(
            m.iter()
                .map(|(k, v)| (k.name.clone(), tree_to_json(v)))
                .collect(),
        ),
    }
}
