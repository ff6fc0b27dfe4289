//! The metrics endpoint off-host: TLS and basic auth from an
//! exporter-toolkit web config file (node_exporter's `--web.config.file`),
//! checked with the clients a fleet uses: curl and a real Prometheus
//! scraping over TLS with basic auth. Certificates come from a test CA
//! (rcgen); the server is pptune's own (`pptune::publish::http::serve_secured`) on
//! loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use pptune::publish::http::{Limits, Web, serve_secured};
use pptune::publish::metrics::Metrics;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

/// A CA and a server certificate for 127.0.0.1 signed by it, as PEM files.
struct Pki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, format!("pptune test CA {name}"));
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

fn pki(dir: &Path, name: &str) -> Pki {
    let ca = ca(name);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let write = |file: &str, text: String| {
        let p = dir.join(file);
        std::fs::write(&p, text).unwrap();
        p
    };
    Pki {
        ca: write(&format!("{name}-ca.crt"), ca.pem()),
        cert: write(&format!("{name}.crt"), cert.pem()),
        key: write(&format!("{name}.key"), key.serialize_pem()),
    }
}

/// Writes `text` over `path` the way a certificate renewal does: a new
/// file renamed over the old one.
fn replace(path: &Path, text: &[u8]) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// curl's HTTP status for `url` (0: no HTTP answer: refused handshake,
/// untrusted certificate), and its stderr.
fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("curl (Debian package curl; tests/run-all.sh installs it)");
    (
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn serve(web: Web) -> std::net::SocketAddr {
    let listener = pptune::publish::http::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_secured(
        listener,
        Arc::new(Metrics::new()),
        Limits::default(),
        Some(Arc::new(web)),
    ));
    addr
}

/// A PKI named `a` in `dir` and a web config serving it with TLS and one
/// user, `prometheus`, password `s3cret`; `extra` is more YAML for the file.
fn tls_with_one_user(dir: &Path, extra: &str) -> (Pki, PathBuf) {
    let a = pki(dir, "a");
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n{extra}basic_auth_users:\n  prometheus: '{hash}'\n"
        ),
    )
    .unwrap();
    (a, web)
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn tls_and_basic_auth_guard_every_path_and_renewals_need_no_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (a, web) = tls_with_one_user(
        dir.path(),
        "http_server_config:\n  headers:\n    Strict-Transport-Security: max-age=31536000\n",
    );
    let addr = serve(Web::load(&web).unwrap()).await;
    let https = format!("https://{addr}/metrics");
    let ca_a = a.ca.display().to_string();

    let (u, ca) = (https.clone(), ca_a.clone());
    let checks = blocking(move || {
        [
            // Plain HTTP gets no answer from a TLS port.
            curl(&u.replace("https", "http"), &[]),
            // Nor does a client that does not trust the certificate.
            curl(&u, &[]),
            // Trusted, but no credentials / wrong ones: 401, on every path.
            curl(&u, &["--cacert", &ca]),
            curl(&u.replace("/metrics", "/healthz"), &["--cacert", &ca]),
            curl(&u, &["--cacert", &ca, "-u", "prometheus:wrong"]),
            curl(&u, &["--cacert", &ca, "-u", "nobody:s3cret"]),
            curl(&u, &["--cacert", &ca, "-u", "prometheus:s3cret"]),
            curl(&u, &["--cacert", &ca, "-u", "prometheus:s3cret"]),
        ]
    })
    .await;
    let codes: Vec<u16> = checks.iter().map(|c| c.0).collect();
    assert_eq!(codes, [0, 0, 401, 401, 401, 401, 200, 200], "{checks:?}");

    // The configured header and the realm are sent.
    let (u, ca) = (https.clone(), ca_a.clone());
    let head = blocking(move || {
        Command::new("curl")
            .args([
                "-sS",
                "-D",
                "-",
                "-o",
                "/dev/null",
                "--cacert",
                &ca,
                "-u",
                "prometheus:s3cret",
            ])
            .arg(&u)
            .output()
            .unwrap()
    })
    .await;
    let head = String::from_utf8_lossy(&head.stdout).to_lowercase();
    assert!(
        head.contains("strict-transport-security: max-age=31536000"),
        "{head}"
    );

    // A renewal: a certificate from another CA renamed over the old one is
    // served to the next connection, without a restart.
    let b = pki(dir.path(), "b");
    replace(&a.cert, &std::fs::read(&b.cert).unwrap());
    replace(&a.key, &std::fs::read(&b.key).unwrap());
    let (u, ca_old, ca_new) = (https.clone(), ca_a.clone(), b.ca.display().to_string());
    let renewed = blocking(move || {
        [
            curl(&u, &["--cacert", &ca_old, "-u", "prometheus:s3cret"]),
            curl(&u, &["--cacert", &ca_new, "-u", "prometheus:s3cret"]),
        ]
    })
    .await;
    assert_eq!((renewed[0].0, renewed[1].0), (0, 200), "{renewed:?}");

    // A change that does not load (a key that is not PEM) leaves the last
    // good configuration serving.
    replace(&a.key, b"not a key\n");
    let (u, ca_new) = (https.clone(), b.ca.display().to_string());
    let kept = blocking(move || curl(&u, &["--cacert", &ca_new, "-u", "prometheus:s3cret"])).await;
    assert_eq!(kept.0, 200, "{kept:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_client_certificate_is_required_when_the_web_config_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let server = pki(dir.path(), "server");
    // A client CA and a client certificate it signed; another CA's client.
    let client_ca = ca("clients");
    let other_ca = ca("others");
    let mut files = Vec::new();
    for (name, issuer) in [("good", &client_ca), ("bad", &other_ca)] {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["scraper".to_owned()])
            .unwrap()
            .signed_by(&key, issuer)
            .unwrap();
        let c = dir.path().join(format!("{name}-client.crt"));
        let k = dir.path().join(format!("{name}-client.key"));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        files.push((c.display().to_string(), k.display().to_string()));
    }
    std::fs::write(dir.path().join("clients-ca.crt"), client_ca.pem()).unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: clients-ca.crt\n  min_version: TLS13\n",
    )
    .unwrap();
    let addr = serve(Web::load(&web).unwrap()).await;
    let u = format!("https://{addr}/metrics");
    let ca = server.ca.display().to_string();
    let got = blocking(move || {
        [
            curl(&u, &["--cacert", &ca]),
            curl(
                &u,
                &["--cacert", &ca, "--cert", &files[1].0, "--key", &files[1].1],
            ),
            curl(
                &u,
                &["--cacert", &ca, "--cert", &files[0].0, "--key", &files[0].1],
            ),
            // TLS 1.2 is below min_version.
            curl(
                &u,
                &[
                    "--cacert",
                    &ca,
                    "--cert",
                    &files[0].0,
                    "--key",
                    &files[0].1,
                    "--tls-max",
                    "1.2",
                ],
            ),
        ]
    })
    .await;
    let codes: Vec<u16> = got.iter().map(|c| c.0).collect();
    assert_eq!(codes, [0, 0, 200, 0], "{got:?}");
}

/// What a fleet's Prometheus does with node_exporter's web config, it does
/// with pptune's: `scheme: https`, `tls_config.ca_file`, `basic_auth`.
#[tokio::test(flavor = "current_thread")]
#[ignore = "needs /usr/bin/prometheus (Debian package `prometheus`); run with --include-ignored"]
async fn a_real_prometheus_scrapes_over_tls_with_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let (a, web) = tls_with_one_user(dir.path(), "");
    let addr = serve(Web::load(&web).unwrap()).await;
    let job = |name: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      username: prometheus\n      password: {password}\n    static_configs:\n      - targets: ['{addr}']\n",
            a.ca.display()
        )
    };
    let prom = std::sync::Arc::new(pptune_tests::http::Prometheus::start(&format!(
        "{}{}",
        job("pptune", "s3cret"),
        job("wrong", "guess")
    )));
    let mut up = String::new();
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let p = std::sync::Arc::clone(&prom);
        let answer = blocking(move || p.query("up")).await.unwrap_or_default();
        up = pptune_tests::http::body(&answer).to_owned();
        if up.contains("\"pptune\"") && up.contains("\"wrong\"") {
            break;
        }
    }
    let up = if up.is_empty() { prom.log_tail() } else { up };
    let v: serde_json::Value = serde_json::from_str(&up).unwrap_or_else(|e| panic!("{e}: {up}"));
    let value = |job: &str| -> String {
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"]["job"] == job)
            .map(|r| r["value"][1].as_str().unwrap().to_owned())
            .unwrap_or_else(|| panic!("no up for {job}: {v}"))
    };
    assert_eq!(value("pptune"), "1", "{v}");
    assert_eq!(value("wrong"), "0", "{v}");
}

/// `:port` is every address, IPv4 and IPv6, whatever bindv6only says.
#[tokio::test(flavor = "current_thread")]
async fn a_port_alone_listens_on_every_address() {
    let addr = config::parse_listen(":0").unwrap();
    assert_eq!(addr.to_string(), "[::]:0");
    let l = pptune::publish::http::bind(addr).unwrap();
    let port = l.local_addr().unwrap().port();
    // A host without IPv6 gets the IPv4 wildcard instead.
    let hosts: &[&str] = if l.local_addr().unwrap().is_ipv6() {
        &["127.0.0.1", "[::1]"]
    } else {
        &["127.0.0.1"]
    };
    for host in hosts {
        let a: std::net::SocketAddr = format!("{host}:{port}").parse().unwrap();
        let (c, s) = tokio::join!(tokio::net::TcpStream::connect(a), l.accept());
        assert!(c.is_ok() && s.is_ok(), "{host}: {c:?} {s:?}");
    }
    assert!(config::parse_listen(":99999").is_none());
    assert!(config::parse_listen("localhost").is_none());
}
