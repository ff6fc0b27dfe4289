//! pptune's metrics: the exposition is strict OpenMetrics, no name ends in
//! `_total_total`, every declared family is emitted with samples after a
//! run that exercises every path, a device that goes takes its series of
//! every family along, and a real Prometheus server scrapes the
//! endpoint under each `daemon.queue_metrics` setting (all, worst, none) and
//! answers queries through its HTTP API.

// Test helpers may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use policy::policy::QueueSelection;
use policy::{Mode, Policy};
use pptune::publish::http::{Limits, serve_with};
use pptune::publish::metrics::{Metrics, family_names};
use pptune::sample::KernelEvent;
use pptune::service::{PolicyEngine, PolicyNotLoaded, PolicySource, run};
use pptune_tests::daemon::{self, Fixed};
use pptune_tests::exposition::prefix_sum;
use pptune_tests::fake::{self, FakeKernel};
use tokio::sync::mpsc;

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
    exercise_with(metrics, secs, QueueSelection::All).await;
}

/// [`exercise`] with `daemon.queue_metrics` set to `series`.
async fn exercise_with(metrics: Arc<Metrics>, secs: u64, series: QueueSelection) {
    exercise_on(Arc::new(FakeKernel::bursty()), metrics, secs, series).await;
}

/// [`exercise_with`] on the fake `k`.
async fn exercise_on(k: Arc<FakeKernel>, metrics: Arc<Metrics>, secs: u64, series: QueueSelection) {
    let mut p = fake::test_policy(Mode::Enforce);
    p.daemon.queue_series = series;
    // A shadow too, so its families are exercised; and a memory budget.
    p.shadow = Some(policy::policy::Shadow {
        path: "/etc/pptune/shadow.yaml".into(),
        policy: Some(Box::new(fake::test_policy(Mode::Enforce))),
    });
    p.budget.per_device_bytes = Some(1 << 40);
    p.budget.per_host_bytes = Some(1 << 41);
    // The reload turns ring management off: the device can no longer be
    // judged (pptune_device_unjudged).
    let mut reloaded = p.clone();
    reloaded.rings.enabled = false;
    let (tx, rx) = mpsc::unbounded_channel();
    let opts = daemon::options("h", metrics, rx);
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
        Box::new(Fixed(reloaded)),
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
        assert!(f.starts_with("pptune_") || f.starts_with("process_"), "{f}");
        assert!(!f.contains("pool_id"), "{f}");
    }
    for want in family_names() {
        // Counter families are declared without `_total`; info without
        // `_info` (a gauge named `…_info`, pptune_device_info, keeps it).
        let fam = if declared.contains_key(want.as_str()) {
            want.as_str()
        } else {
            want.strip_suffix("_total")
                .or_else(|| want.strip_suffix("_info"))
                .unwrap_or(&want)
        };
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

/// A device that goes takes its series of every family along: a family
/// with a `device` label that `Devices::forget`
/// (`daemon/src/publish/metrics/devices.rs`) does not remove fails here.
/// The run is [`exercise`]'s, which sets every family; the device goes
/// near its end.
#[tokio::test(start_paused = true)]
async fn a_vanished_device_leaves_no_series_of_any_family() {
    let metrics = Arc::new(Metrics::new());
    let k = Arc::new(FakeKernel::bursty());
    let (m2, k2) = (Arc::clone(&metrics), Arc::clone(&k));
    let watcher = tokio::spawn(async move {
        let mut with_device = BTreeSet::new();
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let text = m2.encode().unwrap();
            for l in text.lines().filter(|l| l.contains("device=\"eth0\"")) {
                with_device.insert(l.split('{').next().unwrap_or(l).to_owned());
            }
        }
        k2.state.lock().unwrap().gone = true;
        with_device
    });
    exercise_on(k, Arc::clone(&metrics), 30, QueueSelection::All).await;
    let with_device = watcher.await.unwrap();
    // Both kinds of family were there: the registry's and the per-queue
    // ones written by hand.
    for f in ["pptune_device_info", "pptune_pool_alloc_fast_pages_total"] {
        assert!(with_device.contains(f), "{f} not in {with_device:?}");
    }
    let text = metrics.encode().unwrap();
    let left: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("device=\"eth0\""))
        .collect();
    assert!(
        left.is_empty(),
        "series of the vanished eth0 left behind: {left:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn pool_counters_stay_monotonic_across_pool_rebuilds() {
    // Ring changes rebuild the fake's pools (new ids, zero counters): the
    // exported counters must carry the retired pools' values.
    let metrics = Arc::new(Metrics::new());
    let read = |m: &Metrics| -> f64 {
        prefix_sum(
            &m.encode().unwrap(),
            "pptune_pool_alloc_fast_pages_total{device=\"eth0\",queue=\"0\"}",
        )
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

/// Prometheus 3's Accept header.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";

fn http_get(addr: &str, path: &str) -> Option<String> {
    pptune_tests::http::get(addr, path, &[&format!("Accept: {PROMETHEUS_ACCEPT}")])
}

/// What a real Prometheus server stored after scraping a daemon whose
/// policy has `daemon.queue_metrics` = `series`.
struct Scraped {
    /// `pptune_pool_inflight_pages` series (one per exported queue).
    queue_series: u64,
    /// `pptune_device_pool_inflight_pages` series (one per device).
    device_series: u64,
    /// `pptune_device_pool_alloc_fast_pages_total`, summed over the queues.
    device_alloc_fast: u64,
}

/// Runs the daemon on the bursty fake (4 queues, one device) with its
/// `/metrics` endpoint, has `/usr/bin/prometheus` scrape it every second,
/// and asks Prometheus's query API what it stored.
async fn prometheus_scrapes(series: QueueSelection) -> Scraped {
    let metrics = Arc::new(Metrics::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(pptune::publish::http::serve(listener, Arc::clone(&metrics)));
    // Our endpoint answers with the OpenMetrics content type.
    let m = Arc::clone(&metrics);
    let daemon = tokio::spawn(async move { exercise_with(m, 60, series).await });
    let addr2 = addr.clone();
    let resp = tokio::task::spawn_blocking(move || http_get(&addr2, "/metrics"))
        .await
        .unwrap()
        .unwrap();
    assert!(resp.contains("application/openmetrics-text"), "{resp}");

    let prom = std::sync::Arc::new(pptune_tests::http::Prometheus::start(&format!(
        "  - job_name: pptune\n    static_configs:\n      - targets: ['{addr}']\n"
    )));
    let query = |q: &str| {
        let (prom, q) = (std::sync::Arc::clone(&prom), q.to_owned());
        async move {
            tokio::task::spawn_blocking(move || prom.query(&q))
                .await
                .unwrap()
        }
    };
    // Wait for a scrape taken after the daemon has sampled (pools known)
    // and evaluated at least once.
    let mut samples = None;
    for _ in 0..80 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some(body) = query("pptune_samples_total{job=\"pptune\"} > 3").await
            && body.contains("\"pptune_samples_total\"")
        {
            samples = Some(body);
            break;
        }
    }
    let scalar = |body: Option<String>| -> u64 {
        let body = body.unwrap_or_default();
        let v: serde_json::Value =
            serde_json::from_str(body.split("\r\n\r\n").nth(1).unwrap_or(""))
                .unwrap_or_else(|e| panic!("not a query answer ({e}): {body}"));
        assert_eq!(v["status"], "success", "{v}");
        v["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("no scalar in {v}"))
    };
    let got = if samples.is_some() {
        Some(Scraped {
            queue_series: scalar(
                query("count(pptune_pool_inflight_pages{job=\"pptune\"}) or vector(0)").await,
            ),
            device_series: scalar(
                query("count(pptune_device_pool_inflight_pages{job=\"pptune\"}) or vector(0)")
                    .await,
            ),
            device_alloc_fast: scalar(
                query(
                    "sum(pptune_device_pool_alloc_fast_pages_total{job=\"pptune\"}) or vector(0)",
                )
                .await,
            ),
        })
    } else {
        None
    };
    let targets = query("up").await;
    daemon.abort();
    let got = got.unwrap_or_else(|| {
        panic!(
            "prometheus never returned pptune_samples_total > 3\nup: {targets:?}\nlog tail: {}",
            prom.log_tail()
        )
    });
    let samples = samples.unwrap_or_default();
    assert!(samples.contains("\"job\":\"pptune\""), "{samples}");
    got
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs /usr/bin/prometheus (Debian package `prometheus`); run with --include-ignored"]
async fn a_real_prometheus_scrapes_every_queue_with_series_all() {
    let s = prometheus_scrapes(QueueSelection::All).await;
    assert_eq!((s.queue_series, s.device_series), (4, 1));
    assert!(s.device_alloc_fast > 0, "device sum is moving");
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs /usr/bin/prometheus (Debian package `prometheus`); run with --include-ignored"]
async fn a_real_prometheus_scrapes_the_worst_queues_with_series_worst() {
    let s = prometheus_scrapes(QueueSelection::Worst { count: 2 }).await;
    assert_eq!((s.queue_series, s.device_series), (2, 1));
    assert!(s.device_alloc_fast > 0, "device sum is moving");
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs /usr/bin/prometheus (Debian package `prometheus`); run with --include-ignored"]
async fn a_real_prometheus_scrapes_device_sums_only_with_series_none() {
    let s = prometheus_scrapes(QueueSelection::None).await;
    assert_eq!((s.queue_series, s.device_series), (0, 1));
    assert!(s.device_alloc_fast > 0, "device sum is moving");
}

#[test]
fn no_declared_name_doubles_total() {
    let names = family_names();
    assert!(names.iter().all(|n| !n.ends_with("_total_total")));
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
}

/// One HTTP/1.1 response read off a (possibly kept-alive) connection.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends `head` (a request without its final blank line) and reads the
/// response; `head_only` for HEAD (no body follows the headers).
fn exchange(s: &mut TcpStream, head: &str, head_only: bool) -> std::io::Result<Resp> {
    s.write_all(format!("{head}\r\n\r\n").as_bytes())?;
    read_response(s, head_only)
}

fn read_response(s: &mut TcpStream, head_only: bool) -> std::io::Result<Resp> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; if head_only { 0 } else { len }];
    s.read_exact(&mut body)?;
    Ok(Resp {
        status,
        headers,
        body,
    })
}

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn gunzip(data: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(data)
        .read_to_string(&mut out)
        .unwrap();
    out
}

/// `promtool check metrics` on `text` (stdin); returns its verdict.
fn promtool_check_metrics(text: &str) -> (bool, String) {
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("promtool (Debian package `prometheus`; tests/run-all.sh installs it): {e}")
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Serves `metrics` on a loopback port with `limits`, on the test's runtime.
async fn start_server(metrics: Arc<Metrics>, limits: Limits) -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(serve_with(l, metrics, limits));
    addr
}

/// Runs `f` (blocking client code) off the runtime that serves.
async fn client<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs promtool (Debian package `prometheus`); run with --include-ignored"]
async fn metrics_endpoint_negotiates_format_and_gzip_and_keeps_alive() {
    let metrics = Arc::new(Metrics::new());
    // A populated registry: run the loop (paused time is not available on
    // this runtime; 3 s of real time on the fake is enough for samples).
    {
        let m = Arc::clone(&metrics);
        tokio::time::timeout(Duration::from_secs(60), exercise(m, 3))
            .await
            .unwrap();
    }
    let addr = start_server(Arc::clone(&metrics), Limits::default()).await;
    client(move || {
        let mut s = connect(addr);
        // No Accept: the 0.0.4 text format, which promtool accepts.
        let text = exchange(&mut s, "GET /metrics HTTP/1.1\r\nHost: x", false).unwrap();
        assert_eq!(text.status, 200);
        assert_eq!(
            text.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        assert_eq!(text.header("content-encoding"), None);
        let body = text.text();
        assert!(!body.contains("# EOF") && !body.contains("# UNIT"), "{body}");
        assert!(body.contains("# TYPE pptune_samples_total counter\n"), "{body}");
        assert!(body.contains("# TYPE pptune_build_info gauge\n"), "{body}");
        assert!(body.contains("process_resident_memory_bytes "), "{body}");
        let (ok, why) = promtool_check_metrics(&body);
        assert!(ok, "promtool check metrics rejected the text form:\n{why}");
        // Same connection (keep-alive): OpenMetrics for Prometheus' Accept.
        let om = exchange(
            &mut s,
            &format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {PROMETHEUS_ACCEPT}"),
            false,
        )
        .unwrap();
        assert_eq!(om.status, 200);
        assert_eq!(om.header("content-type"), Some(pptune::publish::http::OPENMETRICS));
        let om_body = om.text();
        parse_openmetrics(&om_body).unwrap_or_else(|e| panic!("{e}\n{om_body}"));
        assert!(om_body.contains("pptune_build_info{version=\""), "{om_body}");
        assert!(om_body.contains(",revision=\""), "{om_body}");
        // gzip when accepted; the same exposition once decoded.
        let gz = exchange(
            &mut s,
            &format!(
                "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {PROMETHEUS_ACCEPT}\r\nAccept-Encoding: gzip"
            ),
            false,
        )
        .unwrap();
        assert_eq!(gz.header("content-encoding"), Some("gzip"));
        assert!(gz.header("vary").unwrap().contains("Accept-Encoding"));
        let decoded = gunzip(&gz.body);
        parse_openmetrics(&decoded).unwrap_or_else(|e| panic!("{e}\n{decoded}"));
        assert!(gz.body.len() * 3 < decoded.len(), "gzip did not compress");
        // HEAD: the headers of a GET, no body.
        let head = exchange(&mut s, "HEAD /metrics HTTP/1.1\r\nHost: x", true).unwrap();
        assert_eq!(head.status, 200);
        let len: usize = head.header("content-length").unwrap().parse().unwrap();
        assert!(len > 1000, "{len}");
        // Other methods: 405 with Allow; unknown paths: 404.
        let post = exchange(
            &mut s,
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0",
            false,
        )
        .unwrap();
        assert_eq!(post.status, 405);
        assert_eq!(post.header("allow"), Some("GET, HEAD"));
        let nf = exchange(&mut s, "GET /nope HTTP/1.1\r\nHost: x", false).unwrap();
        assert_eq!(nf.status, 404);
        // Still the same connection after six requests.
        let hz = exchange(&mut s, "GET /healthz HTTP/1.1\r\nHost: x", false).unwrap();
        assert_eq!(hz.status, 200);
        assert_eq!(hz.text(), "{\"status\":\"ok\"}\n");
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn oversized_and_slow_requests_are_cut_off_and_connections_are_bounded() {
    let limits = Limits {
        max_connections: 3,
        header_read_timeout: Duration::from_millis(800),
        max_request_bytes: 8192,
        connection_lifetime: Duration::from_secs(60),
        idle_grace: Duration::from_millis(100),
        response_deadline: Duration::from_secs(10),
    };
    let addr = start_server(Arc::new(Metrics::new()), limits).await;
    client(move || {
        // A request head beyond the bound: 431, then the connection closes.
        let mut s = connect(addr);
        let big = format!(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: {}",
            "a".repeat(20_000)
        );
        let _ = s.write_all(format!("{big}\r\n\r\n").as_bytes());
        match read_response(&mut s, false) {
            Ok(r) => assert_eq!(r.status, 431, "{r:?}"),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                ),
                "{e}"
            ),
        }
        // Three slow clients take every slot, each sending half a request.
        let t0 = tokio::time::Instant::now();
        let mut slow: Vec<TcpStream> = (0..3)
            .map(|_| {
                let mut s = connect(addr);
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost:").unwrap();
                s
            })
            .collect();
        // A fourth client is served at once: it evicts the first of them,
        // which no request of its own holds (http/admission.rs).
        let mut s = connect(addr);
        let r = exchange(&mut s, "GET /healthz HTTP/1.1\r\nHost: x", false).unwrap();
        let waited = t0.elapsed();
        assert_eq!(r.status, 200);
        assert!(waited < Duration::from_millis(500), "{waited:?}");
        // The evicted one is closed without a reply; the others by the
        // header timeout (408).
        let mut b = [0u8; 256];
        assert_eq!(
            slow[0].read(&mut b).unwrap_or(0),
            0,
            "evicted, not answered"
        );
        for c in &mut slow[1..] {
            let n = c.read(&mut b).unwrap_or(0);
            let got = String::from_utf8_lossy(&b[..n]).into_owned();
            assert!(n == 0 || got.starts_with("HTTP/1.1 408"), "{got:?}");
        }
        assert!(
            t0.elapsed() >= Duration::from_millis(700),
            "{:?}",
            t0.elapsed()
        );
        // An idle keep-alive connection is closed after the same timeout.
        let mut idle = connect(addr);
        let r = exchange(&mut idle, "GET /healthz HTTP/1.1\r\nHost: x", false).unwrap();
        assert_eq!(r.status, 200);
        let mut b = [0u8; 16];
        assert_eq!(
            idle.read(&mut b).unwrap_or(0),
            0,
            "idle connection kept open"
        );
    })
    .await;
}

/// Admission cannot starve the probes: an unprivileged
/// local user holds 200 idle connections, 40 that trickle a request head a
/// byte at a time, and opens a new idle one every 2 ms throughout; a
/// `/healthz` probe with the shipped liveness probe's 5 s timeout is
/// answered every time, each within a second. The table is cut to 64
/// connections (the default's rule, the cap the landed server had), so
/// that the flood fills it many times over within this test's descriptors;
/// before the rule every probe timed out: the slots were held and the
/// probe waited in the listen backlog.
#[tokio::test(flavor = "current_thread")]
async fn idle_and_trickling_clients_cannot_starve_the_probes() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let limits = Limits {
        max_connections: 64,
        ..Limits::default()
    };
    let addr = start_server(Arc::new(Metrics::new()), limits).await;
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut held: std::collections::VecDeque<TcpStream> = (0..200)
                .map(|_| TcpStream::connect(addr).unwrap())
                .collect();
            let mut trickle: Vec<TcpStream> =
                (0..40).map(|_| TcpStream::connect(addr).unwrap()).collect();
            let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            let mut at = 0usize;
            let mut opened = 240usize;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(2));
                if let Ok(c) = TcpStream::connect(addr) {
                    held.push_back(c);
                    opened += 1;
                }
                // At most 400 open on this side (the test's fd limit).
                if held.len() > 360 {
                    held.pop_front();
                }
                if at.is_multiple_of(50) {
                    for c in &mut trickle {
                        let _ = c.write_all(&head[(at / 50) % head.len()..][..1]);
                    }
                }
                at += 1;
            }
            opened
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let worst = client(move || {
        let mut worst = Duration::ZERO;
        for i in 0..20 {
            let t = tokio::time::Instant::now();
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                .unwrap_or_else(|e| panic!("probe {i}: not connected within 5 s: {e}"));
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let r = exchange(&mut s, "GET /healthz HTTP/1.1\r\nHost: x", false)
                .unwrap_or_else(|e| panic!("probe {i}: no answer within 5 s: {e}"));
            assert_eq!(r.status, 200, "probe {i}");
            worst = worst.max(t.elapsed());
            std::thread::sleep(Duration::from_millis(200));
        }
        worst
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let opened = client(move || attacker.join().unwrap()).await;
    println!(
        "MEASURE admission probes=20 worst_ms={} attacker_connections={opened}",
        worst.as_millis()
    );
    assert!(worst < Duration::from_secs(1), "slowest probe {worst:?}");
}

/// A running daemon on a fake kernel, served over HTTP.
struct Served {
    addr: std::net::SocketAddr,
    kernel: Arc<FakeKernel>,
    daemon: tokio::task::JoinHandle<()>,
    reload: mpsc::UnboundedSender<()>,
}

async fn serve_daemon(policy: Policy, next: Arc<std::sync::Mutex<Policy>>) -> Served {
    struct Shared(Arc<std::sync::Mutex<Policy>>);
    impl PolicySource for Shared {
        fn load(&self) -> Result<Policy, PolicyNotLoaded> {
            let p = self.0.lock().unwrap().clone();
            if p.timing.interval.is_zero() {
                return Err(PolicyNotLoaded("timing.interval: must be positive".into()));
            }
            Ok(p)
        }
    }
    let metrics = Arc::new(Metrics::new());
    let addr = start_server(Arc::clone(&metrics), Limits::default()).await;
    let kernel = Arc::new(FakeKernel::bursty());
    let (tx, rx) = mpsc::unbounded_channel();
    let opts = daemon::options("h", metrics, rx);
    let k = Arc::clone(&kernel);
    let daemon = tokio::spawn(async move {
        run(
            k,
            PolicyEngine::default(),
            Box::new(Shared(next)),
            policy,
            opts,
            std::future::pending(),
        )
        .await
        .unwrap();
    });
    Served {
        addr,
        kernel,
        daemon,
        reload: tx,
    }
}

async fn readyz(addr: std::net::SocketAddr) -> (u16, serde_json::Value) {
    client(move || {
        let mut s = connect(addr);
        let r = exchange(&mut s, "GET /readyz HTTP/1.1\r\nHost: x", false).unwrap();
        assert_eq!(r.header("content-type"), Some("application/json"));
        (r.status, serde_json::from_slice(&r.body).unwrap())
    })
    .await
}

/// Polls `/readyz` until its status is `want` (or 10 s pass).
async fn readyz_until(addr: std::net::SocketAddr, want: u16) -> (serde_json::Value, Duration) {
    let t0 = tokio::time::Instant::now();
    loop {
        let (status, body) = readyz(addr).await;
        if status == want {
            return (body, t0.elapsed());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "/readyz stayed {status}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn readiness_fails_while_sampling_hangs_and_while_the_policy_is_invalid() {
    let mut policy = fake::test_policy(Mode::Observe);
    policy.timing.interval = Duration::from_millis(200);
    let next = Arc::new(std::sync::Mutex::new(policy.clone()));
    let served = serve_daemon(policy.clone(), Arc::clone(&next)).await;
    let addr = served.addr;
    // Ready once the first sample is in.
    let (body, _) = readyz_until(addr, 200).await;
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["reasons"], serde_json::json!([]), "{body}");
    // The kernel stops answering: unready within two intervals (plus the
    // poll period), saying why.
    served.kernel.state.lock().unwrap().hang_sampling = true;
    let (body, after) = readyz_until(addr, 503).await;
    assert!(after < Duration::from_millis(1500), "{after:?}");
    assert_eq!(body["ready"], false, "{body}");
    let why = body["reasons"][0].as_str().unwrap();
    assert!(why.contains("last successful sample is"), "{body}");
    // /healthz is the process, not the loop: still 200.
    assert_eq!(get_status(addr, "/healthz").await.0, 200);
    // Sampling recovers: ready again.
    served.kernel.state.lock().unwrap().hang_sampling = false;
    readyz_until(addr, 200).await;
    // An invalid policy reload: unready, with the reason.
    next.lock().unwrap().timing.interval = Duration::ZERO;
    served.reload.send(()).unwrap();
    let (body, _) = readyz_until(addr, 503).await;
    assert_eq!(body["policy_valid"], false, "{body}");
    assert!(
        body["reasons"][0]
            .as_str()
            .unwrap()
            .contains("timing.interval: must be positive"),
        "{body}"
    );
    // A valid one again: ready.
    *next.lock().unwrap() = policy;
    served.reload.send(()).unwrap();
    readyz_until(addr, 200).await;
    served.daemon.abort();
}

/// A loop stopped by the test hook (every sample blocks, as on a wedged
/// netlink socket) fails `/livez` within the liveness deadline, the
/// watchdog's rule, while `/healthz` (the process) still answers; the loop
/// back, `/livez` passes again.
#[tokio::test(flavor = "current_thread")]
async fn livez_fails_when_the_loop_stops_passing() {
    use pptune::publish::health::LOOP_DEADLINE;
    let livez = |addr| get_status(addr, "/livez");
    let mut policy = fake::test_policy(Mode::Observe);
    policy.timing.interval = Duration::from_millis(200);
    let next = Arc::new(std::sync::Mutex::new(policy.clone()));
    let served = serve_daemon(policy, next).await;
    let addr = served.addr;
    readyz_until(addr, 200).await;
    assert_eq!(livez(addr).await.0, 200);
    served.kernel.state.lock().unwrap().hang_sampling = true;
    let t0 = tokio::time::Instant::now();
    let body = loop {
        let (status, body) = livez(addr).await;
        if status == 503 {
            break body;
        }
        assert!(
            t0.elapsed() < LOOP_DEADLINE + Duration::from_secs(3),
            "/livez still {status} after {:?}: {body}",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        t0.elapsed() >= LOOP_DEADLINE - Duration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
    assert!(body.contains("\"alive\":false"), "{body}");
    assert_eq!(get_status(addr, "/healthz").await.0, 200);
    served.kernel.state.lock().unwrap().hang_sampling = false;
    readyz_until(addr, 200).await;
    assert_eq!(livez(addr).await.0, 200);
    served.daemon.abort();
}

/// The exposition once it holds `needle` (the loop's first passes), or
/// as it is after 5 s.
async fn exposition_with(metrics: &Metrics, needle: &str) -> String {
    let mut text = String::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        text = metrics.encode().unwrap();
        if text.contains(needle) {
            break;
        }
    }
    text
}

/// What right-sizing could reclaim is exported per selected device, the
/// bytes of `policy::engine::reclaimable` (what `plan` and `status`
/// print): the fake's ring set to its max of 8192 while its pools had no
/// more than 600 pages out beyond it.
#[tokio::test(flavor = "current_thread")]
async fn the_reclaimable_memory_is_exported() {
    use pptune::sample::{Kernel, SampleScope};
    let mut policy = fake::test_policy(Mode::Observe);
    policy.timing.interval = Duration::from_millis(200);
    let kernel = Arc::new(FakeKernel::bursty());
    {
        let mut s = kernel.state.lock().unwrap();
        s.ring = 8192;
        s.inflight = Some(8192 + 600);
    }
    let snap = kernel.sample(&SampleScope::default()).await.unwrap();
    let want = policy::engine::reclaimable(&policy, &snap.devices[0])
        .unwrap()
        .bytes;
    assert!(want > 0);
    let running = pptune_tests::daemon::start(&kernel, policy, None, None);
    let text = exposition_with(&running.metrics, "pptune_device_reclaimable_bytes{").await;
    assert!(
        text.contains(&format!(
            "pptune_device_reclaimable_bytes{{device=\"eth0\"}} {want}\n"
        )),
        "{text}"
    );
    running.stop().await.unwrap();
}

/// The ring cost estimate the memory budget gates on is exported per
/// selected device beside its observed inflight bytes, with the budget;
/// the fake's device at ring 256 costs what `policy::engine::
/// current_device_bytes` says, in the daemon's view too.
#[tokio::test(flavor = "current_thread")]
async fn the_ring_cost_estimate_and_its_budget_are_exported() {
    use pptune::sample::{Kernel, SampleScope};
    let dir = tempfile::tempdir().unwrap();
    let sock = pptune::publish::control::socket_path(dir.path());
    let mut policy = fake::test_policy(Mode::Observe);
    policy.timing.interval = Duration::from_millis(200);
    policy.budget.per_device_bytes = Some(64 << 20);
    policy.budget.per_host_bytes = None;
    let kernel = Arc::new(FakeKernel::bursty());
    let running = pptune_tests::daemon::start(&kernel, policy, None, Some(sock.clone()));
    let snap = kernel.sample(&SampleScope::default()).await.unwrap();
    let want = policy::engine::current_device_bytes(&snap.devices[0]).unwrap();
    assert!(want > 0);
    let text = exposition_with(&running.metrics, "pptune_device_ring_cost_estimate_bytes{").await;
    assert!(
        text.contains(&format!(
            "pptune_device_ring_cost_estimate_bytes{{device=\"eth0\"}} {want}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("pptune_device_pool_inflight_bytes{device=\"eth0\"}"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "pptune_memory_budget_bytes{{scope=\"device\"}} {}\n",
            64 << 20
        )),
        "{text}"
    );
    assert!(!text.contains("scope=\"host\""), "{text}");
    let view = pptune::publish::control::query(&sock).await.unwrap();
    assert_eq!(view.devices[0].ring_cost_bytes, Some(want));
    let words = pptune::publish::view::render(Some(&view), &[]);
    assert!(
        words.contains(&format!(
            "ring cost estimate: {} (budget 64.0 MiB per device)",
            pptune::human::bytes(want)
        )),
        "{words}"
    );
    running.stop().await.unwrap();
}

/// `GET path` of `addr`: the status and the body.
async fn get_status(addr: std::net::SocketAddr, path: &'static str) -> (u16, String) {
    client(move || {
        let mut s = connect(addr);
        let r = exchange(&mut s, &format!("GET {path} HTTP/1.1\r\nHost: x"), false).unwrap();
        (r.status, String::from_utf8(r.body).unwrap())
    })
    .await
}

/// `/metrics` of `addr`, the body.
async fn metrics_text(addr: std::net::SocketAddr) -> String {
    get_status(addr, "/metrics").await.1
}

/// The `pptune_policy_info` lines and the load time of `text`.
fn policy_series(text: &str) -> (Vec<String>, f64) {
    let info = text
        .lines()
        .filter(|l| l.starts_with("pptune_policy_info{"))
        .map(str::to_owned)
        .collect();
    let at = text
        .lines()
        .find_map(|l| l.strip_prefix("pptune_policy_loaded_timestamp_seconds "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    (info, at)
}

/// Which policy runs, as its content hash: one `pptune_policy_info`
/// series with the policy's hash (and its shadow's), replaced when a
/// reload brings another policy, with the time of that load; an invalid
/// reload leaves both as they were.
#[tokio::test(flavor = "current_thread")]
async fn the_policy_hash_and_load_time_follow_each_reload() {
    use pptune::publish::policy_hash::hash;
    let mut policy = fake::test_policy(Mode::Observe);
    policy.timing.interval = Duration::from_millis(200);
    let next = Arc::new(std::sync::Mutex::new(policy.clone()));
    let served = serve_daemon(policy.clone(), Arc::clone(&next)).await;
    readyz_until(served.addr, 200).await;
    let (info, t0) = policy_series(&metrics_text(served.addr).await);
    assert_eq!(
        info,
        [format!(
            "pptune_policy_info{{hash=\"{}\",shadow_hash=\"\"}} 1",
            hash(&policy)
        )]
    );
    assert!(t0 > 1.7e9, "{t0}");
    // Another policy, with a shadow.
    let mut other = policy.clone();
    other.rings.max = 2048;
    let mut shadow = policy.clone();
    shadow.rings.max = 1024;
    other.shadow = Some(policy::policy::Shadow {
        path: "/etc/pptune/shadow.yaml".into(),
        policy: Some(Box::new(shadow.clone())),
    });
    *next.lock().unwrap() = other.clone();
    tokio::time::sleep(Duration::from_millis(20)).await;
    served.reload.send(()).unwrap();
    let want = format!(
        "pptune_policy_info{{hash=\"{}\",shadow_hash=\"{}\"}} 1",
        hash(&other),
        hash(&shadow)
    );
    let t = tokio::time::Instant::now();
    let (info, t1) = loop {
        let got = policy_series(&metrics_text(served.addr).await);
        if got.0 == [want.clone()] || t.elapsed() > Duration::from_secs(10) {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(info, std::slice::from_ref(&want));
    assert_ne!(hash(&other), hash(&policy));
    assert!(t1 > t0, "{t0} -> {t1}");
    // An invalid one: the policy in force, and its series, stay.
    next.lock().unwrap().timing.interval = Duration::ZERO;
    served.reload.send(()).unwrap();
    readyz_until(served.addr, 503).await;
    assert_eq!(
        policy_series(&metrics_text(served.addr).await),
        (vec![want], t1)
    );
    served.daemon.abort();
}

/// A policy load that does not finish (a wedged file system; before the
/// linear matcher, a glob that backtracked) ran on the loop's own thread:
/// `/healthz` and signals stopped with it and only the watchdog ended it;
/// later it ran on a blocking thread but the loop waited for it, so
/// sampling stopped for up to the deadline. Now the loop goes on with the
/// last good policy while the load runs: `/healthz` answers at once, the
/// samples go on (`/readyz` stays ready), after `RELOAD_DEADLINE` the
/// reload is refused ("did not finish"); a reload asked while that load is
/// stuck is refused at once (one stuck thread at most); once it returns,
/// its result is dropped and the next reload loads again.
#[tokio::test(flavor = "current_thread")]
async fn a_policy_load_that_hangs_stops_neither_healthz_nor_the_loop() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    struct Hangs(Policy, Arc<AtomicBool>, Arc<AtomicUsize>);
    impl PolicySource for Hangs {
        fn load(&self) -> Result<Policy, PolicyNotLoaded> {
            self.2.fetch_add(1, Ordering::Relaxed);
            while self.1.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(self.0.clone())
        }
    }
    let mut policy = fake::test_policy(Mode::Observe);
    policy.timing.interval = Duration::from_millis(200);
    let hang = Arc::new(AtomicBool::new(false));
    let loads = Arc::new(AtomicUsize::new(0));
    let metrics = Arc::new(Metrics::new());
    let addr = start_server(Arc::clone(&metrics), Limits::default()).await;
    let (tx, rx) = mpsc::unbounded_channel();
    let opts = daemon::options("h", Arc::clone(&metrics), rx);
    let source = Hangs(policy.clone(), Arc::clone(&hang), Arc::clone(&loads));
    let daemon = tokio::spawn(run(
        Arc::new(FakeKernel::bursty()),
        PolicyEngine::default(),
        Box::new(source),
        policy,
        opts,
        std::future::pending(),
    ));
    readyz_until(addr, 200).await;
    // Released however the test ends: the runtime waits for the blocking
    // load when it shuts down.
    struct Release(Arc<AtomicBool>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Relaxed);
        }
    }
    let _release = Release(Arc::clone(&hang));
    let samples = |m: &Metrics| prefix_sum(&m.encode().unwrap(), "pptune_samples_total ");
    hang.store(true, Ordering::Relaxed);
    tx.send(()).unwrap();
    let t0 = tokio::time::Instant::now();
    let s0 = samples(&metrics);
    let healthz = || {
        client(move || {
            let t = tokio::time::Instant::now();
            let mut s = connect(addr);
            let status = exchange(&mut s, "GET /healthz HTTP/1.1\r\nHost: x", false)
                .unwrap()
                .status;
            (status, t.elapsed())
        })
    };
    // While the load hangs: every probe answered, each well within a
    // liveness probe's timeout, and the loop samples on (ready).
    let mut slowest = Duration::ZERO;
    while t0.elapsed() < pptune::service::RELOAD_DEADLINE - Duration::from_secs(2) {
        let (status, took) = healthz().await;
        assert_eq!(status, 200);
        slowest = slowest.max(took);
        let (status, body) = readyz(addr).await;
        assert_eq!(status, 200, "while the load runs: {body}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        slowest < Duration::from_secs(1),
        "slowest /healthz {slowest:?}"
    );
    let sampled = samples(&metrics) - s0;
    let at_200ms = t0.elapsed().as_secs_f64() / 0.2;
    assert!(
        sampled >= at_200ms / 2.0,
        "{sampled} samples in {:?} while the load ran",
        t0.elapsed()
    );
    // Past the deadline: the reload is refused, the last good policy goes
    // on.
    let unready = |expect: &'static str| async move {
        loop {
            let (status, body) = readyz(addr).await;
            if body["reasons"][0]
                .as_str()
                .is_some_and(|r| r.contains(expect))
            {
                assert_eq!(status, 503);
                assert_eq!(body["policy_valid"], false, "{body}");
                return;
            }
            assert!(
                t0.elapsed() < pptune::service::RELOAD_DEADLINE + Duration::from_secs(5),
                "/readyz stayed {status}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    unready("did not finish in 10 s").await;
    let before = samples(&metrics);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(samples(&metrics) > before, "the loop samples on");
    // A reload while the late load is stuck: refused at once, no second
    // thread.
    tx.send(()).unwrap();
    unready("has not returned").await;
    assert_eq!(loads.load(Ordering::Relaxed), 1);
    // The stuck load returns; its result is dropped (still unready), and
    // the next reload loads and is taken.
    hang.store(false, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, _) = readyz(addr).await;
    assert_eq!(status, 503, "a late load's result is dropped");
    tx.send(()).unwrap();
    readyz_until(addr, 200).await;
    assert_eq!(loads.load(Ordering::Relaxed), 2);
    daemon.abort();
}

/// Scrape-storm figures (BENCHMARKS.md §5).
#[derive(Debug, Default)]
struct Storm {
    answered: usize,
    failed: Vec<String>,
    slow_reconnects: usize,
}

/// 500 concurrent gzip scrapes (Prometheus' headers), twice, while 50 slow
/// clients keep connections open by trickling a request head one byte at a
/// time and reconnecting when cut off. Runs on its own thread and runtime.
fn storm(addr: std::net::SocketAddr, stop: Arc<std::sync::atomic::AtomicBool>) -> Storm {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut slow = Vec::new();
        for _ in 0..50 {
            let stop = Arc::clone(&stop);
            slow.push(tokio::spawn(async move {
                let mut reconnects = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
                        continue;
                    };
                    reconnects += 1;
                    for b in b"GET /metrics HTTP/1.1\r\nHost: slow\r\nX-Slow: " {
                        if s.write_all(&[*b]).await.is_err()
                            || stop.load(std::sync::atomic::Ordering::Relaxed)
                        {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                }
                reconnects
            }));
        }
        // Let the slow clients take their slots first.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut out = Storm::default();
        for _round in 0..2 {
            let scrapes: Vec<_> = (0..500)
                .map(|_| {
                    tokio::spawn(async move {
                        let mut s = tokio::net::TcpStream::connect(addr)
                            .await
                            .map_err(|e| e.to_string())?;
                        s.write_all(
                            format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {PROMETHEUS_ACCEPT}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n").as_bytes(),
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                        let mut buf = Vec::new();
                        tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut buf))
                            .await
                            .map_err(|_| "no answer in 60 s".to_owned())?
                            .map_err(|e| e.to_string())?;
                        let head_end = buf
                            .windows(4)
                            .position(|w| w == b"\r\n\r\n")
                            .ok_or("no response head")?;
                        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                            .and_then(|v| v.parse().ok())
                            .ok_or("no content-length")?;
                        if !head.starts_with("HTTP/1.1 200") || buf.len() - head_end - 4 != len {
                            return Err(format!("bad answer: {head}"));
                        }
                        let body = gunzip(&buf[head_end + 4..]);
                        if !body.ends_with("# EOF\n") {
                            return Err("truncated exposition".to_owned());
                        }
                        Ok::<(), String>(())
                    })
                })
                .collect();
            for s in scrapes {
                match s.await.unwrap() {
                    Ok(()) => out.answered += 1,
                    Err(e) => out.failed.push(e),
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in slow {
            out.slow_reconnects += s.await.unwrap_or(0);
        }
        out
    })
}

#[tokio::test(flavor = "current_thread")]
#[allow(clippy::cast_precision_loss)] // MiB for a report line
async fn the_loop_keeps_its_interval_under_a_scrape_storm() {
    // The daemon as it runs (one thread for the loop and the server),
    // 2048 queues, the fleet setting (4 worst queues per device).
    let mut policy = fake::test_policy(Mode::Observe);
    let interval = Duration::from_secs(1);
    policy.timing.interval = interval;
    policy.daemon.queue_series = policy::policy::QueueSelection::Worst { count: 4 };
    let metrics = Arc::new(Metrics::new());
    let addr = start_server(Arc::clone(&metrics), Limits::default()).await;
    let kernel = Arc::new(FakeKernel::bursty());
    {
        let mut s = kernel.state.lock().unwrap();
        s.combined = 2048;
        s.combined_max = 2048;
        s.pools = vec![policy::snapshot::PoolStats::default(); 2048];
        s.pool_ids = (1..=2048).collect();
        s.next_pool_id = 2049;
    }
    let (_tx, rx) = mpsc::unbounded_channel();
    let opts = daemon::options("h", Arc::clone(&metrics), rx);
    let p = policy.clone();
    let daemon = tokio::spawn(run(
        kernel,
        PolicyEngine::default(),
        Box::new(Fixed(p.clone())),
        p,
        opts,
        std::future::pending(),
    ));
    readyz_until(addr, 200).await;
    let rss_before = pptune::publish::process_metrics::ProcessFigures::read()
        .resident_bytes
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let t0 = tokio::time::Instant::now();
    let storm = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || storm(addr, stop))
    };
    // Watch the loop from inside: the age of the last successful sample.
    let (mut max_age, mut peak_rss) = (0f64, rss_before);
    while !storm.is_finished() {
        let r = metrics.health.readiness();
        max_age = max_age.max(r.last_sample_age_seconds.unwrap_or(f64::MAX));
        peak_rss = peak_rss.max(
            pptune::publish::process_metrics::ProcessFigures::read()
                .resident_bytes
                .unwrap_or(0),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wall = t0.elapsed();
    let storm = storm.join().unwrap();
    daemon.abort();
    eprintln!(
        "scrape storm: {} of 1000 scrapes answered in {:.1} s, {} slow-client connections, \
         max sample age {max_age:.3} s (interval {:.1} s), RSS {:.1} MiB before, {:.1} MiB peak",
        storm.answered,
        wall.as_secs_f64(),
        storm.slow_reconnects,
        interval.as_secs_f64(),
        rss_before as f64 / 1048576.0,
        peak_rss as f64 / 1048576.0,
    );
    assert!(
        storm.failed.is_empty(),
        "failed scrapes: {:?}",
        &storm.failed[..storm.failed.len().min(5)]
    );
    assert_eq!(storm.answered, 1000);
    assert!(
        max_age <= 2.0 * interval.as_secs_f64(),
        "the loop fell behind: a sample {max_age:.3} s old"
    );
    // Bounded: the server holds at most its cap of connections and one
    // render.
    assert!(
        peak_rss < rss_before + (256 << 20),
        "RSS grew to {peak_rss}"
    );
}
