//! Unauthenticated work is bounded: a flood of requests with wrong
//! passwords, and of TLS handshakes that stall, against pptune's own
//! server (`serve_secured`) on loopback under a web config with basic
//! auth. Its own test binary: the thread count measured is this process's,
//! and its tests take turns (`ONE_FLOOD`), so one flood's threads never
//! count against the other's bound.
//!
//! `PPTUNE_FLOOD_REPORT=1 cargo test -p pptune-tests --test
//! daemon_metrics_flood -- --nocapture` prints the figures (RELIABILITY.md).
//!
//! A binary of its own: it floods the host, and the timing tests beside it
//! in a shared binary would be judged under its load.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use pptune::publish::http::{Limits, Web, serve_secured};
use pptune::publish::metrics::Metrics;
use pptune_tests::http::web_config;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

/// Held by each test for its whole run: the libtest harness runs a
/// binary's tests on threads of one process, and each test bounds the
/// process's thread count.
static ONE_FLOOD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

fn cpu_ticks() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = s.rsplit_once(')').unwrap().1.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

async fn serve(web: &Path, limits: Limits) -> SocketAddr {
    let listener = pptune::publish::http::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_secured(
        listener,
        Arc::new(Metrics::new()),
        limits,
        Some(Arc::new(Web::load(web).unwrap())),
    ));
    addr
}

/// One plain HTTP/1.1 request on a new connection; the status code, or 0.
async fn get(addr: SocketAddr, path: &str, user: &str, password: &str) -> u16 {
    let cred = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {cred}\r\nConnection: close\r\n\r\n"
    );
    let go = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        std::str::from_utf8(buf.get(9..12)?).ok()?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(30), go)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// The first flight of a rustls client: one whole ClientHello record.
fn client_hello() -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let mut c =
        rustls::ClientConnection::new(Arc::new(config), "127.0.0.1".try_into().unwrap()).unwrap();
    let mut out = Vec::new();
    c.write_tls(&mut out).unwrap();
    assert_eq!(out[0], 0x16, "a handshake record");
    out
}

fn report(line: &str) {
    if std::env::var_os("PPTUNE_FLOOD_REPORT").is_some() {
        println!("MEASURE {line}");
    }
}

/// 600 requests at once with a user that does not exist (each a bcrypt
/// check at cost 10): every one started its own check on the blocking
/// pool, 513 threads and ~150 CPU-seconds for 3,000; one check at a time
/// through a semaphore on that pool still grew 3 threads to 7 on a loaded
/// host. Now the checks run on one thread of their own: the process gains
/// no thread but the sampler's, the rest are answered 503 at once, and
/// `/healthz` with credentials that verified before answers within 1 s
/// throughout.
#[tokio::test(flavor = "current_thread")]
async fn wrong_passwords_cost_one_check_at_a_time_and_the_probes_answer() {
    let _turn = ONE_FLOOD.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let web = web_config(dir.path(), false, &[("prom", "s3cret")]);
    let addr = serve(&web, Limits::default()).await;
    assert_eq!(get(addr, "/healthz", "prom", "s3cret").await, 200);
    // Let the blocking pool settle to what an idle server keeps.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = threads();
    let cpu0 = cpu_ticks();
    let t0 = Instant::now();
    let most = Arc::new(AtomicUsize::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let (m, d) = (Arc::clone(&most), Arc::clone(&done));
    let sampler = std::thread::spawn(move || {
        while !d.load(Ordering::Acquire) {
            m.fetch_max(threads(), Ordering::AcqRel);
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let flood: Vec<_> = (0..600)
        .map(|i| {
            tokio::spawn(async move { get(addr, "/metrics", &format!("nobody{i}"), "x").await })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let t = Instant::now();
        let code = get(addr, "/healthz", "prom", "s3cret").await;
        slowest = slowest.max(t.elapsed());
        assert_eq!(code, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut codes = std::collections::BTreeMap::new();
    for f in flood {
        *codes.entry(f.await.unwrap()).or_insert(0) += 1;
    }
    done.store(true, Ordering::Release);
    sampler.join().unwrap();
    let cpu = cpu_ticks() - cpu0;
    let most = most.load(Ordering::Acquire);
    report(&format!(
        "wrong-password flood: 600 requests, threads {before} -> max {most}, CPU {:.2} s over {:.2} s, slowest /healthz {slowest:?}, answers {codes:?}",
        Duration::from_millis(cpu * 10).as_secs_f64(),
        t0.elapsed().as_secs_f64()
    ));
    // The sampler thread: the checks' thread and the web config's ran
    // the first /healthz, before the count began.
    assert!(most <= before + 1, "threads {before} -> {most}");
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    assert!(codes.keys().all(|c| [401, 503].contains(c)), "{codes:?}");
}

/// 200 connections that open a TLS handshake and stall, against a table
/// of 64: each kept its slot for the 5 s handshake timeout, and probes
/// waited 1-4 s behind them. A handshake is now under admission's
/// eviction like an idle connection: every probe answers within 1 s.
/// Half the holders stall after half a record header, half after a whole
/// ClientHello (which earns a fresh grace, not a slot held).
#[tokio::test(flavor = "current_thread")]
async fn stalled_tls_handshakes_are_evicted_and_the_probes_answer() {
    let _turn = ONE_FLOOD.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let web = web_config(d, true, &[("prom", "s3cret")]);
    let addr = serve(
        &web,
        Limits {
            max_connections: 64,
            ..Limits::default()
        },
    )
    .await;
    let url = format!("https://{addr}/healthz");
    let ca = d.join("s.crt");
    let probe = move || {
        let t = Instant::now();
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "10"])
            .arg("--cacert")
            .arg(&ca)
            .args(["-u", "prom:s3cret"])
            .arg(&url)
            .output()
            .expect("curl");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            t.elapsed(),
        )
    };
    let p = probe.clone();
    assert_eq!(tokio::task::spawn_blocking(p).await.unwrap().0, "200");
    // 200 stalled handshakes, held open, renewed as they are cut off.
    let stop = Arc::new(AtomicBool::new(false));
    let mut holders = Vec::new();
    let hello: &'static [u8] = client_hello().leak();
    for i in 0..200 {
        let stop = Arc::clone(&stop);
        holders.push(tokio::spawn(async move {
            // Half a ClientHello's record header, or a whole ClientHello;
            // then nothing.
            let stall: &[u8] = if i % 2 == 0 { &[0x16, 0x03] } else { hello };
            while !stop.load(Ordering::Acquire) {
                if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
                    let _ = s.write_all(stall).await;
                    let mut b = [0u8; 64];
                    let _ = tokio::time::timeout(Duration::from_secs(6), s.read(&mut b)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut times = Vec::new();
    for _ in 0..10 {
        let p = probe.clone();
        let (code, took) = tokio::task::spawn_blocking(p).await.unwrap();
        assert_eq!(code, "200", "after {took:?}");
        times.push(took);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, Ordering::Release);
    for h in holders {
        h.abort();
    }
    let slowest = times.iter().max().unwrap();
    report(&format!(
        "stalled TLS handshakes: 200 against 64 slots, /healthz over TLS: {times:?}"
    ));
    assert!(*slowest < Duration::from_secs(1), "{times:?}");
}
