//! `pptune verify` on the real kernel in a throwaway network namespace:
//! 0 after pptune's change, 2 after an operator's `ethtool` on the same
//! knob (naming it), 0 after `pptune restore`. And `plan
//! --detailed-exitcode` 0 when the plan holds everything.
//!
//! netdevsim is not available on the host kernel and veth has no page
//! pools, so pptune's change is the record a daemon leaves (original 1,
//! action 1 → 2) plus the `ethtool -L` it would have made; the values
//! compared are the kernel's.

#![allow(clippy::unwrap_used, clippy::panic)]

use pptune_tests::bin::{ADD_VETH, DaemonDirs, in_netns, policy_in_tempdir, require_root};

#[test]
fn verify_after_a_change_an_operator_override_and_a_restore() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    pptune_tests::bin::write_channels_record(dir.path(), "ppt0", 1, 2);
    let script = format!(
        r#"
        {ADD_VETH} || exit 99
        ethtool -L ppt0 rx 2 || exit 99
        echo "== change"; "$0" verify; echo "status=$?"
        ethtool -L ppt0 rx 3 || exit 99
        echo "== operator"; "$0" verify; echo "status=$?"
        "$0" verify --json -i ppt0; echo "status=$?"
        "$0" verify -i nosuch0; echo "status=$?"
        echo "== restore"; "$0" restore || exit 98
        "$0" verify; echo "status=$?"
        ethtool -l ppt0
    "#
    );
    let out = in_netns(&script).daemon_dirs(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    let part = |from: &str, to: &str| {
        let a = stdout.find(from).unwrap();
        let b = stdout.find(to).unwrap();
        stdout[a..b].to_owned()
    };
    let change = part("== change", "== operator");
    assert!(change.contains("all 1 knob(s) pptune set hold"), "{change}");
    assert!(change.contains("status=0"), "{change}");
    let operator = part("== operator", "== restore");
    assert!(
        operator.contains("ppt0: channels.rx differs: pptune set 2, live 3"),
        "{operator}"
    );
    let statuses: Vec<&str> = operator
        .lines()
        .filter(|l| l.starts_with("status="))
        .collect();
    // Text, JSON, unknown name.
    assert_eq!(statuses, ["status=2", "status=2", "status=1"], "{operator}");
    let json_start = operator.find('{').unwrap();
    let json_end = operator.rfind('}').unwrap();
    let v: serde_json::Value = serde_json::from_str(&operator[json_start..=json_end]).unwrap();
    assert_eq!(v["holds"], false);
    assert_eq!(v["knobs"][0]["knob"], "channels.rx");
    assert_eq!(v["knobs"][0]["expected"], 2);
    assert_eq!(v["knobs"][0]["live"], 3);
    assert!(stderr.contains("no interface named nosuch0"), "{stderr}");
    let restore = &stdout[stdout.find("== restore").unwrap()..];
    assert!(
        restore.contains("ppt0: channels.rx restored to 1"),
        "{restore}"
    );
    assert!(restore.contains("nothing to differ"), "{restore}");
    assert!(restore.contains("status=0"), "{restore}");
}

#[test]
fn plan_detailed_exitcode_is_0_when_everything_holds() {
    require_root("a throwaway network namespace");
    let (dir, policy) =
        policy_in_tempdir("selectors:\n  - names: [\"ppt*\"]\n    require_pools: false\n");
    let out = in_netns("ip link add ppt0 type veth peer name ppt1 && \"$0\" plan --config \"$1\" --detailed-exitcode")
        .arg(&policy)
        .daemon_dirs(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("ppt0 — hold [no_pools]"), "{stdout}");
}

/// `verify` over a record it could not read said every knob held and
/// exited 0; `plan`, `export` and `restore -i` read the same record and
/// took "unreadable" for "none". Each now fails, naming the record. A
/// missing record is still "nothing set" (0).
#[test]
fn an_unreadable_record_is_an_error_not_nothing_set() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        "$0" verify; echo "missing=$?"
        "$0" export --format tuned; echo "export_missing=$?"
        echo '{"schema_version": 1, "boot_' > "$RUNTIME_DIRECTORY/state.json"
        "$0" verify; echo "truncated=$?"
        "$0" export --format tuned; echo "export=$?"
        rm "$RUNTIME_DIRECTORY/state.json"; mkfifo "$RUNTIME_DIRECTORY/state.json"
        timeout 10 "$0" verify; echo "fifo=$?"
    "#;
    let out = in_netns(script).daemon_dirs(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Nothing set: `export` says so and exits 0, as `verify` does.
    for want in [
        "missing=0",
        "export_missing=0",
        "truncated=1",
        "export=1",
        "fifo=1",
    ] {
        assert!(stdout.contains(want), "{want}: {stdout}\n{stderr}");
    }
    assert!(stderr.contains("nothing to export"), "{stderr}");
    assert!(stderr.contains("parsing pptune's state record"), "{stderr}");
    assert!(stderr.contains("not a regular file: a FIFO"), "{stderr}");
}
