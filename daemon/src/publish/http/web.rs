//! TLS and basic auth for the metrics endpoint, from a web configuration
//! file in exporter-toolkit's format (`config::web`). As in
//! exporter-toolkit, the file and the certificates it names are re-read
//! when they change, so a renewed certificate or a new password needs no
//! restart; a change that does not load is logged once and the last good
//! configuration stays in force.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use config::web::{ClientAuth, TlsServer, TlsVersion, WebConfig};
use hyper::header::{self, HeaderName, HeaderValue};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::Digest as _;
use tokio_rustls::TlsAcceptor;

/// Why a web configuration does not load.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The file itself (config::web says what, where).
    #[error(transparent)]
    Config(#[from] config::web::WebConfigError),
    /// A certificate, key or CA file that does not load, or a key that
    /// does not go with its certificate.
    #[error("{}: {message}", file.display())]
    Tls { file: PathBuf, message: String },
    /// A header the file sets that HTTP cannot carry.
    #[error("http_server_config.headers.{name}: {message}")]
    Header { name: String, message: String },
}

fn tls_error(file: &Path, e: impl std::fmt::Display) -> WebError {
    WebError::Tls {
        file: file.to_owned(),
        message: e.to_string(),
    }
}

/// A web configuration that can be loaded, with what it was loaded from.
pub struct Web {
    path: PathBuf,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for Web {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Web")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

struct Loaded {
    /// (file, its identity when read): the web config and every file it names.
    stamps: Stamps,
    active: Arc<Active>,
    /// The stamps of a change that failed to load (logged once).
    refused: Option<Stamps>,
}

/// (file, its identity when read): the web config and every file it names.
type Stamps = Vec<(PathBuf, Option<Stamp>)>;

/// A file's identity: a rewrite or a rename over it changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

fn stamp(p: &Path) -> Option<Stamp> {
    std::fs::metadata(p).ok().map(|m| Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
}

/// What one connection is served under.
pub struct Active {
    pub tls: Option<TlsAcceptor>,
    users: BTreeMap<String, String>,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// sha256(user, password, hash) of credentials that verified: bcrypt
    /// costs tens of milliseconds a check, a scrape comes every few
    /// seconds with the same ones. Bounded; empty again on a reload.
    verified: Mutex<HashSet<[u8; 32]>>,
}

impl std::fmt::Debug for Active {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Active")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

const VERIFIED_CACHE: usize = 64;

impl Web {
    /// Loads the file at `path` and everything it names.
    ///
    /// # Errors
    /// What is wrong with the file, a certificate or a key.
    pub fn load(path: &Path) -> Result<Self, WebError> {
        let (stamps, active) = load(path)?;
        Ok(Self {
            path: path.to_owned(),
            loaded: Mutex::new(Loaded {
                stamps,
                active: Arc::new(active),
                refused: None,
            }),
        })
    }

    /// One line for the log: what the endpoint requires.
    #[must_use]
    pub fn describe(&self) -> String {
        let l = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let a = &l.active;
        let mut parts = vec![if a.tls.is_some() { "TLS" } else { "plain HTTP" }.to_owned()];
        if !a.users.is_empty() {
            parts.push(format!("basic auth ({} users)", a.users.len()));
        }
        format!("{} (web config {})", parts.join(", "), self.path.display())
    }

    /// The configuration a new connection is served under: reloaded first
    /// when a file changed since it was read.
    pub fn current(&self) -> Arc<Active> {
        let mut l = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now: Stamps = l
            .stamps
            .iter()
            .map(|(p, _)| (p.clone(), stamp(p)))
            .collect();
        if now == l.stamps || l.refused.as_ref() == Some(&now) {
            return Arc::clone(&l.active);
        }
        match load(&self.path) {
            Ok((stamps, active)) => {
                tracing::info!(path = %self.path.display(), "web config reloaded");
                l.stamps = stamps;
                l.active = Arc::new(active);
                l.refused = None;
            }
            Err(e) => {
                tracing::warn!(error = %e, "web config changed but does not load; the last good one stays in force");
                l.refused = Some(now);
            }
        }
        Arc::clone(&l.active)
    }
}

fn load(path: &Path) -> Result<(Stamps, Active), WebError> {
    let before = stamp(path);
    let c: WebConfig = config::web::load_web_config(path)?;
    let mut stamps = vec![(path.to_owned(), before)];
    let tls = match &c.tls {
        None => None,
        Some(t) => {
            for f in [
                Some(&t.cert_file),
                Some(&t.key_file),
                t.client_ca_file.as_ref(),
            ]
            .into_iter()
            .flatten()
            {
                stamps.push((f.clone(), stamp(f)));
            }
            Some(TlsAcceptor::from(Arc::new(server_config(t)?)))
        }
    };
    let headers = c
        .headers
        .iter()
        .map(|(k, v)| {
            let bad = |e: &dyn std::fmt::Display| WebError::Header {
                name: k.clone(),
                message: e.to_string(),
            };
            Ok((
                HeaderName::from_bytes(k.as_bytes()).map_err(|e| bad(&e))?,
                HeaderValue::from_str(v).map_err(|e| bad(&e))?,
            ))
        })
        .collect::<Result<_, WebError>>()?;
    Ok((
        stamps,
        Active {
            tls,
            users: c.basic_auth_users,
            headers,
            verified: Mutex::new(HashSet::new()),
        },
    ))
}

fn certs(p: &Path) -> Result<Vec<CertificateDer<'static>>, WebError> {
    let certs = CertificateDer::pem_file_iter(p)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| tls_error(p, e))?;
    if certs.is_empty() {
        return Err(tls_error(p, "no PEM certificate in it"));
    }
    Ok(certs)
}

fn server_config(t: &TlsServer) -> Result<rustls::ServerConfig, WebError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (t.min_version..=t.max_version).contains(v))
    .map(|(_, p)| p)
    .collect();
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| tls_error(&t.cert_file, e))?;
    let builder = match (t.client_auth, &t.client_ca_file) {
        (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs(ca)? {
                roots.add(c).map_err(|e| tls_error(ca, e))?;
            }
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                Arc::clone(&provider),
            );
            let v = if auth == ClientAuth::VerifyIfGiven {
                v.allow_unauthenticated()
            } else {
                v
            };
            builder.with_client_cert_verifier(v.build().map_err(|e| tls_error(ca, e))?)
        }
    };
    let chain = certs(&t.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&t.key_file).map_err(|e| tls_error(&t.key_file, e))?;
    let mut cfg = builder.with_single_cert(chain, key).map_err(|e| {
        tls_error(
            &t.cert_file,
            format_args!("with {}: {e}", t.key_file.display()),
        )
    })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

impl Active {
    /// Whether the request may be answered: no users configured, or an
    /// `Authorization: Basic` header whose password verifies against its
    /// user's bcrypt hash. bcrypt runs on the blocking pool.
    pub async fn authorized(&self, headers: &hyper::HeaderMap) -> bool {
        if self.users.is_empty() {
            return true;
        }
        let Some((user, password)) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| {
                base64::engine::general_purpose::STANDARD
                    .decode(b.trim())
                    .ok()
            })
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.split_once(':').map(|(u, p)| (u.to_owned(), p.to_owned())))
        else {
            return false;
        };
        // An unknown user costs a bcrypt check too (at cost 10, what
        // htpasswd -B writes): the time of a refusal does not tell at a
        // glance which user names exist.
        static UNKNOWN: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| bcrypt::hash("pptune", 10).unwrap_or_default());
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h.clone(), true),
            None => (UNKNOWN.clone(), false),
        };
        let key: [u8; 32] = sha2::Sha256::new()
            .chain_update(user.as_bytes())
            .chain_update([0])
            .chain_update(password.as_bytes())
            .chain_update([0])
            .chain_update(hash.as_bytes())
            .finalize()
            .into();
        if known && self.verified.lock().is_ok_and(|v| v.contains(&key)) {
            return true;
        }
        let ok =
            tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
                .await
                .unwrap_or(false)
                && known;
        if ok && let Ok(mut v) = self.verified.lock() {
            if v.len() >= VERIFIED_CACHE {
                v.clear();
            }
            v.insert(key);
        }
        ok
    }

    /// The response headers the web config adds.
    pub fn decorate<B>(&self, mut r: hyper::Response<B>) -> hyper::Response<B> {
        for (k, v) in &self.headers {
            r.headers_mut().insert(k.clone(), v.clone());
        }
        r
    }
}
