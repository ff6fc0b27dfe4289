//! Loading, merging and validating policy files.

// Test helpers outside #[test] fns: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use policy::{Mode, OnStop};
use pptune_config::{
    EX_CONFIG, Error, Errors, check_exit_code, default_policy, load_with_config_dir, parse_str,
    render,
};

/// The repository root. Not `pptune_tests::repo_root`: the harness
/// depends on this crate and links all of `pptune`, which these tests of
/// the loader have no use for.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// (location, key) of every error.
fn located(e: &Errors) -> Vec<(String, String)> {
    e.errors
        .iter()
        .map(|e| match e {
            Error::InvalidValue { location, key, .. } => (location.clone(), key.clone()),
            other => (other.to_string(), String::new()),
        })
        .collect()
}

#[test]
fn embedded_default_is_valid_and_observes() {
    let p = default_policy().unwrap();
    assert_eq!(p.mode, Mode::Observe);
    assert_eq!(p.selectors.len(), 1);
    assert!(p.selectors[0].require_pools && p.selectors[0].names.is_empty());
    assert_eq!(p.timing.interval, Duration::from_secs(10));
    assert_eq!(p.timing.window, Duration::from_secs(30));
    assert_eq!(p.timing.cooldown, Duration::from_secs(600));
    assert!(p.thresholds.shrink_recycle_miss < p.thresholds.grow_recycle_miss);
    assert!(!p.channels.enabled);
    assert_eq!(p.budget.per_device_bytes, Some(4 << 30));
    assert_eq!(p.on_stop, OnStop::Keep);
    assert_eq!(
        p.daemon.metrics_listen.map(|a| a.to_string()).as_deref(),
        Some("127.0.0.1:9864")
    );
    // What `pptune plan` will announce for the default policy.
    assert_eq!(policy::findings_needed(&p), (10, Duration::from_secs(90)));
}

const BAD: &str = "\
mode: enforced
rings:
  mn: 64
  max: 70000
  min: 1000
timing:
  interval: 10
  window: 5q
thresholds:
  shrink_recycle_miss: 0.5
budget:
  per_device_bytes: 1KiB
limits:
  windows:
    - {start: '25:00', end: '01:00', days: [mon, funday]}
selectors:
  - names: eth0
rollout: {fraction: 1.5, salt: x}
";

#[test]
fn every_problem_in_one_run_with_locations() {
    let e = parse_str("bad.yaml", BAD).unwrap_err();
    let got = located(&e);
    let want = [
        ("bad.yaml:1:7", "mode"),
        ("bad.yaml:3:3", "rings.mn"),
        ("bad.yaml:4:8", "rings.max"),
        ("bad.yaml:7:13", "timing.interval"),
        ("bad.yaml:15:50", "limits.windows[0].days[1]"),
        ("bad.yaml:17:12", "selectors[0].names"),
        ("bad.yaml:18:21", "rollout.fraction"),
        ("bad.yaml:8:11", "timing.window"),
        ("bad.yaml:10:24", "thresholds.shrink_recycle_miss"),
        ("bad.yaml:12:21", "budget.per_device_bytes"),
        ("bad.yaml:15:15", "limits.windows[0].start"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(l, k)| ((*l).to_owned(), (*k).to_owned()))
        .collect();
    assert_eq!(got, want, "{}", render(&e));
    let text = render(&e);
    assert!(text.contains("hint: did you mean `min`?"), "{text}");
    assert!(text.contains("hint: did you mean `enforce`?"), "{text}");
    assert!(
        text.ends_with("11 problems found; the policy was not applied\n"),
        "{text}"
    );
    assert_eq!(check_exit_code(&Err::<(), _>(e)), EX_CONFIG);
}

#[test]
fn contradictions_table() {
    // (document, key the error must point at)
    let cases = [
        ("rings: {min: 4096, max: 1024}\n", "rings.min"),
        ("channels: {min: 8, max: 4}\n", "channels.min"),
        (
            "thresholds: {grow_recycle_miss: 0.01, shrink_recycle_miss: 0.01}\n",
            "thresholds.shrink_recycle_miss",
        ),
        ("timing: {interval: 1m, window: 30s}\n", "timing.window"),
        (
            "daemon: {queue_metrics: {series: worst, worst: 0}}\n",
            "daemon.queue_metrics.worst",
        ),
        (
            "timing: {calm_before_shrink: 10s}\n",
            "timing.calm_before_shrink",
        ),
        (
            "budget: {per_device_bytes: 8GiB, per_host_bytes: 1GiB}\n",
            "budget.per_host_bytes",
        ),
        (
            "budget: {per_device_bytes: null, per_host_bytes: 4096}\n",
            "budget.per_host_bytes",
        ),
        (
            "budget: {per_device_bytes: 12 parsecs}\n",
            "budget.per_device_bytes",
        ),
        (
            "limits: {windows: [{start: '10:00', end: '10:00'}]}\n",
            "limits.windows[0].end",
        ),
        (
            "limits: {windows: [{start: '10:00'}]}\n",
            "limits.windows[0]",
        ),
        (
            "mode: enforce\nlimits: {max_changes_per_hour: 0}\n",
            "limits.max_changes_per_hour",
        ),
        ("rollout: {fraction: 0.5, salt: ''}\n", "rollout.salt"),
        ("rollout: {fraction: -0.1, salt: a}\n", "rollout.fraction"),
        (
            "rollout: {fraction: 0.5, salt: a, holdout: 1.5}\n",
            "rollout.holdout",
        ),
        (
            "rollout: {fraction: 0.6, salt: a, holdout: 0.5}\n",
            "rollout.holdout",
        ),
        (
            "priors: [{driver: '', ring_rx: 1024}]\n",
            "priors[0].driver",
        ),
        (
            "priors: [{driver: ice, ring_rx: 99999}]\n",
            "priors[0].ring_rx",
        ),
        (
            "priors: [{driver: ice, ring_rx: 1024}, {driver: ice, ring_rx: 2048}]\n",
            "priors[1]",
        ),
        (
            "priors: [{driver: ice, speed: 25000, ring_rx: 1024}, {driver: ice, speed: 25000, ring_rx: 2048}]\n",
            "priors[1]",
        ),
        (
            "priors: [{driver: ice, model: 'Intel E810', ring_rx: 1024}]\n",
            "priors[0].model",
        ),
        (
            "priors: [{driver: ice, speed: 0, ring_rx: 1024}]\n",
            "priors[0].speed",
        ),
        (
            "daemon: {metrics_listen: 'localhost'}\n",
            "daemon.metrics_listen",
        ),
        ("selectors: [{names: ['']}]\n", "selectors[0]"),
        ("selectors: [{name: [eth0]}]\n", "selectors[0].name"),
        (
            "disruption: {drivers: {ice: sometimes}}\n",
            "disruption.drivers.ice",
        ),
        (
            "timing: {windows_for_finding: 0}\n",
            "timing.windows_for_finding",
        ),
        ("rings: {enabled: yes}\n", "rings.enabled"),
    ];
    for (doc, key) in cases {
        let e = parse_str("c.yaml", doc).unwrap_err();
        let keys: Vec<String> = located(&e).into_iter().map(|(_, k)| k).collect();
        assert_eq!(keys, [key], "{doc}\n{}", render(&e));
    }
}

#[test]
fn syntax_errors_are_located() {
    let e = parse_str("s.yaml", "rings:\n  min: [1, 2\n").unwrap_err();
    assert_eq!(e.errors.len(), 1);
    assert!(
        matches!(&e.errors[0], Error::ParseYaml { location, .. } if location.starts_with("s.yaml:"))
    );
    // Duplicate keys are an error, not a silent last-wins.
    let e = parse_str("d.yaml", "mode: observe\nmode: enforce\n").unwrap_err();
    assert!(
        matches!(&e.errors[0], Error::ParseYaml { .. }),
        "{}",
        render(&e)
    );
}

/// Every kind of broken file is said in the file's terms, once: one line
/// per problem, no parser option names, no Rust type names, no snippet
/// of the file echoed back.
#[test]
fn broken_files_are_said_in_the_files_terms() {
    let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    let cases: &[(&str, &str, &str)] = &[
        (
            "mode: observe\nmode: enforce\n",
            "d.yaml:2:1: not valid YAML: `mode` appears twice in the same mapping; keep one",
            "duplicate key",
        ),
        ("- mode: observe\n", "(document)", "a list for a document"),
        ("observe\n", "(document)", "a scalar for a document"),
        (&deep, "nested deeper than the 32 levels", "deep nesting"),
        (
            "rings:\n  min: [1, 2\n",
            "d.yaml:",
            "unclosed flow sequence",
        ),
        ("a: &x 1\nb: *y\n", "not valid YAML", "unknown alias"),
        (
            "mode: observe\n---\nmode: enforce\n",
            "one",
            "two documents",
        ),
    ];
    for (doc, expect, what) in cases {
        let e = parse_str("d.yaml", doc).unwrap_err();
        let text = render(&e);
        assert!(text.contains(expect), "{what}: {text}");
        assert_eq!(e.errors.len(), 1, "{what}: one problem, said once: {text}");
        for internal in [
            "Options", "Policy", "struct", "serde", "Budget", "breach", " --> ", " | ",
        ] {
            assert!(!text.contains(internal), "{what}: `{internal}` in: {text}");
        }
        let first = e.errors[0].to_string();
        assert_eq!(first.lines().count(), 1, "{what}: {first}");
        assert!(
            std::error::Error::source(&e.errors[0]).is_none(),
            "{what}: no second message under the first: {text}"
        );
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(&p, text).unwrap();
    p
}

#[test]
fn drop_ins_merge_in_lexical_order() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "policy.yaml",
        "mode: enforce\nrings:\n  max: 8192\n  min: 128\nselectors:\n  - names: [eth0]\n",
    );
    write(d.path(), "policy.d/20-late.yaml", "rings:\n  max: 4096\n");
    write(
        d.path(),
        "policy.d/10-early.yaml",
        "rings:\n  max: 2048\n  headroom: 1.5\ndisruption:\n  drivers:\n    ice: brief\n",
    );
    write(d.path(), "policy.d/.swap.yaml", "mode: nonsense\n");
    write(d.path(), "policy.d/notes.txt", "mode: nonsense\n");
    write(
        d.path(),
        "policy.d/20-late.yaml.dpkg-old",
        "mode: nonsense\n",
    );
    write(
        d.path(),
        "policy.d/25-site.yml",
        "rings:\n  rounding: none\n",
    );
    write(
        d.path(),
        "policy.d/30-selectors.yaml",
        "selectors:\n  - names: [eth1]\n    mode: observe\n",
    );
    let l = load_with_config_dir(Some(d.path()), None).unwrap();
    assert!(!l.default_applied);
    let names: Vec<String> = l
        .sources
        .iter()
        .map(|p| p.strip_prefix(d.path()).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "policy.yaml",
            "policy.d/10-early.yaml",
            "policy.d/20-late.yaml",
            "policy.d/25-site.yml",
            "policy.d/30-selectors.yaml"
        ]
    );
    // What policy.d holds and is not read is said, each file by name.
    let ignored: Vec<String> = l.warnings.iter().map(|w| w.location.clone()).collect();
    assert_eq!(
        ignored,
        [
            d.path().join("policy.d/20-late.yaml.dpkg-old"),
            d.path().join("policy.d/notes.txt")
        ]
        .map(|p| p.display().to_string())
    );
    assert!(l.warnings.iter().all(|w| w.message.contains("ignored")));
    let p = l.policy;
    assert_eq!(
        p.rings.rounding,
        policy::policy::Rounding::None,
        ".yml drop-in read"
    );
    assert_eq!(p.mode, Mode::Enforce);
    assert_eq!(p.rings.max, 4096, "later drop-in wins");
    assert_eq!(p.rings.min, 128, "untouched keys survive the merge");
    assert!((p.rings.headroom - 1.5).abs() < 1e-9);
    // Lists replace whole.
    assert_eq!(p.selectors.len(), 1);
    assert_eq!(p.selectors[0].names, ["eth1"]);
    assert_eq!(p.selectors[0].mode, Some(Mode::Observe));
    // disruption.drivers merges key by key with the default table.
    let class = |d: &str| {
        p.disruption
            .drivers
            .iter()
            .find(|(n, _)| n == d)
            .map(|(_, c)| *c)
    };
    assert_eq!(class("ice"), Some(policy::policy::DisruptionClass::Brief));
    assert_eq!(
        class("iavf"),
        Some(policy::policy::DisruptionClass::LinkDown)
    );
}

#[test]
fn errors_point_at_the_file_that_set_the_value() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "policy.yaml", "rings:\n  min: 128\n");
    let late = write(
        d.path(),
        "policy.d/50-bad.yaml",
        "rings:\n  max: 100\n  extra: 1\n",
    );
    let broken = write(d.path(), "policy.d/60-broken.yaml", "rings: [\n");
    let e = load_with_config_dir(Some(d.path()), None).unwrap_err();
    let got = located(&e);
    let late = late.display().to_string();
    assert!(
        got.contains(&(format!("{late}:3:3"), "rings.extra".into())),
        "{got:?}"
    );
    // min 128 (policy.yaml) > max 100 (the drop-in): reported at the min.
    let main = d.path().join("policy.yaml").display().to_string();
    assert!(
        got.contains(&(format!("{main}:2:8"), "rings.min".into())),
        "{got:?}"
    );
    assert!(
        e.errors.iter().any(|x| matches!(x, Error::ParseYaml { location, .. } if location.starts_with(&broken.display().to_string()))),
        "{}",
        render(&e)
    );
    assert_eq!(e.errors.len(), 3, "{}", render(&e));
}

#[test]
fn config_path_file_directory_and_environment() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "other.yaml", "mode: enforce\n");
    write(d.path(), "policy.d/10.yaml", "mode: nonsense\n");
    // A file: that file only, no drop-ins.
    let l = load_with_config_dir(Some(&f), None).unwrap();
    assert_eq!(l.policy.mode, Mode::Enforce);
    assert_eq!(l.sources, std::slice::from_ref(&f));
    // $CONFIGURATION_DIRECTORY replaces /etc/pptune (first of a list).
    let env = tempfile::tempdir().unwrap();
    write(env.path(), "policy.yaml", "on_stop: restore\n");
    let list = format!("{}:/nonexistent", env.path().display());
    let l = load_with_config_dir(None, Some(OsStr::new(&list))).unwrap();
    assert_eq!(l.policy.on_stop, OnStop::Restore);
    assert!(!l.default_applied);
    // An empty configuration directory: the embedded default applies.
    let empty = tempfile::tempdir().unwrap();
    let l = load_with_config_dir(None, Some(empty.path().as_os_str())).unwrap();
    assert!(l.default_applied && l.sources.is_empty());
    assert_eq!(l.policy, default_policy().unwrap());
    // An explicit path that does not exist is an error, exit 78.
    let r = load_with_config_dir(Some(&d.path().join("missing.yaml")), None);
    assert!(matches!(&r, Err(e) if matches!(e.errors[..], [Error::FindConfig { .. }])));
    assert_eq!(check_exit_code(&r), EX_CONFIG);
    assert_eq!(check_exit_code(&load_with_config_dir(Some(&f), None)), 0);
}

#[test]
fn shipped_examples_load_clean() {
    let dir = repo().join("config/examples");
    let mut n = 0;
    for name in ["observe-all.yaml", "enforce-rings.yaml", "channels.yaml"] {
        let path = dir.join(name);
        let r = load_with_config_dir(Some(&path), None);
        assert!(
            r.is_ok(),
            "{name}: {}",
            r.err().map(|e| render(&e)).unwrap_or_default()
        );
        n += 1;
    }
    assert_eq!(
        n,
        fs::read_dir(&dir).unwrap().count(),
        "every example is tested"
    );
    let ch = load_with_config_dir(Some(&dir.join("channels.yaml")), None)
        .unwrap()
        .policy;
    assert!(ch.channels.enabled && ch.rollout.is_some());
    let er = load_with_config_dir(Some(&dir.join("enforce-rings.yaml")), None)
        .unwrap()
        .policy;
    assert_eq!(er.limits.windows.len(), 1);
    assert_eq!(er.limits.windows[0].start_minute, 22 * 60);
}

/// The annotated example in docs/policy.md.
fn docs_example() -> String {
    let md = fs::read_to_string(repo().join("docs/policy.md")).unwrap();
    let after = md.split("<!-- fixture: policy-example -->").nth(1).unwrap();
    let body = after.split("```yaml\n").nth(1).unwrap();
    body.split("\n```").next().unwrap().to_owned()
}

#[test]
fn docs_example_is_accepted() {
    let p = parse_str("docs/policy.md", &docs_example());
    let p = p.map_err(|e| render(&e)).unwrap();
    assert_eq!(p.selectors.len(), 2);
    assert_eq!(p.selectors[0].mode, Some(Mode::Enforce));
    assert_eq!(p.on_stop, OnStop::Restore);
    assert_eq!(p.limits.windows[0].end_minute, 5 * 60);
}

#[test]
fn docs_document_every_key() {
    let md = fs::read_to_string(repo().join("docs/policy.md")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&pptune_config::schema_json()).unwrap();
    let mut keys = vec![];
    collect_keys(&schema, &schema, "", &mut keys);
    assert!(keys.len() > 40, "{keys:?}");
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !md.contains(&format!("`{k}`")))
        .collect();
    assert!(missing.is_empty(), "undocumented keys: {missing:?}");
}

fn collect_keys(
    root: &serde_json::Value,
    s: &serde_json::Value,
    prefix: &str,
    out: &mut Vec<String>,
) {
    let s = resolve(root, s);
    if let Some(alts) = s.get("anyOf").and_then(|a| a.as_array()) {
        for a in alts {
            collect_keys(root, a, prefix, out);
        }
    }
    if let Some(items) = s.get("items") {
        collect_keys(root, items, &format!("{prefix}[]"), out);
    }
    if let Some(props) = s.get("properties").and_then(|p| p.as_object()) {
        for (k, v) in props {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.push(key.clone());
            collect_keys(root, v, &key, out);
        }
    }
}

fn resolve<'a>(root: &'a serde_json::Value, s: &'a serde_json::Value) -> &'a serde_json::Value {
    match s
        .get("$ref")
        .and_then(|r| r.as_str())
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        Some(name) => &root["$defs"][name],
        None => s,
    }
}

#[test]
fn shipped_schema_matches_the_types() {
    let path = repo().join("packaging/policy.schema.json");
    let shipped = fs::read_to_string(&path).unwrap_or_default();
    let generated = pptune_config::schema_json();
    if std::env::var_os("PPTUNE_BLESS").is_some() {
        fs::write(&path, &generated).unwrap();
        return;
    }
    assert!(
        shipped == generated,
        "packaging/policy.schema.json is stale: run `PPTUNE_BLESS=1 cargo test -p pptune-config --test policy_files shipped_schema`"
    );
}

/// `shadow` names a second policy file: `load` reads and validates it (its
/// problems located in it, as the main file's are), and refuses a missing
/// file, a relative path and a shadow that names a shadow of its own; the
/// parsers that read no file keep only the path.
#[test]
fn a_shadow_policy_is_read_with_the_policy_and_fails_it_when_broken() {
    let d = tempfile::tempdir().unwrap();
    let shadow = write(
        d.path(),
        "shadow.yaml",
        "mode: enforce\nrings: {min: 512}\n",
    );
    let main = write(
        d.path(),
        "policy.yaml",
        &format!("shadow: {}\n", shadow.display()),
    );
    let l = load_with_config_dir(Some(&main), None).unwrap();
    let s = l.policy.shadow.expect("a shadow");
    assert_eq!(s.path, shadow);
    let sp = s.policy.expect("the shadow's policy, read");
    assert_eq!(sp.mode, policy::Mode::Enforce);
    assert_eq!(sp.rings.min, 512);
    assert_eq!(l.policy.mode, policy::Mode::Observe);
    // Without the filesystem: the path only.
    let p = parse_str("c.yaml", &format!("shadow: {}\n", shadow.display())).unwrap();
    assert!(p.shadow.is_some_and(|s| s.policy.is_none()));

    let broken = write(d.path(), "broken.yaml", "rings: {mn: 4}\n");
    let nested = write(
        d.path(),
        "nested.yaml",
        &format!("shadow: {}\n", shadow.display()),
    );
    let missing = d.path().join("missing.yaml");
    for (target, want) in [
        (&broken, format!("{}:1:9: rings.mn", broken.display())),
        (
            &nested,
            format!("{}: shadow: a shadow policy cannot name", nested.display()),
        ),
        (
            &missing,
            format!("{}: no such shadow policy file", missing.display()),
        ),
    ] {
        write(
            d.path(),
            "policy.yaml",
            &format!("shadow: {}\n", target.display()),
        );
        let e = load_with_config_dir(Some(&main), None).unwrap_err();
        let text = render(&e);
        assert!(text.contains(&want), "want {want:?} in\n{text}");
        assert_eq!(check_exit_code(&Err::<(), _>(e)), EX_CONFIG);
    }
    let e = parse_str("c.yaml", "shadow: shadow.yaml\n").unwrap_err();
    assert_eq!(
        located(&e).into_iter().map(|(_, k)| k).collect::<Vec<_>>(),
        ["shadow"]
    );
}

/// A directory with no main policy file but other YAML files: the default
/// applies, and each of those files is named as ignored (not a silent
/// "embedded default"); the files the policy names are not.
#[test]
fn yaml_beside_a_missing_main_file_is_reported_as_ignored() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "pptune.yaml", "mode: enforce\n");
    write(d.path(), "README", "not yaml\n");
    let l = load_with_config_dir(Some(d.path()), None).unwrap();
    assert!(l.default_applied);
    let w: Vec<String> = l.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("pptune.yaml: warning: ignored"), "{w:?}");
    assert!(
        w[0].contains("policy.yaml"),
        "the hint names the file read: {w:?}"
    );
    // A shadow named by a drop-in is the policy's, not an ignored file.
    let shadow = write(d.path(), "shadow.yaml", "mode: observe\n");
    write(
        d.path(),
        "policy.d/10-shadow.yaml",
        &format!("shadow: {}\n", shadow.display()),
    );
    let l = load_with_config_dir(Some(d.path()), None).unwrap();
    let w: Vec<String> = l.warnings.iter().map(|w| w.location.clone()).collect();
    assert_eq!(w, [d.path().join("pptune.yaml").display().to_string()]);
}

/// `policy.yml` is the main file as `policy.yaml` is; both is an error.
#[test]
fn policy_yml_is_the_main_file_and_two_main_files_are_refused() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "policy.yml", "mode: enforce\n");
    let l = load_with_config_dir(Some(d.path()), None).unwrap();
    assert_eq!(l.policy.mode, Mode::Enforce);
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    write(d.path(), "policy.yaml", "mode: observe\n");
    let e = load_with_config_dir(Some(d.path()), None).unwrap_err();
    assert!(
        matches!(e.errors.as_slice(), [Error::TwoMainFiles { .. }]),
        "{e:?}"
    );
}

/// Every problem in one run: a schema error and a missing shadow file are
/// reported together, and the partial policy names the web config for the
/// command that checks it.
#[test]
fn a_schema_error_and_a_missing_shadow_are_reported_together() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no-shadow.yaml");
    write(
        d.path(),
        "policy.yaml",
        &format!(
            "rings:\n  mn: 3\nshadow: {}\ndaemon:\n  metrics_web_config: /nonexistent/web.yml\n",
            missing.display()
        ),
    );
    let e = load_with_config_dir(Some(d.path()), None).unwrap_err();
    assert!(
        e.errors
            .iter()
            .any(|e| matches!(e, Error::InvalidValue { key, .. } if key == "rings.mn")),
        "{e:?}"
    );
    assert!(
        e.errors
            .iter()
            .any(|e| matches!(e, Error::FindShadow { path } if *path == missing)),
        "{e:?}"
    );
    let partial = e.partial.as_ref().expect("the policy as far as it goes");
    assert_eq!(
        partial.daemon.metrics_web_config.as_deref(),
        Some(Path::new("/nonexistent/web.yml"))
    );
}

/// The warnings of a policy directory whose `policy.yaml` is `doc`, as
/// `pptune check` prints them.
fn warnings_of(doc: &str) -> Vec<String> {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "policy.yaml", doc);
    let l = load_with_config_dir(Some(d.path()), None).unwrap();
    l.warnings.iter().map(ToString::to_string).collect()
}

/// A selector's driver that matches no driver pptune knows is warned
/// about, with the known names; a glob that matches one is not.
#[test]
fn a_selector_driver_no_known_driver_has_is_warned_about() {
    let w = warnings_of("selectors:\n  - drivers: [mlx5]\n  - drivers: [mlx5_*, ice]\n");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("policy.yaml:2:15"), "{w:?}");
    assert!(
        w[0].contains("selectors[0].drivers[0]: `mlx5` matches no driver"),
        "{w:?}"
    );
    assert!(
        w[0].contains("mlx5_core"),
        "the hint lists the known names: {w:?}"
    );
}

/// A calm shorter than the wait after a change (cooldown, evaluation) is
/// a warning at its key: the give-back steps would come that wait apart,
/// not a calm. The embedded default (6 h against 10 min) has none.
#[test]
fn a_calm_shorter_than_the_cooldown_is_a_warning() {
    let w = warnings_of(
        "timing: {interval: 1s, window: 3s, cooldown: 20s, evaluation: 10s, calm_before_shrink: 15s}\n",
    );
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains(
            "timing.calm_before_shrink: 15s is shorter than the wait after a change (cooldown 20s"
        ),
        "{w:?}"
    );
    let w = warnings_of(
        "timing: {interval: 1s, window: 3s, cooldown: 20s, evaluation: 10s, calm_before_shrink: 20s}\n",
    );
    assert!(w.is_empty(), "{w:?}");
}
