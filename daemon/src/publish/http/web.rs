//! TLS and basic auth for the metrics endpoint, from a web configuration
//! file in exporter-toolkit's format (`config::web`). As in
//! exporter-toolkit, the file and the certificates it names are re-read
//! when they change, so a renewed certificate or a new password needs no
//! restart; a change that does not load is logged once and the last good
//! configuration stays in force.
//!
//! Every file is read by the one file rule (`config::file::read_trusted`:
//! never blocking on a FIFO, a regular file owned by root or this user and
//! writable by no one else, at most [`MAX_PEM_BYTES`]), and a re-read runs
//! on a thread of its own under [`RELOAD_DEADLINE`], one at a time, never
//! on the thread that accepts connections and runs the loop.

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
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::worker::Worker;

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

/// The most a certificate, key or CA file may hold (a CA bundle of a few
/// hundred certificates is well under it).
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// How long a connection waits for a re-read of the web config and its
/// files before it is served under the last good one.
pub const RELOAD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// A web configuration that can be loaded, with what it was loaded from.
pub struct Web {
    path: PathBuf,
    loaded: tokio::sync::Mutex<Loaded>,
    /// Where re-reads run.
    reader: Worker,
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
    /// A re-read that outlived its deadline: none other starts until it
    /// ends (no job piles up behind a file system that hangs).
    running: Option<oneshot::Receiver<Reread>>,
    /// When the last re-read began: a connection that arrived before it
    /// is served what it finds.
    checked: Option<Instant>,
}

/// What a re-read found.
enum Reread {
    Unchanged,
    Loaded(Stamps, Active),
    Refused(Stamps, WebError),
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
            loaded: tokio::sync::Mutex::new(Loaded {
                stamps,
                active: Arc::new(active),
                refused: None,
                running: None,
                checked: None,
            }),
            reader: Worker::new("pptune-web", 1),
        })
    }

    /// One line for the log: what the endpoint requires.
    #[must_use]
    pub fn describe(&self) -> String {
        let (tls, users) = self.loaded.try_lock().map_or((false, 0), |l| {
            (l.active.tls.is_some(), l.active.users.len())
        });
        let mut parts = vec![if tls { "TLS" } else { "plain HTTP" }.to_owned()];
        if users > 0 {
            parts.push(format!("basic auth ({users} users)"));
        }
        format!("{} (web config {})", parts.join(", "), self.path.display())
    }

    /// The configuration a new connection is served under: re-read first
    /// when a file changed since it was read. The re-read runs on the web
    /// config's own thread, one at a time, for at most [`RELOAD_DEADLINE`];
    /// past it, or while an earlier one still runs, the last good one
    /// serves. Connections that arrive while a re-read runs share the next
    /// one: a flood of connections costs one re-read at a time, not one
    /// each in turn.
    pub async fn current(&self) -> Arc<Active> {
        let arrived = Instant::now();
        let mut l = self.loaded.lock().await;
        if l.checked.is_some_and(|c| c >= arrived) {
            // Begun after this connection arrived: what it found holds.
            return Arc::clone(&l.active);
        }
        let mut done = match l.running.take() {
            Some(mut d) => match d.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => {
                    l.running = Some(d);
                    return Arc::clone(&l.active);
                }
                r => return self.found(&mut l, r.unwrap_or(Reread::Unchanged)),
            },
            None => {
                let path = self.path.clone();
                let stamps = l.stamps.clone();
                let refused = l.refused.clone();
                l.checked = Some(Instant::now());
                match self
                    .reader
                    .submit(move || reread(&path, &stamps, refused.as_ref()))
                {
                    Some(t) => t.done,
                    None => return Arc::clone(&l.active),
                }
            }
        };
        match tokio::time::timeout(RELOAD_DEADLINE, &mut done).await {
            Ok(r) => self.found(&mut l, r.unwrap_or(Reread::Unchanged)),
            Err(_) => {
                tracing::warn!(
                    path = %self.path.display(),
                    "re-reading the web config took longer than {}s: the last good one stays in force until it ends",
                    RELOAD_DEADLINE.as_secs()
                );
                l.running = Some(done);
                Arc::clone(&l.active)
            }
        }
    }

    /// Takes in what a re-read found; the configuration in force after it.
    fn found(&self, l: &mut Loaded, found: Reread) -> Arc<Active> {
        match found {
            Reread::Unchanged => {}
            Reread::Loaded(stamps, active) => {
                tracing::info!(path = %self.path.display(), "web config reloaded");
                l.stamps = stamps;
                l.active = Arc::new(active);
                l.refused = None;
            }
            Reread::Refused(now, e) => {
                tracing::warn!(error = %crate::human::cause(&e), "web config changed but does not load; the last good one stays in force");
                l.refused = Some(now);
            }
        }
        Arc::clone(&l.active)
    }
}

/// On the web config's thread: whether a file changed, and if so the new load.
fn reread(path: &Path, stamps: &Stamps, refused: Option<&Stamps>) -> Reread {
    let now: Stamps = stamps.iter().map(|(p, _)| (p.clone(), stamp(p))).collect();
    if now == *stamps || refused == Some(&now) {
        return Reread::Unchanged;
    }
    match load(path) {
        Ok((stamps, active)) => Reread::Loaded(stamps, active),
        Err(e) => Reread::Refused(now, e),
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

/// A PEM file the web config names, by the file rule for files that
/// carry trust: the key is a secret, the certificates and CA decide who is
/// served and trusted.
fn pem(p: &Path) -> Result<Vec<u8>, WebError> {
    config::file::read_trusted(p, MAX_PEM_BYTES).map_err(|e| WebError::Tls {
        file: p.to_owned(),
        message: match e {
            // The path is the error's own prefix; say it once.
            config::file::ReadError::Io { cause, .. } => cause.to_string(),
            other => other
                .to_string()
                .strip_prefix(&format!("{}: ", p.display()))
                .map(str::to_owned)
                .unwrap_or_else(|| other.to_string()),
        },
    })
}

fn certs(p: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, WebError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_error(p, e))?;
    if certs.is_empty() {
        return Err(tls_error(p, "no PEM certificate in it"));
    }
    Ok(certs)
}

fn server_config(t: &TlsServer) -> Result<rustls::ServerConfig, WebError> {
    // Every file by the rule first, then what is in them.
    let cert_pem = pem(&t.cert_file)?;
    let key_pem = pem(&t.key_file)?;
    let ca_pem = match (t.client_auth, &t.client_ca_file) {
        (ClientAuth::None, _) | (_, None) => None,
        (_, Some(ca)) => Some((ca, pem(ca)?)),
    };
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
    let builder = match ca_pem {
        None => builder.with_no_client_auth(),
        Some((ca, ca_pem)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs(ca, &ca_pem)? {
                roots.add(c).map_err(|e| tls_error(ca, e))?;
            }
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                Arc::clone(&provider),
            );
            let v = if t.client_auth == ClientAuth::VerifyIfGiven {
                v.allow_unauthenticated()
            } else {
                v
            };
            builder.with_client_cert_verifier(v.build().map_err(|e| tls_error(ca, e))?)
        }
    };
    let chain = certs(&t.cert_file, &cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| tls_error(&t.key_file, e))?;
    let mut cfg = builder.with_single_cert(chain, key).map_err(|e| {
        tls_error(
            &t.cert_file,
            format_args!("with {}: {e}", t.key_file.display()),
        )
    })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Requests waiting for a password check; past them a request is
/// answered "busy" at once. The checks run one at a time on a thread of
/// their own ([`CHECKS`]), so wrong passwords cost at most one core and
/// one thread however many come.
pub const VERIFY_QUEUE: usize = 16;
/// How long a request waits for its check to begin before it is answered
/// "busy".
pub const VERIFY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The one bound on unauthenticated work: every bcrypt check runs here.
static CHECKS: Worker = Worker::new("pptune-auth", VERIFY_QUEUE);

/// Whether `password` verifies against `hash` (`None`: a user that does
/// not exist, checked against a hash of its own so that a refusal takes
/// as long), or `None` when the queue is full or the check did not begin
/// within [`VERIFY_WAIT`]. A request whose client goes away drops this
/// future: a check not yet begun never runs.
async fn verify(password: String, hash: Option<String>) -> Option<bool> {
    // At cost 10, what htpasswd -B writes; hashed once, on the checks'
    // thread.
    static UNKNOWN: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| bcrypt::hash("pptune", 10).unwrap_or_default());
    let t = CHECKS.submit(move || {
        bcrypt::verify(password, hash.as_deref().unwrap_or(&UNKNOWN)).unwrap_or(false)
    })?;
    tokio::time::timeout(VERIFY_WAIT, t.started)
        .await
        .ok()?
        .ok()?;
    t.done.await.ok()
}

/// What a request's credentials come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    Allowed,
    Denied,
    /// Not checked: the password checks are all taken (answer 503).
    Busy,
}

impl Active {
    /// Whether the request may be answered: no users configured, or an
    /// `Authorization: Basic` header whose password verifies against its
    /// user's bcrypt hash. A password that verified is remembered (by a
    /// digest); any other costs a check under [`CHECKS`]' bound.
    pub async fn authorized(&self, headers: &hyper::HeaderMap) -> Auth {
        if self.users.is_empty() {
            return Auth::Allowed;
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
            return Auth::Denied;
        };
        // An unknown user costs a bcrypt check too: the time of a refusal
        // does not tell at a glance which user names exist.
        let hash = self.users.get(&user).cloned();
        let known = hash.is_some();
        let key: [u8; 32] = sha2::Sha256::new()
            .chain_update(user.as_bytes())
            .chain_update([0])
            .chain_update(password.as_bytes())
            .chain_update([0])
            .chain_update(hash.as_deref().unwrap_or_default().as_bytes())
            .finalize()
            .into();
        if known && self.verified.lock().is_ok_and(|v| v.contains(&key)) {
            return Auth::Allowed;
        }
        let Some(verified) = verify(password, hash).await else {
            return Auth::Busy;
        };
        let ok = verified && known;
        if ok && let Ok(mut v) = self.verified.lock() {
            if v.len() >= VERIFIED_CACHE {
                v.clear();
            }
            v.insert(key);
        }
        if ok { Auth::Allowed } else { Auth::Denied }
    }

    /// The response headers the web config adds.
    pub fn decorate<B>(&self, mut r: hyper::Response<B>) -> hyper::Response<B> {
        for (k, v) in &self.headers {
            r.headers_mut().insert(k.clone(), v.clone());
        }
        r
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::time::Duration;
    use tokio::time::Instant;

    /// A web config naming `cert`, `key` and, when given, a client CA.
    fn web_config(dir: &Path, cert: &Path, key: &Path, ca: Option<&Path>) -> PathBuf {
        let mut text = format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            cert.display(),
            key.display()
        );
        if let Some(ca) = ca {
            text.push_str(&format!(
                "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
                ca.display()
            ));
        }
        let p = dir.join("web.yml");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Every file the web config names goes by the file rule: a FIFO is
    /// refused without waiting for a writer (it wedged the daemon and
    /// `check`), /dev/zero by its type (it was read until the allocation
    /// failed), a file others can write as untrusted (it passed `check`),
    /// a sparse 1 TiB file by its length.
    #[test]
    fn what_the_web_config_names_is_a_bounded_trusted_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fifo = d.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let open = d.join("open.pem");
        std::fs::write(&open, "x").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        let huge = d.join("huge.pem");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let plain = d.join("plain.pem");
        std::fs::write(&plain, "not PEM").unwrap();
        let zero = Path::new("/dev/zero");
        let t0 = Instant::now();
        for (cert, key, ca, says) in [
            (&fifo, &plain, None, "fifo: not a regular file: a FIFO"),
            (&plain, &fifo, None, "fifo: not a regular file: a FIFO"),
            (
                &plain,
                &plain,
                Some(&fifo),
                "fifo: not a regular file: a FIFO",
            ),
            (
                &zero.to_owned(),
                &plain,
                None,
                "/dev/zero: not a regular file: a device node",
            ),
            (
                &plain,
                &zero.to_owned(),
                None,
                "/dev/zero: not a regular file: a device node",
            ),
            (
                &open,
                &plain,
                None,
                "open.pem: not trusted: mode 666 lets others write it",
            ),
            (&plain, &open, None, "open.pem: not trusted"),
            (&plain, &plain, Some(&open), "open.pem: not trusted"),
            (
                &huge,
                &plain,
                None,
                "huge.pem: 1099511627776 bytes, more than the 1048576",
            ),
        ] {
            let web = web_config(d, cert, key, ca.map(PathBuf::as_path));
            let e = Web::load(&web).unwrap_err().to_string();
            assert!(e.contains(says), "{cert:?} {key:?} {ca:?}: {e}");
        }
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }
}
