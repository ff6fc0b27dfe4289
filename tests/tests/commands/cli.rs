//! The command line as an operator meets it: bare `pptune` prints help,
//! `check FILE`, `--config` refused where it would be ignored, `--version`
//! with the git revision, logs readable on a terminal and JSON through a
//! pipe, a closed stdout ending quietly, `restore -i` of an unknown name.
//! The ones that start the daemon or read the kernel run in a throwaway
//! network namespace (root).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use pptune_tests::bin::{
    DaemonDirs, in_netns, policy_in_tempdir, pptune_bin, require_root, write_policy,
};

fn pptune(args: &[&str]) -> Output {
    Command::new(pptune_bin()).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn example() -> String {
    pptune_tests::repo_root()
        .join("config/examples/observe-all.yaml")
        .display()
        .to_string()
}

#[test]
fn bare_pptune_prints_help_and_starts_nothing() {
    let out = pptune(&[]);
    // clap's usage-error status: no command is a usage error.
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("Usage: pptune"), "{err}");
    assert!(err.contains("run "), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn check_takes_the_file_as_an_argument_or_with_config() {
    let ex = example();
    for args in [vec!["check", ex.as_str()], vec!["check", "--config", &ex]] {
        let out = pptune(&args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(text(&out.stdout).contains("observe-all.yaml"), "{out:?}");
    }
    // The old global position still works for the commands that use it.
    let out = pptune(&["--config", &ex, "check"]);
    assert!(out.status.success(), "{out:?}");
    // Both at once is ambiguous.
    let out = pptune(&["check", "--config", &ex, &ex]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = pptune(&["--config", &ex, "check", &ex]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).contains("twice"), "{out:?}");
}

/// The top-level `--config` help names every command that reads the
/// policy: each takes `--config` after its name too.
#[test]
fn config_help_names_every_command_that_reads_the_policy() {
    let help = text(&pptune(&["--help"]).stdout);
    let line = help
        .lines()
        .skip_while(|l| !l.contains("--config"))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    for cmd in ["run", "plan", "check", "record", "replay", "status"] {
        let sub = text(&pptune(&[cmd, "--help"]).stdout);
        assert!(sub.contains("--config"), "{cmd} --help: {sub}");
        assert!(line.contains(cmd), "{cmd} not in {line:?}");
    }
}

#[test]
fn config_is_refused_by_commands_that_do_not_read_the_policy() {
    let ex = example();
    for cmd in ["verify", "restore", "history"] {
        let out = pptune(&["--config", &ex, cmd]);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {out:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("`pptune {cmd}` does not read the policy")),
            "{err}"
        );
        let out = pptune(&[cmd, "--config", &ex]);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {out:?}");
        assert!(text(&out.stderr).contains("'--config'"), "{out:?}");
    }
}

#[test]
fn version_names_the_git_revision() {
    let out = pptune(&["--version"]);
    assert!(out.status.success());
    let v = text(&out.stdout);
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(pptune_tests::repo_root())
        .output()
        .unwrap();
    assert!(head.status.success(), "not a git checkout: {head:?}");
    let head = text(&head.stdout);
    assert_eq!(
        v.trim(),
        format!("pptune {} (git {})", env!("CARGO_PKG_VERSION"), head.trim())
    );
}

/// `pptune run` for two seconds in a fresh netns, through a
/// pseudo-terminal or a pipe. Returns everything it wrote.
fn run_two_seconds(extra: &str, pty: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let inner = format!(
        "RUNTIME_DIRECTORY={0} STATE_DIRECTORY={0} unshare -n timeout --preserve-status -s INT 2 {1} --config {2} run --metrics-listen 127.0.0.1:0 {extra}",
        dir.path().display(),
        pptune_bin().display(),
        example()
    );
    let out = if pty {
        // util-linux script(1): the command's stdin/stdout/stderr are a
        // pseudo-terminal; what it writes comes out on script's stdout.
        Command::new("script")
            .args(["-q", "-e", "-c", &inner, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    } else {
        Command::new("sh").args(["-c", &inner]).output().unwrap()
    };
    // timeout(1) passes on pptune's status: 0 after SIGINT.
    assert!(out.status.success(), "{out:?}");
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

#[test]
fn logs_are_readable_on_a_terminal_and_json_through_a_pipe() {
    require_root("a throwaway network namespace");
    let tty = run_two_seconds("", true);
    assert!(tty.contains(" INFO ready status=\"0 devices"), "{tty}");
    assert!(tty.contains(" INFO serving metrics at /metrics"), "{tty}");
    assert!(!tty.contains("{\""), "JSON on a terminal:\n{tty}");

    let pipe = run_two_seconds("", false);
    let lines: Vec<&str> = pipe.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines.len() >= 3, "{pipe}");
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{l}");
    }
    assert!(lines.iter().any(|l| l.contains("\"message\":\"ready\"")));

    // Asked for, JSON even on a terminal.
    let tty_json = run_two_seconds("--log-format json", true);
    assert!(
        tty_json
            .lines()
            .filter(|l| !l.trim().is_empty())
            .all(|l| l.trim_start().starts_with('{')),
        "{tty_json}"
    );
}

#[test]
fn a_closed_stdout_ends_status_quietly() {
    require_root("a throwaway network namespace");
    // The reader is gone before pptune writes its first line.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = in_netns("ip link add ppt0 type veth peer name ppt1 && exec \"$0\" status")
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
        .wait_with_output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(13),
        "not ended by SIGPIPE: {out:?}"
    );
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));

    // The shape an operator types.
    let out = Command::new("unshare")
        .args([
            "-n",
            "bash",
            "-c",
            "for i in 0 1 2 3; do ip link add ppt$i type veth peer name peer$i; done; \"$0\" status | head -1; echo \"status=${PIPESTATUS[0]}\"",
        ])
        .arg(pptune_bin())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(stdout.starts_with("kernel "), "{stdout}");
    assert!(
        stdout.contains("status=0") || stdout.contains("status=141"),
        "{stdout}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

#[test]
fn restore_of_an_unknown_interface_says_so() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let out = in_netns("ip link add ppt0 type veth peer name ppt1 && \"$0\" restore -i nosuch0 ; echo \"status=$?\"; \"$0\" restore -i ppt0")
        .daemon_dirs(dir.path())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no interface named nosuch0: not in the kernel and not in pptune's record"),
        "{stderr}"
    );
    assert!(stdout.contains("status=1"), "{stdout}");
    // A real interface with nothing recorded: said, and success.
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("ppt0: nothing recorded to restore"),
        "{stdout}"
    );
}

/// An unparsable `PPTUNE_LOG` silently became `info`; now `run` refuses
/// it before starting anything, saying what a filter looks like.
#[test]
fn an_unparsable_pptune_log_is_refused_by_run() {
    let out = Command::new(pptune_bin())
        .args(["--config", &example(), "run"])
        .env("PPTUNE_LOG", "pptune=verbose")
        .daemon_dirs(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = text(&out.stderr);
    assert!(
        err.contains("PPTUNE_LOG=`pptune=verbose` is not a log filter"),
        "{err}"
    );
}

/// `replay` of a recording it read no pass from said "the policy holds
/// every device over the whole recording" and exited 0: a recording with
/// only its header, and one whose only frame is torn, now exit 1 saying
/// nothing was replayed.
#[test]
fn a_replay_that_read_no_pass_fails() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("00000001.pptrec");
    let mut head = b"PPTUNREC".to_vec();
    head.extend_from_slice(&2_u32.to_le_bytes());
    std::fs::write(&p, &head).unwrap();
    let out = pptune(&["replay", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(
        err.contains("no pass could be read (the recording has none)"),
        "{err}"
    );
    assert!(!text(&out.stdout).contains("holds every device"));
    head.extend_from_slice(&[9, 0, 0, 0, 1, 2, 3, 4, 5]);
    std::fs::write(&p, &head).unwrap();
    let out = pptune(&["replay", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(
        err.contains("warning:") && err.contains("the warnings above say why"),
        "{err}"
    );
}

/// `replay --plot` wrote through a symlink planted at its path and over an
/// existing file, where `record --output` refuses both. Now it refuses
/// them too, before replaying, and leaves them as they were; the variant:
/// a dangling symlink, which would have created its target.
#[test]
fn replay_plot_writes_over_nothing_and_through_no_symlink() {
    require_root("a throwaway network namespace to record in");
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.pptrec");
    let out = in_netns(
        "ip link add ppt0 type veth peer name ppt1 && \"$0\" record --duration 1s -o \"$1\"",
    )
    .arg(&rec)
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let policy = write_policy(
        dir.path(),
        "selectors:\n  - names: [\"ppt*\"]\n    require_pools: false\n",
    );
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me\n").unwrap();
    let link = dir.path().join("link.svg");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let dangling = dir.path().join("dangling.svg");
    let target = dir.path().join("created-through-the-link");
    std::os::unix::fs::symlink(&target, &dangling).unwrap();
    let plot_to = |plot: &Path| {
        pptune(&[
            "--config",
            policy.to_str().unwrap(),
            "replay",
            rec.to_str().unwrap(),
            "--plot",
            plot.to_str().unwrap(),
        ])
    };
    for plot in [&victim, &link, &dangling] {
        let out = plot_to(plot);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            err.contains("cannot write the plot to") && err.contains("exists: not overwritten"),
            "{plot:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(!target.exists(), "created through a dangling symlink");
    // A new path is written.
    let new = dir.path().join("new.svg");
    let out = plot_to(&new);
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read_to_string(&new).unwrap().starts_with("<svg"));
}

/// `replay`'s new options say what is wrong before replaying: a plot path
/// that cannot be written, `--since` after `--until`, `--series` with
/// `--json`; a file that is not a recording leaves no empty plot behind.
#[test]
fn replay_plot_and_filters_refuse_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let not_rec = dir.path().join("notes.txt");
    std::fs::write(&not_rec, "hello\n").unwrap();
    let f = not_rec.to_str().unwrap();
    let plot = dir.path().join("p.svg");
    let out = pptune(&["replay", f, "--plot", plot.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("not a pptune recording"),
        "{out:?}"
    );
    assert!(!plot.exists(), "an empty plot was left behind");

    let nowhere = dir.path().join("no/such/dir/p.svg");
    let out = pptune(&["replay", f, "--plot", nowhere.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot write the plot to") && err.contains("no/such/dir/p.svg"),
        "{err}"
    );

    let out = pptune(&["replay", f, "--since", "1h", "--until", "2h"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).contains("is after --until"), "{out:?}");
    let out = pptune(&["replay", f, "--until", "yesterday"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).contains("`yesterday` is neither a duration"),
        "{out:?}"
    );

    let out = pptune(&["replay", f, "--series", "csv", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).contains("cannot be used with"), "{out:?}");
}

/// Text from elsewhere reached the terminal as it was:
/// an escape sequence in a policy key (`check`) or in a device name and
/// message of the change journal (`history`) could clear the screen or
/// forge a line. Human output now shows such characters escaped
/// (`pptune::human`); JSON output is escaped by its encoder.
#[test]
fn control_characters_from_files_are_escaped_in_human_output() {
    // YAML's own escapes: the key holds ESC and BEL.
    let (dir, policy) = policy_in_tempdir("mode: observe\n\"x\\e[2J\\a\": 1\n");
    let out = pptune(&["check", policy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let err = text(&out.stderr);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains("x\\u{1b}[2J\\u{7}"), "{err}");

    use pptune::record::journal::{Change, Entry};
    let change = Entry::Change(Box::new(Change {
        run: 1,
        seq: 0,
        unix_ms: 1_700_000_000_000,
        device: "eth\u{1b}]0;owned\u{7}".into(),
        device_key: "name:eth0".into(),
        knob: policy::Knob::Ring(policy::RingField::Rx),
        from: 256,
        to: 512,
        id: Some("r1".into()),
        reason: Some("recycle_miss_high".into()),
        message: Some("line one\r\u{1b}[1Aforged line".into()),
        evidence: None,
        outcome: policy::Outcome::Effective,
    }));
    let run = Entry::Run {
        run: 1,
        unix_ms: 1_700_000_000_000,
    };
    let lines = [run, change]
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect::<String>();
    std::fs::write(dir.path().join("changes.jsonl"), lines).unwrap();
    let out = Command::new(pptune_bin())
        .arg("history")
        .daemon_dirs(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let s = text(&out.stdout);
    assert!(
        !s.contains('\u{1b}') && !s.contains('\u{7}') && !s.contains('\r'),
        "{s:?}"
    );
    assert!(s.contains("eth\\u{1b}]0;owned\\u{7}"), "{s}");
    assert!(s.contains("line one\\u{d}\\u{1b}[1Aforged line"), "{s}");
    // JSON keeps the text exactly (its encoder escapes it).
    let out = Command::new(pptune_bin())
        .args(["history", "--json"])
        .daemon_dirs(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.to_string().contains("eth\\u001b]0;owned\\u0007"), "{v}");
}

/// One `--json` rule for every command that has the flag: written to a pipe, the JSON is one line that parses (plan, verify,
/// replay and history printed it indented, status on one line); every
/// `--json` has the same help. Each command runs in a throwaway network
/// namespace with a veth pair and its directories in a temporary one.
#[test]
fn every_json_output_is_one_line_when_piped() {
    require_root("throwaway network namespaces");
    let (dir, policy) = policy_in_tempdir("timing:\n  interval: 200ms\n  window: 1s\n");
    let rec = dir.path().join("r.pptrec");
    let veth = "ip link set lo up && ip link add v0 type veth peer name v1 \
                && ip link set v0 up && ip link set v1 up && exec \"$0\" \"$@\"";
    let run = |args: &[&str]| {
        in_netns(veth)
            .args(args)
            .daemon_dirs(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let p = policy.to_str().unwrap();
    let out = run(&[
        "--config",
        p,
        "record",
        "--duration",
        "2s",
        "-o",
        rec.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "record: {out:?}");
    let commands: [&[&str]; 5] = [
        &["status", "--json"],
        &["--config", p, "plan", "--json"],
        &["verify", "--json"],
        &["history", "--json"],
        &["--config", p, "replay", rec.to_str().unwrap(), "--json"],
    ];
    for args in commands {
        let out = run(args);
        let stdout = text(&out.stdout);
        assert_eq!(
            stdout.lines().count(),
            1,
            "{args:?}: {stdout}\n{}",
            text(&out.stderr)
        );
        serde_json::from_str::<serde_json::Value>(&stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"));
    }
    let helps: Vec<String> = ["status", "plan", "verify", "history", "replay"]
        .iter()
        .map(|c| {
            let h = text(&pptune(&[c, "--help"]).stdout);
            let mut lines = h
                .lines()
                .skip_while(|l| !l.trim_start().starts_with("--json"));
            let first = lines.next().unwrap_or_default().to_owned();
            let rest: Vec<&str> = lines
                .take_while(|l| !l.trim().is_empty() && !l.trim_start().starts_with('-'))
                .collect();
            // The help text, whatever column clap aligned it to.
            format!("{first} {}", rest.join(" "))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert!(
        helps[0].contains("one line when stdout is a pipe"),
        "{}",
        helps[0]
    );
    assert!(helps.iter().all(|h| *h == helps[0]), "{helps:#?}");
}

/// An I/O error's cause is said once. Three error types put the cause in
/// their message and also returned it as `source()`, so the whole chain,
/// as the commands print it, repeated it ("…/changes.jsonl: Permission
/// denied (os error 13): Permission denied (os error 13)").
#[test]
fn an_io_error_says_its_cause_once() {
    use std::os::unix::fs::PermissionsExt as _;
    require_root("setpriv to another user");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let journal = dir.path().join("changes.jsonl");
    std::fs::write(&journal, "{}\n").unwrap();
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(pptune_bin())
        .arg("history")
        .env("STATE_DIRECTORY", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert_eq!(err.matches("Permission denied").count(), 1, "{err}");
    assert!(err.contains("changes.jsonl"), "{err}");
}

/// A web config that does not load stops `run` before it starts (exit 78,
/// as an invalid policy does) and fails `check` when the policy names it;
/// the message names the file and what is wrong.
#[test]
fn a_broken_web_config_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n",
    )
    .unwrap();
    let policy = write_policy(
        dir.path(),
        &format!("daemon:\n  metrics_web_config: {}\n", web.display()),
    );
    let p = policy.display().to_string();
    for args in [
        vec!["check", p.as_str()],
        vec![
            "run",
            "--config",
            p.as_str(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    ] {
        let out = pptune(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {err}");
        assert!(err.contains("missing.crt"), "{args:?}: {err}");
    }
    // A key pptune does not implement is named.
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [X]\n",
    )
    .unwrap();
    let out = pptune(&["check", &p]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("web.yml:4:3: unknown field `cipher_suites`"),
        "{err}"
    );
    // `:9864` is accepted where an address is; a bare name is not.
    let out = pptune(&["run", "--metrics-listen", "localhost", "--config", &p]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(":port"), "{}", text(&out.stderr));
}

/// `check DIR` reports every problem in one run: a schema error, a
/// missing shadow file and a web config that does not load, counted
/// together; it names what it reads and what it ignores.
#[test]
fn check_reports_every_problem_and_what_it_ignores() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::write(dir.join("web.yml"), "tls_server_config: {cert_file: 3\n").unwrap();
    std::fs::write(
        dir.join("policy.yaml"),
        format!(
            "rings:\n  mn: 3\nshadow: {}\ndaemon:\n  metrics_web_config: {}\n",
            dir.join("missing-shadow.yaml").display(),
            dir.join("web.yml").display()
        ),
    )
    .unwrap();
    let out = pptune(&["check", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("rings.mn"), "{err}");
    assert!(err.contains("missing-shadow.yaml: no such shadow"), "{err}");
    assert!(err.contains("daemon.metrics_web_config: "), "{err}");
    assert!(err.contains("3 problems found"), "{err}");

    // A valid directory: the drop-ins read, and the file ignored, named.
    std::fs::write(dir.join("policy.yaml"), "mode: observe\n").unwrap();
    std::fs::create_dir(dir.join("policy.d")).unwrap();
    std::fs::write(dir.join("policy.d/10-site.yml"), "mode: observe\n").unwrap();
    std::fs::write(dir.join("policy.d/20-old.yaml.bak"), "mode: enforce\n").unwrap();
    let out = pptune(&["check", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains("10-site.yml"), "{out:?}");
    assert!(
        text(&out.stderr).contains("20-old.yaml.bak: warning: ignored"),
        "{out:?}"
    );

    // No main file but other YAML: not a silent "embedded default".
    let e = tempfile::tempdir().unwrap();
    std::fs::write(e.path().join("pptune.yaml"), "mode: enforce\n").unwrap();
    let out = pptune(&["check", e.path().to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text(&out.stderr).contains("pptune.yaml: warning: ignored"),
        "{out:?}"
    );
}

/// `restore` as an ordinary user says it needs root or CAP_NET_ADMIN (it
/// failed naming only the runtime directory it could not open).
#[test]
fn restore_as_an_ordinary_user_names_the_privilege_it_needs() {
    use std::os::unix::fs::PermissionsExt as _;
    require_root("setpriv to another user");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(pptune_bin())
        .arg("restore")
        .env("RUNTIME_DIRECTORY", dir.path().join("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("needs root or CAP_NET_ADMIN"), "{err}");
    assert!(
        err.contains("Permission denied"),
        "the cause is kept: {err}"
    );
}
