//! A fleet's view of a daemon's first change, from the daemon's own
//! exposition: two daemons (on the fake kernel, in-process) serve
//! `/metrics` in a network namespace of their own; host `a` enforces and
//! makes its first change, then an operator takes its ring over; host `b`
//! only observes. The test scrapes both every second and
//!
//! - a real Prometheus scrapes them too, with the shipped recording rules:
//!   the changes rule and the dashboard's change annotation see `a`'s
//!   first change;
//! - host `c`'s policy manages no knob, so pptune judges nothing there;
//! - what the test scraped is replayed, sample by sample as the daemon
//!   exported it (absent until exported), into `promtool test rules` with
//!   the shipped alert and recording rules: the override alert fires for
//!   `a` and not `b`, the canary's change count and the change annotation
//!   see the first change, and (`c`'s last scrape held past the alert's
//!   hour) the judging-nothing alert fires for `c` alone, with its reason.
//!
//! A counter created on its first event is born at 1, and neither reads
//! it: this is the test that fails then.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use netlink::netns::TempNetns;
use policy::Mode;
use pptune_tests::daemon;
use pptune_tests::exposition::{samples, with_target};
use pptune_tests::fake::{self, FakeKernel};
use pptune_tests::http::{Prometheus, body, get_in};

const HOSTS: [(&str, &str); 3] = [
    ("a", "127.0.0.1:9101"),
    ("b", "127.0.0.1:9102"),
    ("c", "127.0.0.1:9103"),
];

/// Minutes host `c`'s last scrape is held in the replay: its steady state
/// for longer than `PptuneJudgingNothing`'s `for: 1h`.
const HELD_MINUTES: usize = 65;

fn read(rel: &str) -> String {
    std::fs::read_to_string(pptune_tests::repo_root().join(rel)).unwrap()
}

/// The dashboard's "pptune changes" annotation query, for every instance
/// and device of job `pptune`.
fn change_annotation() -> String {
    let d: serde_json::Value =
        serde_json::from_str(&read("packaging/grafana/pptune-dashboard.json")).unwrap();
    let expr = d["annotations"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "pptune changes")
        .and_then(|a| a["expr"].as_str())
        .expect("the dashboard's change annotation")
        .to_owned();
    expr.replace("$job", "pptune")
        .replace("$instance", ".*")
        .replace("$device", ".*")
}

/// The samples of a scrape whose value is finite: NaN and ±Inf are left
/// out of the input series.
fn finite_samples(text: &str) -> BTreeMap<String, f64> {
    let mut s = samples(text);
    s.retain(|_, v| v.is_finite());
    s
}

/// The scrapes as promtool input series, one minute apart: a series the
/// daemon did not export yet is missing (`_`) there, as in Prometheus.
fn input_series(scrapes: &[(String, Vec<BTreeMap<String, f64>>)]) -> String {
    let mut out = String::new();
    for (instance, list) in scrapes {
        let mut all: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
        for (i, s) in list.iter().enumerate() {
            for (series, v) in s {
                all.entry(with_target(series, instance))
                    .or_insert_with(|| vec![None; list.len()])[i] = Some(*v);
            }
        }
        all.insert(with_target("up", instance), vec![Some(1.0); list.len()]);
        for (series, values) in all {
            let values: Vec<String> = values
                .iter()
                .map(|v| v.map_or_else(|| "_".to_owned(), |v| format!("{v}")))
                .collect();
            let _ = writeln!(
                out,
                "      - series: '{series}'\n        values: '{}'",
                values.join(" ")
            );
        }
    }
    out
}

/// The shipped rules, the probes and the promtool test of what was
/// scraped, the first change in scrape `changed`; the test's output.
fn promtool_replay(scrapes: &[(String, Vec<BTreeMap<String, f64>>)], changed: usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    for f in ["pptune-alerts.yaml", "pptune-rules.yaml"] {
        std::fs::write(
            dir.path().join(f),
            read(&format!("packaging/prometheus/{f}")),
        )
        .unwrap();
    }
    // What the canary table and the dashboard read, as alerts promtool can
    // expect by their labels.
    let probes = format!(
        "groups:\n  - name: probes\n    rules:\n      - alert: CanaryChangesSeen\n        expr: job:pptune_changes:increase1h > 0\n      - alert: ChangeAnnotationSeen\n        expr: '{}'\n",
        change_annotation().replace('\'', "''")
    );
    std::fs::write(dir.path().join("probes.yaml"), probes).unwrap();
    let n = scrapes[0].1.len();
    let last = n - 1;
    let held = last + HELD_MINUTES;
    let runbook =
        "https://example.invalid/pptune/blob/main/docs/troubleshooting.md#pptuneoperatoroverride";
    let test = format!(
        "rule_files:\n  - pptune-alerts.yaml\n  - pptune-rules.yaml\n  - probes.yaml\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n      - eval_time: {last}m\n        alertname: PptuneOperatorOverride\n        exp_alerts:\n          - exp_labels: {{severity: info, job: pptune, instance: a, device: eth0, knob: ring.rx}}\n            exp_annotations:\n              runbook_url: \"{runbook}\"\n              summary: \"a eth0: ring.rx changed by someone else; pptune stopped managing it\"\n      - eval_time: {last}m\n        alertname: CanaryChangesSeen\n        exp_alerts:\n          - exp_labels: {{job: pptune}}\n      - eval_time: {changed}m\n        alertname: ChangeAnnotationSeen\n        exp_alerts:\n          - exp_labels: {{instance: a, device: eth0, knob: ring.rx, direction: grow, result: applied}}\n      - eval_time: {held}m\n        alertname: PptuneJudgingNothing\n        exp_alerts:\n          - exp_labels: {{severity: info, job: pptune, instance: c, reason: not_managed}}\n            exp_annotations:\n              runbook_url: \"https://example.invalid/pptune/blob/main/docs/troubleshooting.md#pptunejudgingnothing\"\n              summary: \"c: pptune can judge no device here (not_managed)\"\n",
        series = input_series(scrapes),
    );
    std::fs::write(dir.path().join("replay.test.yaml"), &test).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["test", "rules", "replay.test.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("promtool (Debian package `prometheus`)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool test rules failed:\n{text}\n--- test file:\n{test}"
    );
    text
}

/// An instant query's series count (0 when Prometheus does not answer).
async fn count(prom: &Arc<Prometheus>, q: &str) -> usize {
    let (p, q) = (Arc::clone(prom), q.to_owned());
    tokio::task::spawn_blocking(move || p.query(&q))
        .await
        .unwrap()
        .and_then(|r| serde_json::from_str::<serde_json::Value>(body(&r)).ok())
        .and_then(|v| v["data"]["result"].as_array().map(Vec::len))
        .unwrap_or(0)
}

fn applied(s: &BTreeMap<String, f64>) -> Option<f64> {
    s.iter()
        .find(|(k, _)| {
            k.starts_with("pptune_actions_total{")
                && k.contains("knob=\"ring.rx\",direction=\"grow\",result=\"applied\"")
        })
        .map(|(_, v)| *v)
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs /usr/bin/prometheus and promtool (Debian package `prometheus`); run with --include-ignored"]
async fn prometheus_and_promtool_see_the_first_change_as_the_daemon_exports_it() {
    let ns = TempNetns::create("first-change").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let mut endpoints = Vec::new();
    for (_, addr) in HOSTS {
        endpoints.push(pptune_tests::http::serve_in(&ns, addr));
    }
    let rules =
        read("packaging/prometheus/pptune-rules.yaml").replace("interval: 1m", "interval: 1s");
    let targets: Vec<String> = HOSTS.iter().map(|(_, a)| format!("'{a}'")).collect();
    let prom = Arc::new(Prometheus::with_rules_in(
        ns.name(),
        &format!(
            "  - job_name: pptune\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
        &[("pptune-rules.yaml", &rules)],
    ));
    for _ in 0..60 {
        if count(&prom, "up == 1").await == HOSTS.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        count(&prom, "up == 1").await,
        HOSTS.len(),
        "{}",
        prom.log_tail()
    );

    let kernels = HOSTS.map(|_| Arc::new(FakeKernel::bursty()));
    let mut unmanaged = fake::test_policy(Mode::Observe);
    unmanaged.rings.enabled = false;
    unmanaged.channels.enabled = false;
    let policies = [
        fake::test_policy(Mode::Enforce),
        fake::test_policy(Mode::Observe),
        unmanaged,
    ];
    let running: Vec<_> = policies
        .into_iter()
        .zip(&kernels)
        .zip(endpoints)
        .zip(HOSTS)
        .map(|(((p, k), m), (name, _))| daemon::start_on_host(k, p, (None, None), name, m))
        .collect();

    let scrape = |addr: &'static str| {
        let ns = ns.name().to_owned();
        async move {
            tokio::task::spawn_blocking(move || get_in(&ns, addr, "/metrics", &[]))
                .await
                .unwrap()
                .map(|r| finite_samples(body(&r)))
                .unwrap_or_default()
        }
    };
    let mut scraped: Vec<Vec<BTreeMap<String, f64>>> = vec![Vec::new(); HOSTS.len()];
    let mut overridden_at = None;
    let annotation = change_annotation();
    let mut seen = (0, 0);
    for tick in 0..90 {
        for (i, (_, addr)) in HOSTS.iter().enumerate() {
            scraped[i].push(scrape(addr).await);
        }
        let a = scraped[0].last().unwrap();
        // Once the first change is exported, an operator sets the ring.
        if overridden_at.is_none() && applied(a).unwrap_or(0.0) >= 1.0 {
            kernels[0].operator_set_ring(kernels[0].ring() / 2);
            overridden_at = Some(tick);
        }
        seen = (
            count(&prom, "job:pptune_changes:increase1h > 0").await,
            count(&prom, &annotation).await,
        );
        if overridden_at.is_some_and(|t| tick >= t + 5) && seen.0 > 0 && seen.1 > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for r in running {
        r.stop().await.unwrap();
    }
    assert!(overridden_at.is_some(), "host a made no change");
    let a = &scraped[0];
    let first = a.iter().position(|s| applied(s).is_some());
    let changed = a
        .iter()
        .position(|s| applied(s).unwrap_or(0.0) >= 1.0)
        .unwrap();
    assert_eq!(
        seen,
        (1, 1),
        "Prometheus: (changes rule, change annotation) series\n{}",
        prom.log_tail()
    );
    // Host b, which only observes, exports its change counters at 0.
    assert_eq!(
        scraped[1].last().and_then(applied),
        Some(0.0),
        "host b's change counter"
    );
    let c = scraped[2].last().cloned().unwrap();
    assert_eq!(
        c.get(r#"pptune_judging_nothing{reason="not_managed"}"#),
        Some(&1.0),
        "host c: {c:?}"
    );
    let mut replay: Vec<(String, Vec<BTreeMap<String, f64>>)> = HOSTS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .zip(scraped.clone())
        .collect();
    replay[2].1.extend(std::iter::repeat_n(c, HELD_MINUTES));
    promtool_replay(&replay, changed);
    // The daemon exported the change counter at 0 before the change.
    assert!(
        first.is_some_and(|f| f < changed),
        "the change counter was not exported at 0 before the first change (first exported at scrape {first:?}, 1 at {changed})"
    );
}
