//! The Grafana dashboard and the Prometheus alert rules: they parse, promtool
//! accepts them (and the alert unit tests pass), and every pptune metric they
//! query is one the daemon really exports (its own registry,
//! `pptune::publish::metrics::Metrics`) and one `docs/metrics.md` documents.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use policy::accounting::PassDeltas;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use pptune_tests::exposition::{samples, with_target};
use serde_json::Value;

fn read(rel: &str) -> String {
    std::fs::read_to_string(pptune_tests::repo_root().join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn dashboard() -> Value {
    serde_json::from_str(&read("packaging/grafana/pptune-dashboard.json"))
        .expect("dashboard is valid JSON")
}

/// Every PromQL expression in the dashboard: panel targets, annotation
/// queries and template-variable queries.
fn dashboard_exprs(d: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(t["expr"].as_str().expect("target expr").to_string());
        }
    }
    for a in d["annotations"]["list"].as_array().expect("annotations") {
        if let Some(e) = a["expr"].as_str() {
            out.push(e.to_string());
        }
    }
    for v in d["templating"]["list"].as_array().expect("templating") {
        if let Some(q) = v["definition"].as_str() {
            // label_values(<selector>, label): the selector is PromQL.
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|s| s.rsplit_once(','))
                .map(|(sel, _)| sel.to_string())
                .unwrap_or_else(|| panic!("unexpected variable query {q}"));
            out.push(inner);
        }
    }
    out
}

fn alert_rules() -> Value {
    serde_saphyr::from_str(&read("packaging/prometheus/pptune-alerts.yaml")).expect("alerts YAML")
}

fn alert_exprs(rules: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for g in rules["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            let name = r["alert"].as_str().expect("alert name").to_string();
            out.push((name, r["expr"].as_str().expect("expr").to_string()));
        }
    }
    out
}

/// The metric names in a PromQL expression that start with `pptune_`.
fn pptune_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(pos) = expr[i..].find("pptune_") {
        let start = i + pos;
        let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
        if start > 0 && ident(bytes[start - 1]) {
            i = start + 1;
            continue;
        }
        let mut end = start;
        while end < bytes.len() && ident(bytes[end]) {
            end += 1;
        }
        out.insert(expr[start..end].to_string());
        i = end;
    }
    out
}

/// The recording rule names (`level:metric:operations`) in a PromQL
/// expression.
fn rule_names(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.matches(':').count() == 2 && w.contains("pptune_"))
        .map(str::to_owned)
        .collect()
}

/// The names packaging/prometheus/pptune-rules.yaml records.
fn recorded_rule_names() -> BTreeSet<String> {
    let rules: Value = serde_saphyr::from_str(&read("packaging/prometheus/pptune-rules.yaml"))
        .expect("rules YAML");
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["record"].as_str().map(str::to_owned))
        .collect()
}

/// A registry with its families populated: prometheus-client writes no
/// `# TYPE` line for a family without children, so one device with one queue
/// and one pool is observed twice (the ratios need a delta) and each
/// event-driven family gets one child.
fn populated_metrics() -> pptune::publish::metrics::Metrics {
    use policy::snapshot::{
        Availability, Capabilities, Channels, Device, Pool, PoolStats, Rings, RxQueue, Snapshot,
    };
    use pptune::publish::metrics::*;
    let m = Metrics::new();
    let snap = |k: u64| Snapshot {
        capabilities: Capabilities {
            page_pool_stats: true,
            ..Capabilities::default()
        },
        devices: vec![Device {
            ifindex: 2,
            name: "eth0".into(),
            rings: Availability::Available(Rings {
                rx: Some(1024),
                rx_max: Some(8192),
                ..Rings::default()
            }),
            channels: Availability::Available(Channels {
                combined: Some(8),
                combined_max: Some(64),
                ..Channels::default()
            }),
            rx_queues: vec![RxQueue {
                id: 0,
                pools: vec![Pool {
                    id: 7,
                    inflight: Some(100),
                    inflight_mem: Some(409_600),
                    // Every counter of the table moving.
                    stats: Some(PoolStats::from_values(std::array::from_fn(|i| {
                        k * 10 * (u64::try_from(i).unwrap() + 1)
                    }))),
                    ..Pool::default()
                }],
                ..RxQueue::default()
            }],
            ..Device::default()
        }],
        orphan_pools: vec![Pool {
            id: 3,
            inflight: Some(1),
            ..Pool::default()
        }],
        ..Snapshot::default()
    };
    let (first, second) = (snap(1), snap(2));
    m.observe(&first, &PassDeltas::of(None, &first));
    m.observe(&second, &PassDeltas::of(Some(&first), &second));
    let dev = || "eth0".to_string();
    m.decisions
        .get_or_create(&DecisionLabels {
            device: dev(),
            action: "set_ring".into(),
            reason: "recycle_miss".into(),
            mode: "enforce".into(),
        })
        .inc();
    m.actions
        .get_or_create(&ActionLabels {
            device: dev(),
            knob: "ring.rx".into(),
            direction: "grow".into(),
            result: "applied".into(),
        })
        .inc();
    m.last_action
        .get_or_create(&DevLabels { device: dev() })
        .set(1);
    m.overrides
        .get_or_create(&KnobLabels {
            device: dev(),
            knob: "ring.rx".into(),
        })
        .inc();
    m.backoff.get_or_create(&DevLabels { device: dev() }).set(0);
    m.resyncs
        .get_or_create(&KindLabels {
            kind: "netdev".into(),
        })
        .inc();
    m.set_mode("eth0", "enforce");
    let mut p = policy::fixtures::policy();
    p.budget.per_device_bytes = Some(64 << 20);
    let _ = m.policy_in_force(&p);
    m.set_ring_cost("eth0", Some(8 << 20));
    m.set_reclaimable("eth0", Some(4 << 20));
    m.set_unjudged(
        "eth1",
        Some(pptune::publish::notes::Unjudged::DriverHidesPools),
    );
    m.set_recommendation(
        "eth0",
        Some((
            RecLabels {
                device: dev(),
                recommendation: "0123456789ab".into(),
                knob: "ring.rx".into(),
                reason: "recycle_miss_high".into(),
            },
            2048,
        )),
    );
    m
}

/// The sample names the daemon's registry really produces, from the
/// `# TYPE` lines of its OpenMetrics exposition (counters gain `_total`,
/// info `_info`).
fn exported_names() -> BTreeSet<String> {
    let text = populated_metrics().encode().expect("encode");
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let (name, kind) = (it.next().unwrap(), it.next().unwrap());
        let sample = match kind {
            "counter" => format!("{name}_total"),
            "info" => format!("{name}_info"),
            _ => name.to_string(),
        };
        out.insert(sample);
    }
    out
}

fn assert_names_exist(what: &str, names: &BTreeSet<String>) {
    // Both the daemon's declared list and what its registry really writes:
    // the two disagreed once (`_ratio` declared, `_ratios` written).
    let declared: BTreeSet<String> = pptune::publish::metrics::family_names()
        .into_iter()
        .collect();
    let undeclared: Vec<_> = names.iter().filter(|n| !declared.contains(*n)).collect();
    assert!(
        undeclared.is_empty(),
        "{what} queries metrics metrics.rs does not declare: {undeclared:?}\ndeclared: {declared:?}"
    );
    let exported = exported_names();
    let missing: Vec<_> = names.iter().filter(|n| !exported.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "{what} queries metrics the daemon's registry does not write (or populated_metrics() \
         here does not exercise them): {missing:?}\nexported: {exported:?}"
    );
    let docs = read("docs/metrics.md");
    let undocumented: Vec<_> = names
        .iter()
        .filter(|n| !docs.contains(n.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "{what} queries metrics docs/metrics.md does not document: {undocumented:?}"
    );
}

/// Every family the daemon declares has its row in docs/metrics.md, not
/// only those the dashboard and alerts query: a new family without its
/// row fails here.
#[test]
fn every_declared_family_is_documented() {
    let docs = read("docs/metrics.md");
    let undocumented: Vec<String> = pptune::publish::metrics::family_names()
        .into_iter()
        .filter(|n| !docs.contains(&format!("`{n}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "families docs/metrics.md has no `name` for: {undocumented:?}"
    );
}

#[test]
fn dashboard_covers_the_required_views() {
    let d = dashboard();
    assert!(d["uid"].as_str().is_some_and(|u| !u.is_empty()));
    let titles: Vec<String> = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] != "row")
        .map(|p| p["title"].as_str().unwrap().to_lowercase())
        .collect();
    for want in [
        "recycling %",
        "ring_full rate",
        "slow-path share",
        "rx ring size",
        "channel count",
        "inflight pool memory",
        "operator overrides",
        "canary vs observe",
        "by arm, with the spread",
        "hosts per arm and driver",
        "hosts judging nothing, by reason",
        "devices pptune cannot judge",
        "policy in force per host",
        "hosts per policy hash",
        "reclaimable ring memory, fleet",
        "reclaimable ring memory per device",
    ] {
        assert!(
            titles.iter().any(|t| t.contains(want)),
            "no panel titled like {want:?} in {titles:?}"
        );
    }
    // The ring cost estimate beside the pools' inflight memory.
    assert!(
        dashboard_exprs(&d)
            .iter()
            .any(|e| e.contains("pptune_device_ring_cost_estimate_bytes")),
        "no panel reads the ring cost estimate"
    );
    // What right-sizing could reclaim: per device, and the fleet's sum
    // through its recording rule.
    for want in [
        "pptune_device_reclaimable_bytes{",
        "job:pptune_device_reclaimable_bytes:sum{",
    ] {
        assert!(
            dashboard_exprs(&d).iter().any(|e| e.contains(want)),
            "no panel reads {want}"
        );
    }
    // Every recording rule the dashboard reads is one the rules file
    // records.
    let recorded = recorded_rule_names();
    for e in dashboard_exprs(&d) {
        for name in rule_names(&e) {
            assert!(
                recorded.contains(&name),
                "the dashboard reads {name}, which pptune-rules.yaml does not record: {e}"
            );
        }
    }
    // pptune's own changes are drawn on the time series as annotations.
    let anns = d["annotations"]["list"].as_array().unwrap();
    assert!(
        anns.iter().any(|a| a["expr"]
            .as_str()
            .is_some_and(|e| e.contains("pptune_actions_total"))),
        "no annotation query for pptune's actions"
    );
    // Any job name: a `$job` variable, no hard-coded `job="pptune"`, and no
    // `__inputs` (the data source is the `datasource` variable).
    assert!(d.get("__inputs").is_none(), "unused __inputs");
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(vars.contains(&"job"), "{vars:?}");
    let text = serde_json::to_string(&d).unwrap();
    assert!(!text.contains(r#"job=\"pptune\""#), "hard-coded job");
    // Fleet ratios come from summed rates (the per-device sums), never
    // from averaging per-queue ratios.
    for e in dashboard_exprs(&d) {
        assert!(
            !e.contains("avg(pptune_queue_"),
            "averages per-queue ratios: {e}"
        );
    }
    // Panel ids are unique (Grafana silently drops duplicates).
    let ids: Vec<u64> = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    let unique: BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "duplicate panel ids");
}

#[test]
fn dashboard_metrics_exist_and_are_documented() {
    let names: BTreeSet<String> = dashboard_exprs(&dashboard())
        .iter()
        .flat_map(|e| pptune_names(e))
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    assert_names_exist("the dashboard", &names);
}

/// The per-queue families (`pptune_queue_*`, `pptune_pool_*`, `pptune_pools`)
/// are bounded or absent under `daemon.queue_metrics: worst` and `none`;
/// with `none` the slow-path alert never fired and five dashboard panels
/// were empty. Every alert and panel reads the per-device sums and gauges,
/// which every setting exports (the promtool cases feed them only those).
#[test]
fn alerts_and_dashboard_read_no_per_queue_family() {
    let per_queue = |n: &str| {
        n.starts_with("pptune_queue_") || n.starts_with("pptune_pool_") || n == "pptune_pools"
    };
    for (what, exprs) in [
        ("dashboard", dashboard_exprs(&dashboard())),
        (
            "alerts",
            alert_exprs(&alert_rules())
                .into_iter()
                .map(|(_, e)| e)
                .collect(),
        ),
    ] {
        for e in exprs {
            let bad: Vec<String> = pptune_names(&e)
                .into_iter()
                .filter(|n| per_queue(n))
                .collect();
            assert!(bad.is_empty(), "{what} reads per-queue {bad:?}: {e}");
        }
    }
}

/// Every alert has its runbook: a section of docs/troubleshooting.md whose
/// heading names it (5 of 8 alerts appeared nowhere there).
#[test]
fn every_alert_has_a_troubleshooting_section() {
    let doc = read("docs/troubleshooting.md");
    let headings: Vec<&str> = doc.lines().filter(|l| l.starts_with("## ")).collect();
    for (name, _) in alert_exprs(&alert_rules()) {
        assert!(
            headings
                .iter()
                .any(|h| h.contains(&format!("(alert `{name}`)"))),
            "no docs/troubleshooting.md section headed \"… (alert `{name}`)\""
        );
    }
}

#[test]
fn alert_metrics_exist_and_are_documented() {
    let names: BTreeSet<String> = alert_exprs(&alert_rules())
        .iter()
        .flat_map(|(_, e)| pptune_names(e))
        .collect();
    assert_names_exist("the alert rules", &names);
}

/// Fails the test when promtool is missing: the tests that call it are
/// `#[ignore]`d for a plain `cargo test` and must not pass without it.
fn require_promtool() {
    let ok = Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "promtool not found (Debian package `prometheus`)");
}

fn run_promtool(args: &[&str], dir: &Path) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
#[ignore = "needs promtool (Debian package `prometheus`); run with --include-ignored"]
fn alert_rules_pass_promtool_check_and_unit_tests() {
    require_promtool();
    let dir = pptune_tests::repo_root().join("packaging/prometheus");
    let check = run_promtool(&["check", "rules", "pptune-alerts.yaml"], &dir);
    let n = alert_exprs(&alert_rules()).len();
    assert!(check.contains(&format!("{n} rules found")), "{check}");
    let test = run_promtool(&["test", "rules", "pptune-alerts.test.yaml"], &dir);
    assert!(test.contains("SUCCESS"), "{test}");

    // Every alert has at least one case where it must fire.
    let tests = read("packaging/prometheus/pptune-alerts.test.yaml");
    for (name, _) in alert_exprs(&alert_rules()) {
        assert!(
            tests.contains(&format!("alertname: {name}")),
            "alert {name} has no promtool test case"
        );
    }
}

/// Every alert selects pptune's targets through the one matcher render.py
/// replaces (`job="pptune"`), and no other job matcher exists: rendered with
/// another selector, no alert is left watching the default job.
#[test]
fn every_alert_selects_through_the_one_job_selector() {
    for (name, expr) in alert_exprs(&alert_rules()) {
        let matchers = job_matchers(&expr);
        assert!(!matchers.is_empty(), "{name} selects no job: {expr}");
        for m in matchers {
            assert_eq!(
                m, r#"job="pptune""#,
                "{name}: a job matcher render.py does not set"
            );
        }
    }
    assert_eq!(
        job_matchers(r#"up{job = "x", job!~"y"} or rate(myjob_total{ajob="z"}[5m])"#),
        [r#"job = "x""#, r#"job!~"y""#]
    );
}

/// The `job` label matchers in a PromQL expression, as written.
fn job_matchers(expr: &str) -> Vec<&str> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (at, _) in expr.match_indices("job") {
        if expr[..at].chars().next_back().is_some_and(word) {
            continue;
        }
        let rest = expr[at + 3..].trim_start();
        let Some(op) = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))
        else {
            continue;
        };
        let value = rest[op.len()..].trim_start();
        if let Some(close) = value.strip_prefix('"').and_then(|v| v.find('"')) {
            let end = expr.len() - value.len() + close + 2;
            out.push(&expr[at..end]);
        }
    }
    out
}

/// Each alert's runbook_url points at its section of
/// docs/troubleshooting.md (an explicit anchor, the alert's name in lower
/// case, just before the heading that names the alert).
#[test]
fn every_alert_links_its_runbook() {
    let doc = read("docs/troubleshooting.md");
    let base = "https://example.invalid/pptune/blob/main/docs/troubleshooting.md#";
    for g in alert_rules()["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let name = r["alert"].as_str().unwrap();
            let anchor = name.to_lowercase();
            assert_eq!(
                r["annotations"]["runbook_url"].as_str(),
                Some(format!("{base}{anchor}").as_str()),
                "{name}: runbook_url"
            );
            let at = doc
                .find(&format!("<a id=\"{anchor}\"></a>"))
                .unwrap_or_else(|| panic!("docs/troubleshooting.md has no anchor {anchor}"));
            let heading = doc[at..].lines().find(|l| l.starts_with("## ")).unwrap();
            assert!(
                heading.contains(&format!("(alert `{name}`)")),
                "{anchor} is above {heading}"
            );
        }
    }
}

/// render.py with another selector and runbook base: no alert keeps the
/// default job, every runbook moves, and the alert unit tests pass on series
/// scraped under the other job name.
#[test]
#[ignore = "needs promtool (Debian package `prometheus`); run with --include-ignored"]
fn rules_rendered_for_another_job_still_pass_their_tests() {
    require_promtool();
    let tmp = tempfile::tempdir().unwrap();
    let out = pptune_tests::bin::render_rules(
        &[
            "--selector",
            r#"job="node-tuning""#,
            "--runbook",
            "https://wiki.example.com/pptune/troubleshooting.md",
        ],
        tmp.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alerts = std::fs::read_to_string(tmp.path().join("pptune-alerts.yaml")).unwrap();
    assert!(!alerts.contains(r#"job="pptune""#));
    assert!(!alerts.contains("example.invalid"));
    let tests = read("packaging/prometheus/pptune-alerts.test.yaml")
        .replace(r#"job="pptune""#, r#"job="node-tuning""#)
        .replace("job: pptune", "job: node-tuning")
        .replace(
            "https://example.invalid/pptune/blob/main/docs/troubleshooting.md",
            "https://wiki.example.com/pptune/troubleshooting.md",
        );
    assert!(!tests.contains(r#"job="pptune""#) && !tests.contains("job: pptune"));
    std::fs::write(tmp.path().join("pptune-alerts.test.yaml"), tests).unwrap();
    let test = run_promtool(&["test", "rules", "pptune-alerts.test.yaml"], tmp.path());
    assert!(test.contains("SUCCESS"), "{test}");
    // A selector that is not label matchers is refused, and nothing written.
    let bad = tempfile::tempdir().unwrap();
    let out = pptune_tests::bin::render_rules(&["--selector", "job=pptune"], bad.path());
    assert!(!out.status.success());
    assert_eq!(std::fs::read_dir(bad.path()).unwrap().count(), 0);
}

/// Grafana's macros and variables replaced by values Prometheus accepts, so
/// promtool can parse the dashboard's queries as recording rules.
fn plain_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1h")
        .replace("$instance", ".*")
        .replace("$device", ".*")
        .replace("$job", "pptune")
}

#[test]
#[ignore = "needs promtool (Debian package `prometheus`); run with --include-ignored"]
fn dashboard_queries_are_valid_promql() {
    require_promtool();
    let exprs = dashboard_exprs(&dashboard());
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = plain_promql(e);
        assert!(!e.contains('$'), "unreplaced variable in {e}");
        rules.push_str(&format!(
            "      - record: dashboard:q{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        ));
    }
    let dir = std::env::temp_dir().join(format!("pptune-dash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dashboard-rules.yaml"), rules).unwrap();
    let out = run_promtool(&["check", "rules", "dashboard-rules.yaml"], &dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.contains(&format!("{} rules found", exprs.len())),
        "{out}"
    );
}

/// Two scrapes of one host, a minute apart, in the 0.0.4 text form, with
/// `daemon.queue_metrics: {series: worst, worst: 4}`: the snapshot recorded
/// in the VM (16 netdevsim devices × 128 queues), then the same one a
/// minute later with `miss` recycle misses and 70,000 ring recycles more
/// per queue; one applied change in between when `enforcing`.
fn recorded_scrapes(miss: u64, enforcing: bool) -> (String, String) {
    use policy::policy::QueueSelection;
    let path = pptune_tests::repo_root().join("benches/results/vm-snapshot-2048.json");
    let first: policy::Snapshot = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut second = first.clone();
    second.taken_at_ms += 60_000;
    for d in &mut second.devices {
        for q in &mut d.rx_queues {
            for p in &mut q.pools {
                if let Some(st) = &mut p.stats {
                    st.recycle_ring += 70_000;
                    st.recycle_ring_full += miss;
                    st.alloc_refill += 1_000;
                    st.alloc_slow += 10;
                }
            }
        }
    }
    let m = pptune::publish::metrics::Metrics::new();
    m.set_queue_series(QueueSelection::Worst { count: 4 });
    m.rollout_enforcing.set(i64::from(enforcing));
    let applied = pptune::publish::metrics::ActionLabels {
        device: "eth1".into(),
        knob: "ring.rx".into(),
        direction: "grow".into(),
        result: "applied".into(),
    };
    let _ = m.actions.get_or_create(&applied);
    m.observe(&first, &PassDeltas::of(None, &first));
    let a = pptune::publish::http::openmetrics_to_text004(&m.encode().unwrap());
    if enforcing {
        m.actions.get_or_create(&applied).inc();
    }
    m.observe(&second, &PassDeltas::of(Some(&first), &second));
    let b = pptune::publish::http::openmetrics_to_text004(&m.encode().unwrap());
    (a, b)
}

#[test]
#[ignore = "needs promtool (Debian package `prometheus`); run with --include-ignored"]
fn recording_rules_evaluate_on_recorded_scrapes() {
    require_promtool();
    // Every input series is one a recorded scrape holds, extended as the
    // two scrapes' slope (10 minutes at one sample a minute).
    let hosts = [("a:9864", 300u64, true), ("b:9864", 30, false)];
    let mut input = String::new();
    let mut sums = [0f64; 6]; // full, cached, ring, slow, refill, applied
    let mut device_a = None;
    for (instance, miss, enforcing) in hosts {
        let (s0, s1) = recorded_scrapes(miss, enforcing);
        let (v0, v1) = (samples(&s0), samples(&s1));
        for (series, b) in &v1 {
            let wanted = series.starts_with("pptune_device_pool_")
                || series.starts_with("pptune_rollout_enforcing")
                || series.starts_with("pptune_actions_total");
            let Some(a) = v0.get(series) else { continue };
            if !wanted {
                continue;
            }
            let d = b - a;
            input.push_str(&format!(
                "      - series: '{}'\n        values: '{a}+{d}x10'\n",
                with_target(series, instance)
            ));
            for (i, name) in [
                "pptune_device_pool_recycle_ring_full_total{",
                "pptune_device_pool_recycle_cached_pages_total{",
                "pptune_device_pool_recycle_ring_pages_total{",
                "pptune_device_pool_alloc_slow_refills_total{",
                "pptune_device_pool_alloc_refill_refills_total{",
                "pptune_actions_total{",
            ]
            .iter()
            .enumerate()
            {
                if series.starts_with(name) {
                    sums[i] += d;
                }
            }
            if instance == "a:9864"
                && series == "pptune_device_pool_recycle_ring_full_total{device=\"eth1\"}"
            {
                let per = |n: &str| {
                    let k = format!("{n}{{device=\"eth1\"}}");
                    v1[&k] - v0[&k]
                };
                let full = per("pptune_device_pool_recycle_ring_full_total");
                device_a = Some(
                    full / (per("pptune_device_pool_recycle_cached_pages_total")
                        + per("pptune_device_pool_recycle_ring_pages_total")
                        + full),
                );
            }
        }
    }
    let device_a = device_a.expect("eth1 in the recorded scrape");
    let miss = sums[0] / (sums[1] + sums[2] + sums[0]);
    let slow = sums[3] / (sums[3] + sums[4]);
    // 10 minutes of `applied` rising by one a minute: 10 in the hour.
    let changes = sums[5] * 10.0;
    assert!(miss > 0.0 && slow > 0.0 && changes == 10.0, "{sums:?}");
    // promtool compares exactly; Prometheus sums in its own order, so the
    // check is "within 1e-12 of the ratio of the recorded deltas".
    let close = |expr: &str, want: f64, labels: &str| {
        format!(
            "      - expr: 'abs({expr} - {want:e}) < bool 1e-12'\n        eval_time: 10m\n        exp_samples:\n          - labels: '{labels}'\n            value: 1\n"
        )
    };
    let job = "{job=\"pptune\"}";
    let mut exprs = String::new();
    exprs += &close(
        "job_instance_device:pptune_recycle_miss:ratio_rate5m{instance=\"a:9864\",device=\"eth1\"}",
        device_a,
        "{job=\"pptune\",instance=\"a:9864\",device=\"eth1\"}",
    );
    exprs += &close("job:pptune_recycle_miss:ratio_rate5m", miss, job);
    exprs += &close("job:pptune_slow_refill:ratio_rate5m", slow, job);
    exprs += &close("job:pptune_changes:increase1h", changes, job);
    exprs += &close("job:pptune_hosts_enforcing:count", 1.0, job);
    exprs += &close("job:pptune_hosts_observing:count", 1.0, job);
    run_promtool(
        &["check", "rules", "pptune-rules.yaml"],
        &pptune_tests::repo_root().join("packaging/prometheus"),
    );
    test_recording_rules(&input, &exprs);
}

/// `promtool test rules` of packaging/prometheus/pptune-rules.yaml on
/// `input` (the `input_series` entries) against `exprs` (the
/// `promql_expr_test` entries), sampled every minute.
fn test_recording_rules(input: &str, exprs: &str) {
    let test = format!(
        "rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    promql_expr_test:\n{exprs}",
        rules = pptune_tests::repo_root()
            .join("packaging/prometheus/pptune-rules.yaml")
            .display()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.test.yaml"), &test).unwrap();
    run_promtool(&["test", "rules", "rules.test.yaml"], dir.path());
}

/// The package ships render.py beside the rules and dashboard it reads
/// (daemon/Cargo.toml's assets under usr/share/pptune), and it runs from
/// there: the installed rules rendered with a fleet's runbook base have no
/// `example.invalid` link left; without `--runbook` it warns that they go
/// nowhere.
#[test]
fn the_packaged_render_script_runs_from_the_installed_layout() {
    let manifest = read("daemon/Cargo.toml");
    let tree = tempfile::tempdir().unwrap();
    let mut shipped = Vec::new();
    for line in manifest.lines() {
        let Some(rest) = line.trim().strip_prefix("[\"../") else {
            continue;
        };
        let parts: Vec<&str> = rest.split('"').collect();
        let (src, dest) = (parts[0], parts[2]);
        if !dest.starts_with("usr/share/pptune/") || !dest.ends_with('/') {
            continue;
        }
        let name = Path::new(src).file_name().unwrap();
        let to = tree.path().join(dest).join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(pptune_tests::repo_root().join(src), &to).unwrap();
        shipped.push(to);
    }
    let script = tree.path().join("usr/share/pptune/prometheus/render.py");
    assert!(
        shipped.contains(&script),
        "render.py is not shipped: {shipped:?}"
    );
    let render = |args: &[&str], out: &Path| {
        Command::new("python3")
            .arg(&script)
            .args(args)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    };
    let out = tree.path().join("out");
    let r = render(
        &[
            "--runbook",
            "https://wiki.example.com/pptune/troubleshooting.md",
        ],
        &out,
    );
    assert!(r.status.success(), "{r:?}");
    let alerts = std::fs::read_to_string(out.join("pptune-alerts.yaml")).unwrap();
    assert!(!alerts.contains("example.invalid"), "{alerts}");
    assert!(alerts.contains("https://wiki.example.com/pptune/troubleshooting.md#"));
    let r = render(&[], &tree.path().join("out2"));
    assert!(r.status.success(), "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("warning: no --runbook"),
        "{r:?}"
    );
}

/// `job:pptune_device_reclaimable_bytes:sum` is the fleet's sum of what
/// the daemons export: two hosts' expositions (a ring at max whose pools
/// had 600 pages out beyond it, one with nothing to reclaim at 0, and a
/// second host's) fed to promtool as they are scraped.
#[test]
#[ignore = "needs promtool (Debian package `prometheus`); run with --include-ignored"]
fn the_fleet_sums_the_reclaimable_memory() {
    require_promtool();
    let policy = policy::fixtures::policy();
    let device = |ring: u32, held: u64| {
        let mut d = policy::fixtures::nic("ice", ring, 8160, 2);
        for q in &mut d.rx_queues {
            q.pools[0].inflight = Some(u64::from(ring) + held);
            q.pools[0].inflight_mem = Some((u64::from(ring) + held) * 4096);
        }
        d
    };
    let hosts = [
        (
            "a:9864",
            vec![("eth0", device(8160, 600)), ("eth1", device(512, 2048))],
        ),
        ("b:9864", vec![("eth0", device(4096, 100))]),
    ];
    let mut input = String::new();
    let mut want = 0u64;
    for (instance, devices) in &hosts {
        let m = pptune::publish::metrics::Metrics::new();
        for (name, d) in devices {
            let bytes = policy::engine::reclaimable(&policy, d).map_or(0, |r| r.bytes);
            m.set_reclaimable(name, Some(bytes));
            want += bytes;
        }
        let text = pptune::publish::http::openmetrics_to_text004(&m.encode().unwrap());
        for (series, v) in samples(&text) {
            if series.starts_with("pptune_device_reclaimable_bytes{") {
                input.push_str(&format!(
                    "      - series: '{}'\n        values: '{v}x10'\n",
                    with_target(&series, instance)
                ));
            }
        }
    }
    assert!(input.matches("series:").count() == 3, "{input}");
    assert!(want > 100 << 20, "{want}");
    test_recording_rules(
        &input,
        &format!(
            "      - expr: job:pptune_device_reclaimable_bytes:sum\n        eval_time: 5m\n        exp_samples:\n          - labels: 'job:pptune_device_reclaimable_bytes:sum{{job=\"pptune\"}}'\n            value: {want}\n"
        ),
    );
}
