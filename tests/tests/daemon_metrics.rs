//! pptune's metrics: the exposition is strict OpenMetrics, no name ends in
//! `_total_total`, every declared family is emitted with samples after a
//! run that exercises every path, and a real Prometheus server scrapes the
//! endpoint and answers a query through its HTTP API.

// Test helpers may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use policy::{Mode, Policy};
use pptune::kernel::KernelEvent;
use pptune::metrics::{Metrics, family_names};
use pptune::notify::Notifier;
use pptune::rollout::HostId;
use pptune::run::{Options, PolicyEngine, PolicySource, run};
use pptune_tests::fake::{self, FakeKernel};
use tokio::sync::mpsc;

struct Fixed(Policy);

impl PolicySource for Fixed {
    fn load(&self) -> Result<Policy, String> {
        Ok(self.0.clone())
    }
}

/// A strict OpenMetrics text parser: families (HELP/TYPE/UNIT), samples
/// belonging to the family last declared, label syntax, values, no
/// duplicates, `# EOF` last. Returns family name → (type, samples).
#[allow(clippy::type_complexity)]
fn parse_openmetrics(text: &str) -> Result<BTreeMap<String, (String, Vec<String>)>, String> {
    let is_name = |s: &str| {
        let mut c = s.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
            && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
    };
    let mut fams: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut seen_samples = BTreeSet::new();
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.last() != Some(&"") || lines.get(lines.len().wrapping_sub(2)) != Some(&"# EOF") {
        return Err("exposition does not end with `# EOF\\n`".into());
    }
    for (n, line) in lines[..lines.len() - 2].iter().enumerate() {
        let n = n + 1;
        if let Some(rest) = line.strip_prefix("# ") {
            let mut p = rest.splitn(3, ' ');
            let (kw, name, arg) = (p.next().unwrap_or(""), p.next().unwrap_or(""), p.next());
            if !is_name(name) {
                return Err(format!("line {n}: bad metric name {name:?}"));
            }
            match kw {
                "HELP" => {
                    if current.as_deref() != Some(name) {
                        if fams.contains_key(name) {
                            return Err(format!("line {n}: family {name} declared twice"));
                        }
                        current = Some(name.to_owned());
                        fams.insert(name.to_owned(), (String::new(), Vec::new()));
                    }
                }
                "TYPE" => {
                    let t = arg.ok_or(format!("line {n}: TYPE without type"))?;
                    if ![
                        "counter",
                        "gauge",
                        "info",
                        "histogram",
                        "summary",
                        "stateset",
                        "unknown",
                        "gaugehistogram",
                    ]
                    .contains(&t)
                    {
                        return Err(format!("line {n}: unknown type {t}"));
                    }
                    if current.as_deref() != Some(name) {
                        if fams.contains_key(name) {
                            return Err(format!("line {n}: family {name} declared twice"));
                        }
                        current = Some(name.to_owned());
                        fams.insert(name.to_owned(), (String::new(), Vec::new()));
                    }
                    fams.get_mut(name).unwrap().0 = t.to_owned();
                }
                "UNIT" => {
                    let u = arg.ok_or(format!("line {n}: UNIT without unit"))?;
                    if !name.ends_with(&format!("_{u}")) {
                        return Err(format!(
                            "line {n}: family {name} does not end with its unit {u}"
                        ));
                    }
                }
                _ => return Err(format!("line {n}: unknown descriptor {kw}")),
            }
            continue;
        }
        // A sample: name{labels} value
        let (series, value) = line
            .rsplit_once(' ')
            .ok_or(format!("line {n}: no value: {line:?}"))?;
        if value.parse::<f64>().is_err() && !["+Inf", "-Inf", "NaN"].contains(&value) {
            return Err(format!("line {n}: bad value {value:?}"));
        }
        let (name, labels) = match series.split_once('{') {
            Some((nm, rest)) => (
                nm,
                Some(
                    rest.strip_suffix('}')
                        .ok_or(format!("line {n}: unclosed labels"))?,
                ),
            ),
            None => (series, None),
        };
        if !is_name(name) {
            return Err(format!("line {n}: bad sample name {name:?}"));
        }
        if let Some(labels) = labels {
            let mut rest = labels;
            let mut keys = BTreeSet::new();
            while !rest.is_empty() {
                let (k, after) = rest
                    .split_once("=\"")
                    .ok_or(format!("line {n}: bad label in {labels:?}"))?;
                if !is_name(k) || !keys.insert(k) {
                    return Err(format!("line {n}: bad or repeated label name {k:?}"));
                }
                let mut end = None;
                let mut esc = false;
                for (i, c) in after.char_indices() {
                    match (esc, c) {
                        (true, '\\' | '"' | 'n') => esc = false,
                        (true, _) => return Err(format!("line {n}: bad escape")),
                        (false, '\\') => esc = true,
                        (false, '"') => {
                            end = Some(i);
                            break;
                        }
                        _ => {}
                    }
                }
                let end = end.ok_or(format!("line {n}: unterminated label value"))?;
                rest = &after[end + 1..];
                rest = rest.strip_prefix(',').unwrap_or(rest);
            }
        }
        let fam = current
            .clone()
            .ok_or(format!("line {n}: sample before any family"))?;
        let (ty, samples) = fams.get_mut(&fam).unwrap();
        let ok = match ty.as_str() {
            "counter" => name == format!("{fam}_total") || name == format!("{fam}_created"),
            "info" => name == format!("{fam}_info"),
            "gauge" | "unknown" => name == fam,
            "histogram" => ["_bucket", "_sum", "_count", "_created"]
                .iter()
                .any(|s| name == format!("{fam}{s}")),
            _ => name.starts_with(&fam),
        };
        if !ok {
            return Err(format!(
                "line {n}: sample {name} does not belong to {ty} family {fam}"
            ));
        }
        if !seen_samples.insert(series.to_owned()) {
            return Err(format!("line {n}: duplicate sample {series}"));
        }
        samples.push((*line).to_owned());
    }
    Ok(fams)
}

/// Runs the daemon on the fake with an operator override and an overflow,
/// so every path that feeds a metric is taken.
async fn exercise(metrics: Arc<Metrics>, secs: u64) {
    let k = Arc::new(FakeKernel::bursty());
    let p = fake::test_policy(Mode::Enforce);
    let (tx, rx) = mpsc::unbounded_channel();
    let opts = Options {
        notifier: Notifier::off(),
        store: None,
        host_id: HostId {
            source: "test",
            value: "h".into(),
        },
        control_socket: None,
        metrics,
        reload: rx,
        backoff_base: Duration::from_secs(30),
    };
    let k2 = Arc::clone(&k);
    tokio::spawn(async move {
        while k2.sets().is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(4)).await;
        k2.operator_set_ring(512);
        k2.emit(KernelEvent::Overflow { source: "netdev" });
        let _ = tx.send(());
    });
    run(
        k,
        PolicyEngine::default(),
        Box::new(Fixed(p.clone())),
        p,
        opts,
        tokio::time::sleep(Duration::from_secs(secs)),
    )
    .await
    .unwrap();
}

#[tokio::test(start_paused = true)]
async fn exposition_is_strict_openmetrics_and_every_family_is_emitted() {
    let metrics = Arc::new(Metrics::new());
    // Scrape every half second of the run: every exposition must parse, and
    // every declared family must show samples at some point (a
    // recommendation series exists only while there is a recommendation).
    let m2 = Arc::clone(&metrics);
    let scraper = tokio::spawn(async move {
        let mut with_samples = BTreeSet::new();
        let mut declared = BTreeMap::new();
        let mut texts = Vec::new();
        for _ in 0..59 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let text = m2.encode().unwrap();
            let fams = parse_openmetrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            for (f, (ty, samples)) in &fams {
                declared.insert(f.clone(), ty.clone());
                if !samples.is_empty() {
                    with_samples.insert(f.clone());
                }
            }
            texts.push(text);
        }
        (with_samples, declared, texts)
    });
    exercise(Arc::clone(&metrics), 30).await;
    let (with_samples, declared, texts) = scraper.await.unwrap();
    let text = metrics.encode().unwrap();
    assert!(texts.iter().all(|t| !t.contains("_total_total")), "{text}");
    let fams = parse_openmetrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for f in fams.keys() {
        assert!(f.starts_with("pptune_"), "{f}");
        assert!(!f.contains("pool_id"), "{f}");
    }
    for want in family_names() {
        // Counter families are declared without `_total`; info without `_info`.
        let fam = want
            .strip_suffix("_total")
            .or_else(|| want.strip_suffix("_info"))
            .unwrap_or(&want);
        let ty = declared
            .get(fam)
            .unwrap_or_else(|| panic!("declared family {want} never emitted:\n{text}"));
        if want.ends_with("_total") {
            assert_eq!(ty, "counter", "{want}");
        }
        assert!(
            with_samples.contains(fam),
            "family {want} never had samples:\n{text}"
        );
        if let Some((_, samples)) = fams.get(fam) {
            assert!(
                samples.iter().all(|s| s.starts_with(&want)),
                "{want}: {samples:?}"
            );
        }
    }
    assert_eq!(
        declared.len(),
        family_names().len(),
        "undeclared families in {:?}",
        declared.keys()
    );
    // No label keyed by pool id; queue-level series carry `device`.
    assert!(text.contains("pptune_pool_recycle_ring_full_total{device=\"eth0\",queue=\"0\"}"));
    // The recommendation carried its stable id while it was current.
    assert!(
        texts
            .iter()
            .any(|t| t.contains("pptune_recommendation_target{device=\"eth0\",recommendation=\""))
    );
}

#[tokio::test(start_paused = true)]
async fn pool_counters_stay_monotonic_across_pool_rebuilds() {
    // Ring changes rebuild the fake's pools (new ids, zero counters): the
    // exported counters must carry the retired pools' values.
    let metrics = Arc::new(Metrics::new());
    let read = |m: &Metrics| -> f64 {
        m.encode()
            .unwrap()
            .lines()
            .find(|l| {
                l.starts_with("pptune_pool_alloc_fast_pages_total{device=\"eth0\",queue=\"0\"}")
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    let m2 = Arc::clone(&metrics);
    let probe = tokio::spawn(async move {
        let mut last = 0.0;
        let mut drops = 0;
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let v = read(&m2);
            if v < last {
                drops += 1;
            }
            last = v;
        }
        (drops, last)
    });
    exercise(Arc::clone(&metrics), 25).await;
    let (drops, last) = probe.await.unwrap();
    assert_eq!(drops, 0, "a pool counter went backwards");
    // 25 samples of 200 000 pages, across at least two pool generations.
    assert!(last >= 20.0 * 200_000.0, "{last}");
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[tokio::test(flavor = "current_thread")]
async fn a_real_prometheus_scrapes_pptune_and_answers_a_query() {
    let prom = std::path::Path::new("/usr/bin/prometheus");
    if !prom.exists() {
        eprintln!("SKIPPED: /usr/bin/prometheus not installed (Debian package `prometheus`)");
        return;
    }
    let metrics = Arc::new(Metrics::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(pptune::http::serve(listener, Arc::clone(&metrics)));
    // Our endpoint answers with the OpenMetrics content type.
    let m = Arc::clone(&metrics);
    let daemon = tokio::spawn(async move { exercise(m, 40).await });
    let addr2 = addr.clone();
    let resp = tokio::task::spawn_blocking(move || http_get(&addr2, "/metrics"))
        .await
        .unwrap()
        .unwrap();
    assert!(resp.contains("application/openmetrics-text"), "{resp}");

    let dir = tempfile::tempdir().unwrap();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let prom_addr = free.local_addr().unwrap().to_string();
    drop(free);
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pptune\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(prom)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={prom_addr}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("prom.log")).unwrap())
        .spawn()
        .unwrap();
    let query = "/api/v1/query?query=pptune_samples_total%7Bjob%3D%22pptune%22%7D";
    let target_ok = "/api/v1/targets";
    let mut answer = None;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pa = prom_addr.clone();
        let r = tokio::task::spawn_blocking(move || http_get(&pa, query))
            .await
            .unwrap();
        if let Some(body) = r
            && body.contains("\"pptune_samples_total\"")
        {
            answer = Some(body);
            break;
        }
    }
    let pa = prom_addr.clone();
    let targets = tokio::task::spawn_blocking(move || http_get(&pa, target_ok))
        .await
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    daemon.abort();
    let log = std::fs::read_to_string(dir.path().join("prom.log")).unwrap_or_default();
    let body = answer.unwrap_or_else(|| {
        panic!(
            "prometheus never returned pptune_samples_total\ntargets: {targets:?}\nlog tail: {}",
            &log[log.len().saturating_sub(2000)..]
        )
    });
    assert!(body.contains("\"status\":\"success\""), "{body}");
    assert!(body.contains("\"job\":\"pptune\""), "{body}");
    let t = targets.unwrap_or_default();
    assert!(t.contains("\"health\":\"up\""), "{t}");
}

#[test]
fn no_declared_name_doubles_total() {
    let names = family_names();
    assert!(names.iter().all(|n| !n.ends_with("_total_total")));
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
}
