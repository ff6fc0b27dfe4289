//! A minimal blocking HTTP/1.1 GET for tests of pptune's `/metrics`,
//! `/healthz` and `/readyz` (the server is hyper; the client need not be).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `GET path` from `addr` with `Connection: close` and the given extra
/// header lines (`"Accept: …"`); the whole response (head and body), or
/// `None` when the connection or the read fails (5 s read timeout).
#[must_use]
pub fn get(addr: &str, path: &str, headers: &[&str]) -> Option<String> {
    get_on(TcpStream::connect(addr).ok()?, addr, path, headers)
}

/// [`get`] from inside network namespace `netns` (`ip netns` name): the
/// connection is made on a thread that entered it.
#[must_use]
pub fn get_in(netns: &str, addr: &str, path: &str, headers: &[&str]) -> Option<String> {
    let s = std::thread::scope(|t| {
        t.spawn(|| {
            netlink::netns::enter(netns).ok()?;
            TcpStream::connect(addr).ok()
        })
        .join()
        .ok()
        .flatten()
    })?;
    get_on(s, addr, path, headers)
}

fn get_on(mut s: TcpStream, addr: &str, path: &str, headers: &[&str]) -> Option<String> {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The body of a response [`get`] returned.
#[must_use]
pub fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// A fresh registry served as the daemon serves `/metrics`, on `addr`
/// bound inside the network namespace `ns`; the server runs on the
/// calling tokio runtime.
///
/// # Panics
/// When `addr` cannot be bound in `ns`, or outside a tokio runtime.
#[must_use]
#[allow(clippy::unwrap_used)]
pub fn serve_in(
    ns: &netlink::netns::TempNetns,
    addr: impl Into<String>,
) -> std::sync::Arc<pptune::publish::metrics::Metrics> {
    let metrics = std::sync::Arc::new(pptune::publish::metrics::Metrics::new());
    let addr = addr.into();
    let listener = ns
        .run(move || async move { std::net::TcpListener::bind(addr) })
        .unwrap()
        .unwrap();
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(pptune::publish::http::serve(
        listener,
        std::sync::Arc::clone(&metrics),
    ));
    metrics
}

/// A web config (the exporter-toolkit file `metrics_web_config` names)
/// written in `dir` as `web.yml`: with `tls`, a self-signed certificate for
/// 127.0.0.1 and its key beside it (`s.crt`, `s.key`); each user of
/// `users` (name, password) with its bcrypt hash (cost 4, the least).
///
/// # Panics
/// When a file cannot be written or a certificate made.
#[must_use]
#[allow(clippy::unwrap_used)]
pub fn web_config(dir: &std::path::Path, tls: bool, users: &[(&str, &str)]) -> std::path::PathBuf {
    let mut yml = String::new();
    if tls {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.join("s.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("s.key"), key.serialize_pem()).unwrap();
        yml.push_str("tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n");
    }
    if !users.is_empty() {
        yml.push_str("basic_auth_users:\n");
        for (user, password) in users {
            let hash = bcrypt::hash(password, 4).unwrap();
            yml.push_str(&format!("  {user}: '{hash}'\n"));
        }
    }
    let web = dir.join("web.yml");
    std::fs::write(&web, yml).unwrap();
    web
}

/// A Prometheus server (`/usr/bin/prometheus`, Debian package
/// `prometheus`; tests/run-all.sh installs it) on a free loopback port,
/// scraping every second what `scrape_configs` says (the YAML list that
/// goes under `scrape_configs:`). Stopped when dropped.
#[derive(Debug)]
pub struct Prometheus {
    child: std::process::Child,
    /// `127.0.0.1:PORT` of its HTTP API.
    pub addr: String,
    /// The network namespace it runs in (`None`: this process's).
    pub netns: Option<String>,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// # Panics
    /// When Prometheus is not installed or does not start: the test's own
    /// failure.
    #[must_use]
    #[allow(clippy::expect_used)]
    pub fn start(scrape_configs: &str) -> Self {
        Self::with_rules(scrape_configs, &[])
    }

    /// [`Prometheus::start`] evaluating the rule files given as (name,
    /// text), every second.
    ///
    /// # Panics
    /// As [`Prometheus::start`].
    #[must_use]
    #[allow(clippy::expect_used)]
    pub fn with_rules(scrape_configs: &str, rules: &[(&str, &str)]) -> Self {
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = free.local_addr().expect("its address").to_string();
        drop(free);
        Self::spawn(None, addr, scrape_configs, rules)
    }

    /// [`Prometheus::with_rules`] inside network namespace `netns` (its
    /// loopback up), its API on `127.0.0.1:9090` there; [`Self::query`]
    /// connects from inside it.
    ///
    /// # Panics
    /// As [`Prometheus::start`].
    #[must_use]
    pub fn with_rules_in(netns: &str, scrape_configs: &str, rules: &[(&str, &str)]) -> Self {
        Self::spawn(Some(netns), "127.0.0.1:9090".into(), scrape_configs, rules)
    }

    #[allow(clippy::expect_used)]
    fn spawn(
        netns: Option<&str>,
        addr: String,
        scrape_configs: &str,
        rules: &[(&str, &str)],
    ) -> Self {
        let prom = std::path::Path::new("/usr/bin/prometheus");
        assert!(
            prom.exists(),
            "/usr/bin/prometheus not installed (Debian package `prometheus`)"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cfg = dir.path().join("prometheus.yml");
        let mut files = String::new();
        for (name, text) in rules {
            std::fs::write(dir.path().join(name), text).expect("writing a rule file");
            files.push_str(&format!("  - {name}\n"));
        }
        let rule_files = if files.is_empty() {
            String::new()
        } else {
            format!("rule_files:\n{files}")
        };
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{rule_files}scrape_configs:\n{scrape_configs}"
            ),
        )
        .expect("writing prometheus.yml");
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = std::process::Command::new("ip");
                c.args(["netns", "exec", ns]).arg(prom);
                c
            }
            None => std::process::Command::new(prom),
        };
        let child = cmd
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prom.log")).expect("prom.log"))
            .spawn()
            .expect("starting /usr/bin/prometheus");
        Self {
            child,
            addr,
            netns: netns.map(str::to_owned),
            dir,
        }
    }

    /// The raw HTTP response to an instant query (blocking); `None` when
    /// Prometheus does not answer (yet).
    #[must_use]
    pub fn query(&self, promql: &str) -> Option<String> {
        let escaped: String = promql
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let path = format!("/api/v1/query?query={escaped}");
        match &self.netns {
            Some(ns) => get_in(ns, &self.addr, &path, &[]),
            None => get(&self.addr, &path, &[]),
        }
    }

    /// The end of its log, for a failure message.
    #[must_use]
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("prom.log")).unwrap_or_default();
        log[log.len().saturating_sub(2000)..].to_owned()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
