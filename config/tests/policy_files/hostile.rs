//! Hostile and broken policy inputs a careful operator (or a broken
//! deployment) produces: each was accepted, silently skipped or read whole
//! before its fix.

// Test helpers outside #[test] fns: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::Path;
use std::time::Duration;

use pptune_config::{
    Error, Errors, MAX_DURATION, MAX_POLICY_FILE_BYTES, MAX_POLICY_TOTAL_BYTES,
    load_with_config_dir, parse_str, render,
};

fn load(p: &Path) -> Result<pptune_config::Loaded, Errors> {
    load_with_config_dir(Some(p), None)
}

/// A duration the daemon would add to `Instant::now()`: `check` accepted
/// it and `run` panicked ("overflow when adding duration to instant").
#[test]
fn huge_durations_are_rejected_at_their_key() {
    for key in [
        "interval",
        "window",
        "cooldown",
        "evaluation",
        "calm_before_shrink",
    ] {
        let yaml = format!("timing:\n  {key}: 2600000000000000h\n");
        let e = parse_str("p.yaml", &yaml).unwrap_err();
        let text = render(&e);
        assert!(
            text.contains(&format!("timing.{key}")) && text.contains("longest allowed"),
            "{key}: {text}"
        );
    }
    // The bound itself is accepted (calm and window must still be ordered).
    let ok = "timing:\n  interval: 10s\n  window: 720h\n  calm_before_shrink: 720h\n  cooldown: 720h\n  evaluation: 720h\n";
    let p = parse_str("p.yaml", ok).unwrap();
    assert_eq!(p.timing.window, MAX_DURATION);
    assert_eq!(MAX_DURATION, Duration::from_secs(30 * 24 * 3600));
    assert!(parse_str("p.yaml", "timing:\n  cooldown: 721h\n").is_err());
}

/// An 8 GiB sparse file was read whole (8.4 GB RSS, 29 s). Now its length
/// refuses it before any byte is read (before the fix this test
/// allocated the whole file).
#[test]
fn oversized_file_is_refused_by_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("policy.yaml");
    let file = fs::File::create(&f).unwrap();
    file.set_len(8 << 30).unwrap();
    drop(file);
    let e = load(&f).unwrap_err();
    assert!(
        matches!(e.errors.as_slice(), [Error::TooLarge { size, .. }] if *size == 8 << 30),
        "{e}"
    );
    // Through a directory too, and one byte over the limit is enough.
    let file = fs::File::create(&f).unwrap();
    file.set_len(MAX_POLICY_FILE_BYTES + 1).unwrap();
    drop(file);
    let e = load(dir.path()).unwrap_err();
    assert!(
        matches!(e.errors.as_slice(), [Error::TooLarge { .. }]),
        "{e}"
    );
}

/// Each drop-in within the per-file bound, but 2,000 of them (sparse,
/// 1 MiB each) were all read on every load and reload: 2.07 GB. The total
/// is bounded from the lengths: the file that passes the bound is named,
/// and neither it nor any file after it is read.
#[test]
#[allow(clippy::disallowed_types)] // no tokio here: a wall-time bound
fn the_drop_ins_together_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("policy.d");
    fs::create_dir(&d).unwrap();
    for i in 0..2000 {
        let file = fs::File::create(d.join(format!("{i:04}.yaml"))).unwrap();
        file.set_len(MAX_POLICY_FILE_BYTES).unwrap();
    }
    let t = std::time::Instant::now();
    let e = load(dir.path()).unwrap_err();
    let over = MAX_POLICY_TOTAL_BYTES / MAX_POLICY_FILE_BYTES;
    let name = format!("{over:04}.yaml");
    assert!(
        e.errors.iter().any(|e| matches!(e,
            Error::TooMuchPolicy { path, total }
                if path.ends_with(&name) && *total == MAX_POLICY_TOTAL_BYTES + MAX_POLICY_FILE_BYTES)),
        "{e}"
    );
    // The files before it were read (and are not YAML); none after it was.
    assert!(
        !render(&e).contains(&format!("{:04}.yaml", over + 1)),
        "{}",
        render(&e)
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // Within the total, the same files are read (and refused as NUL bytes,
    // not for their size).
    for i in over..2000 {
        fs::remove_file(d.join(format!("{i:04}.yaml"))).unwrap();
    }
    let e = load(dir.path()).unwrap_err();
    assert!(
        !e.errors
            .iter()
            .any(|e| matches!(e, Error::TooMuchPolicy { .. } | Error::TooLarge { .. })),
        "{e}"
    );
}

fn assert_not_a_file(e: &Errors, name: &str, what: &str) {
    assert!(
        e.errors.iter().any(|e| matches!(e,
            Error::NotAFile { path, what: w } if path.ends_with(name) && *w == what)),
        "{name} {what}: {e}"
    );
}

/// A dangling symlink, a directory or a FIFO named like a policy file was
/// skipped and `check` said the embedded default applies (exit 0).
#[test]
fn policy_paths_that_are_not_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::os::unix::fs::symlink(d.join("gone.yaml"), d.join("policy.yaml")).unwrap();
    let e = load(d).unwrap_err();
    assert_not_a_file(&e, "policy.yaml", "a symlink to a missing file");

    fs::remove_file(d.join("policy.yaml")).unwrap();
    fs::create_dir(d.join("policy.yaml")).unwrap();
    let e = load(d).unwrap_err();
    assert_not_a_file(&e, "policy.yaml", "a directory");
    fs::remove_dir(d.join("policy.yaml")).unwrap();

    fs::create_dir(d.join("policy.d")).unwrap();
    let fifo = d.join("policy.d/10-fifo.yaml");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    // Never opened (opening a FIFO without a writer blocks forever).
    let e = load(d).unwrap_err();
    assert_not_a_file(&e, "10-fifo.yaml", "a FIFO");
    // Given directly with --config as well.
    let e = load(&fifo).unwrap_err();
    assert_not_a_file(&e, "10-fifo.yaml", "a FIFO");
    fs::remove_file(&fifo).unwrap();

    std::os::unix::fs::symlink(d.join("nowhere"), d.join("policy.d/20-link.yaml")).unwrap();
    let e = load(d).unwrap_err();
    assert_not_a_file(&e, "20-link.yaml", "a symlink to a missing file");
    fs::remove_file(d.join("policy.d/20-link.yaml")).unwrap();

    // A symlink to a regular file is a policy file; hidden files and other
    // extensions stay ignored.
    fs::write(d.join("real.yaml"), "mode: observe\n").unwrap();
    std::os::unix::fs::symlink(d.join("real.yaml"), d.join("policy.yaml")).unwrap();
    fs::create_dir(d.join("policy.d/.hidden.yaml")).unwrap();
    fs::create_dir(d.join("policy.d/notes.txt")).unwrap();
    let l = load(d).unwrap();
    assert!(!l.default_applied);
    assert_eq!(l.sources, vec![d.join("policy.yaml")]);
}

/// A `policy.d` that is not a directory cannot be listed: an error, not
/// "no drop-ins".
#[test]
fn policy_d_that_is_not_a_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("policy.d"), "x").unwrap();
    let e = load(dir.path()).unwrap_err();
    assert!(
        matches!(e.errors.as_slice(), [Error::ListDropIns { .. }]),
        "{e}"
    );
}

/// Non-UTF-8 bytes: a located error at the first bad byte.
#[test]
fn non_utf8_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("policy.yaml");
    fs::write(&f, b"mode: observe\nrings:\n  min: 6\xff4\n").unwrap();
    let e = load(&f).unwrap_err();
    let want = format!("{}:3:9", f.display());
    assert!(
        matches!(e.errors.as_slice(), [Error::NotUtf8 { location }] if *location == want),
        "{e}"
    );
}

/// Out-of-range integers were printed through f64 (18446744073709552000).
#[test]
fn out_of_range_integers_print_as_written() {
    let e = parse_str("p.yaml", "rings:\n  max: 18446744073709551615\n").unwrap_err();
    let text = render(&e);
    assert!(
        text.contains("18446744073709551615 is out of range"),
        "{text}"
    );
    let e = parse_str("p.yaml", "thresholds:\n  min_pages_per_window: -1\n").unwrap_err();
    let text = render(&e);
    assert!(
        text.contains("allowed: 0 to 18446744073709551615"),
        "{text}"
    );
    let e = parse_str("p.yaml", "rings:\n  max_steps_to_target: 123456789012\n").unwrap_err();
    let text = render(&e);
    assert!(text.contains("123456789012 is out of range"), "{text}");
    assert!(!text.contains("e+") && !text.contains("552000"), "{text}");
}

/// A `RUNTIME_DIRECTORY`/`STATE_DIRECTORY` that is not UTF-8 fell back to
/// the host's real `/run/pptune` and `/var/lib/pptune`: the daemon under
/// test then wrote the host's state. It is the path it names.
#[test]
fn a_systemd_directory_that_is_not_utf8_is_still_that_directory() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;
    let odd = OsStr::from_bytes(b"/tmp/pp\xfftune:/other");
    assert_eq!(
        pptune_config::systemd_directory(Some(odd))
            .unwrap()
            .as_os_str(),
        OsStr::from_bytes(b"/tmp/pp\xfftune")
    );
    assert_eq!(pptune_config::systemd_directory(Some(OsStr::new(""))), None);
    assert_eq!(pptune_config::systemd_directory(None), None);
    assert_eq!(
        pptune_config::systemd_directory(Some(OsStr::new(":/run/x"))).unwrap(),
        Path::new("/run/x")
    );
}

/// Where the runtime and state directories are: systemd's variable first,
/// the system location for root or where it exists (a system daemon's),
/// else the user's own (XDG), so an unprivileged `run` observes.
#[test]
fn the_directories_follow_systemd_root_and_the_user() {
    use pptune_config::Dir;
    use std::ffi::OsString;
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let user: &[(&str, &str)] = &[("XDG_RUNTIME_DIR", "/run/user/1000"), ("HOME", "/home/u")];
    // systemd's variable wins, whoever runs.
    let unit: &[(&str, &str)] = &[
        ("RUNTIME_DIRECTORY", "/run/x"),
        ("STATE_DIRECTORY", "/var/lib/x"),
    ];
    assert_eq!(
        Dir::Runtime.choose(false, false, env(unit)),
        Path::new("/run/x")
    );
    assert_eq!(
        Dir::State.choose(true, true, env(unit)),
        Path::new("/var/lib/x")
    );
    // Root: the system location, whatever the user variables say.
    assert_eq!(
        Dir::Runtime.choose(true, false, env(user)),
        Path::new("/run/pptune")
    );
    assert_eq!(
        Dir::State.choose(true, false, env(user)),
        Path::new("/var/lib/pptune")
    );
    // Another user beside a system daemon's directories reads those.
    assert_eq!(
        Dir::Runtime.choose(false, true, env(user)),
        Path::new("/run/pptune")
    );
    // Another user on a host without them: the user's own.
    assert_eq!(
        Dir::Runtime.choose(false, false, env(user)),
        Path::new("/run/user/1000/pptune")
    );
    assert_eq!(
        Dir::State.choose(false, false, env(user)),
        Path::new("/home/u/.local/state/pptune")
    );
    let xdg: &[(&str, &str)] = &[("XDG_STATE_HOME", "/srv/u/state"), ("HOME", "/home/u")];
    assert_eq!(
        Dir::State.choose(false, false, env(xdg)),
        Path::new("/srv/u/state/pptune")
    );
    // Relative XDG values are ignored (the spec); no user directory at all
    // leaves the system location, whose open then fails naming it.
    let relative: &[(&str, &str)] = &[("XDG_RUNTIME_DIR", "run"), ("XDG_STATE_HOME", "st")];
    assert_eq!(
        Dir::Runtime.choose(false, false, env(relative)),
        Path::new("/run/pptune")
    );
    assert_eq!(
        Dir::State.choose(false, false, env(relative)),
        Path::new("/var/lib/pptune")
    );
}
