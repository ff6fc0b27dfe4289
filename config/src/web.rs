//! The metrics endpoint's web configuration: TLS and basic auth, in the
//! format of the Prometheus exporter-toolkit's `--web.config.file`
//! (node_exporter, and most exporters a fleet already runs), so one file
//! and one runbook serve both. What pptune does not implement is refused
//! by name instead of being ignored: a file that asks for a protection
//! pptune would not give must not start a server without it.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt        # relative paths: from this file's directory
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert
//!   client_ca_file: clients-ca.crt
//!   min_version: TLS12
//! http_server_config:
//!   headers:
//!     Strict-Transport-Security: max-age=31536000
//! basic_auth_users:
//!   prometheus: $2y$10$...       # bcrypt (htpasswd -nBC 10 prometheus)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::MessageFormatter as _;

/// A web configuration file, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfig {
    /// The file it was read from.
    pub path: PathBuf,
    /// `None`: plain HTTP.
    pub tls: Option<TlsServer>,
    /// User name → bcrypt hash; empty: no authentication.
    pub basic_auth_users: BTreeMap<String, String>,
    /// Extra response headers (`http_server_config.headers`).
    pub headers: BTreeMap<String, String>,
}

/// `tls_server_config`, with paths made absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsServer {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_auth: ClientAuth,
    pub client_ca_file: Option<PathBuf>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
}

/// Which client certificates the server asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default).
    None,
    /// `VerifyClientCertIfGiven`: a client may present none; one it
    /// presents must verify against `client_ca_file`.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`.
    Require,
}

/// The TLS versions rustls speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// Why a web configuration file is refused.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    /// Unreadable, not a regular file, too large, or writable by another
    /// user (who could then turn authentication off).
    #[error(transparent)]
    Read(#[from] crate::file::ReadError),
    /// `file:line:column: message` (the YAML, or its keys and values).
    #[error("{location}: {message}")]
    Invalid { location: String, message: String },
}

/// A web config is a few lines; more is not one.
const MAX_WEB_CONFIG_BYTES: u64 = 64 << 10;

/// Response headers a web config may set: exporter-toolkit's list.
const HEADERS: &[&str] = &[
    "Strict-Transport-Security",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Content-Security-Policy",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    tls_server_config: Option<RawTls>,
    #[serde(default)]
    http_server_config: Option<RawHttp>,
    #[serde(default)]
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    #[serde(default)]
    http2: Option<bool>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// Reads and checks the web configuration file at `path`. Certificate and
/// key files are named here and read by the server that uses them (so a
/// renewed certificate is picked up without a new web config).
///
/// # Errors
/// The file cannot be read, is not YAML, has a key pptune does not know or
/// implement, or a value out of range; the message says which, where.
pub fn load_web_config(path: &Path) -> Result<WebConfig, WebConfigError> {
    let text = crate::file::read_trusted_text(path, MAX_WEB_CONFIG_BYTES)?;
    parse_web_config(path, &text)
}

/// [`load_web_config`] of text already read.
///
/// # Errors
/// As [`load_web_config`].
pub fn parse_web_config(path: &Path, text: &str) -> Result<WebConfig, WebConfigError> {
    let name = path.display().to_string();
    let raw: Raw = if text.trim().is_empty() {
        Raw {
            tls_server_config: None,
            http_server_config: None,
            basic_auth_users: None,
        }
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            let location = match e.location() {
                Some(l) => format!("{name}:{}:{}", l.line(), l.column()),
                None => name.clone(),
            };
            WebConfigError::Invalid {
                location,
                message: crate::tree::Messages
                    .format_message(e.without_snippet())
                    .into_owned(),
            }
        })?
    };
    let tls = raw.tls_server_config.map(|t| tls(path, &t)).transpose()?;
    let headers = raw
        .http_server_config
        .map(|h| http(path, h))
        .transpose()?
        .unwrap_or_default();
    let basic_auth_users = raw.basic_auth_users.unwrap_or_default();
    users(path, &basic_auth_users)?;
    Ok(WebConfig {
        path: path.to_owned(),
        tls,
        basic_auth_users,
        headers,
    })
}

/// A problem with the file at `at` (the whole file: the keys say where).
fn invalid(at: &Path, message: impl Into<String>) -> WebConfigError {
    WebConfigError::Invalid {
        location: at.display().to_string(),
        message: message.into(),
    }
}

/// `tls_server_config`, checked, with its paths made absolute from `dir`.
fn tls(at: &Path, t: &RawTls) -> Result<TlsServer, WebConfigError> {
    let dir = at.parent().unwrap_or(Path::new("."));
    let file = |v: &str| -> PathBuf {
        let p = Path::new(v);
        if p.is_absolute() {
            p.to_owned()
        } else {
            dir.join(p)
        }
    };
    let (Some(cert), Some(key)) = (&t.cert_file, &t.key_file) else {
        return Err(invalid(
            at,
            "tls_server_config: needs both cert_file and key_file",
        ));
    };
    let client_auth = match t.client_auth_type.as_deref() {
        None | Some("NoClientCert") => ClientAuth::None,
        Some("VerifyClientCertIfGiven") => ClientAuth::VerifyIfGiven,
        Some("RequireAndVerifyClientCert") => ClientAuth::Require,
        Some(other @ ("RequestClientCert" | "RequireAnyClientCert")) => {
            return Err(invalid(
                at,
                format!(
                    "tls_server_config.client_auth_type: `{other}` accepts client certificates without verifying them, which pptune does not do; use VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file"
                ),
            ));
        }
        Some(other) => {
            return Err(invalid(
                at,
                format!(
                    "tls_server_config.client_auth_type: `{other}` is not one of NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert"
                ),
            ));
        }
    };
    if client_auth != ClientAuth::None && t.client_ca_file.is_none() {
        return Err(invalid(
            at,
            "tls_server_config: client_auth_type verifies client certificates, so client_ca_file is needed",
        ));
    }
    let min_version = version(
        at,
        "min_version",
        t.min_version.as_deref(),
        TlsVersion::Tls12,
    )?;
    let max_version = version(
        at,
        "max_version",
        t.max_version.as_deref(),
        TlsVersion::Tls13,
    )?;
    if min_version > max_version {
        return Err(invalid(
            at,
            "tls_server_config: min_version is above max_version",
        ));
    }
    Ok(TlsServer {
        cert_file: file(cert),
        key_file: file(key),
        client_auth,
        client_ca_file: t.client_ca_file.as_deref().map(file),
        min_version,
        max_version,
    })
}

/// `tls_server_config.min_version` or `max_version`.
fn version(
    at: &Path,
    key: &str,
    v: Option<&str>,
    default: TlsVersion,
) -> Result<TlsVersion, WebConfigError> {
    match v {
        None => Ok(default),
        Some("TLS12") => Ok(TlsVersion::Tls12),
        Some("TLS13") => Ok(TlsVersion::Tls13),
        Some(old @ ("TLS10" | "TLS11")) => Err(invalid(
            at,
            format!(
                "tls_server_config.{key}: `{old}`: pptune speaks TLS 1.2 and 1.3 only (TLS12, TLS13)"
            ),
        )),
        Some(other) => Err(invalid(
            at,
            format!("tls_server_config.{key}: `{other}` is not TLS12 or TLS13"),
        )),
    }
}

/// `http_server_config`: the response headers it adds.
fn http(at: &Path, h: RawHttp) -> Result<BTreeMap<String, String>, WebConfigError> {
    if h.http2 == Some(true) {
        return Err(invalid(
            at,
            "http_server_config.http2: pptune serves HTTP/1.1 only (every Prometheus scrapes it); remove the key or set it to false",
        ));
    }
    let mut headers = BTreeMap::new();
    for (k, v) in h.headers {
        let Some(known) = HEADERS.iter().find(|n| n.eq_ignore_ascii_case(&k)) else {
            return Err(invalid(
                at,
                format!(
                    "http_server_config.headers: `{k}` is not one of {}",
                    HEADERS.join(", ")
                ),
            ));
        };
        if v.chars().any(char::is_control) {
            return Err(invalid(
                at,
                format!(
                    "http_server_config.headers.{known}: a header value cannot hold control characters"
                ),
            ));
        }
        headers.insert((*known).to_owned(), v);
    }
    Ok(headers)
}

/// The bcrypt costs a web config may use. bcrypt's own range is 4..=31,
/// and each step doubles the work: cost 10 (what `htpasswd -B` and
/// exporter-toolkit's docs use) is ~50-80 ms a check on one core, 12 is
/// ~4 times that, 31 hours. Every request with a wrong password costs one
/// check (the daemon runs one at a time, `publish::http::web`), so a cost
/// past 12 makes each a denial of service of its own.
pub const BCRYPT_COSTS: std::ops::RangeInclusive<u32> = 4..=12;

/// `basic_auth_users`: names that can be sent, bcrypt hashes.
fn users(at: &Path, users: &BTreeMap<String, String>) -> Result<(), WebConfigError> {
    for (user, hash) in users {
        if user.is_empty() || user.contains(':') {
            return Err(invalid(
                at,
                format!("basic_auth_users: `{user}` cannot be a user name (empty, or with a `:`)"),
            ));
        }
        if !is_bcrypt(hash) {
            return Err(invalid(
                at,
                format!(
                    "basic_auth_users.{user}: not a bcrypt hash; make one with `htpasswd -nBC 10 {user}` (the part after the `:`)"
                ),
            ));
        }
        let cost: u32 = hash[4..6].parse().unwrap_or(0);
        if !BCRYPT_COSTS.contains(&cost) {
            return Err(invalid(
                at,
                format!(
                    "basic_auth_users.{user}: bcrypt cost {cost} is outside {}..={}: {}; make one with `htpasswd -nBC 10 {user}`",
                    BCRYPT_COSTS.start(),
                    BCRYPT_COSTS.end(),
                    if cost < *BCRYPT_COSTS.start() {
                        "no bcrypt library verifies it"
                    } else {
                        "each check of a password would hold a CPU for seconds or more, and every request with a wrong password costs one"
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// `$2a$`, `$2b$` or `$2y$`, a two-digit cost and 53 characters of salt
/// and hash: what htpasswd -B and every bcrypt library write.
fn is_bcrypt(h: &str) -> bool {
    let b = h.as_bytes();
    h.len() == 60
        && (h.starts_with("$2a$") || h.starts_with("$2b$") || h.starts_with("$2y$"))
        && b[4].is_ascii_digit()
        && b[5].is_ascii_digit()
        && b[6] == b'$'
        && b[7..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'.' || *c == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$2y$10$X0nJbOdcD2OBnL0cGLx5cuHs7nYQnPZo7R2zb3mShVbDl.VHWsPKW";

    fn parse(text: &str) -> Result<WebConfig, String> {
        parse_web_config(Path::new("/etc/pptune/web.yml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn node_exporters_format_is_read_with_paths_from_the_files_directory() {
        let c = parse(&format!(
            "tls_server_config:\n  cert_file: s.crt\n  key_file: /k/s.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\nhttp_server_config:\n  headers:\n    strict-transport-security: max-age=1\nbasic_auth_users:\n  prom: '{HASH}'\n"
        ))
        .unwrap();
        let t = c.tls.unwrap();
        assert_eq!(t.cert_file, Path::new("/etc/pptune/s.crt"));
        assert_eq!(t.key_file, Path::new("/k/s.key"));
        assert_eq!(
            t.client_ca_file.as_deref(),
            Some(Path::new("/etc/pptune/ca.crt"))
        );
        assert_eq!(t.client_auth, ClientAuth::Require);
        assert_eq!(
            (t.min_version, t.max_version),
            (TlsVersion::Tls13, TlsVersion::Tls13)
        );
        assert_eq!(c.headers["Strict-Transport-Security"], "max-age=1");
        assert_eq!(c.basic_auth_users["prom"], HASH);
        // An empty file: plain HTTP, nobody asked for more.
        let c = parse("").unwrap();
        assert!(c.tls.is_none() && c.basic_auth_users.is_empty());
    }

    /// `check` accepted bcrypt cost 99 (never verifies) and 31 (hours a
    /// check); the variant: 13, just past the range, and 03, below it.
    /// The range's ends load.
    #[test]
    fn bcrypt_costs_outside_the_range_are_refused() {
        let with_cost = |c: &str| {
            parse(&format!(
                "basic_auth_users:\n  prom: '{}'\n",
                HASH.replacen("$10$", &format!("${c}$"), 1)
            ))
        };
        for (cost, says) in [
            ("99", "bcrypt cost 99 is outside 4..=12"),
            ("31", "bcrypt cost 31 is outside 4..=12: each check"),
            ("13", "bcrypt cost 13 is outside 4..=12"),
            ("03", "bcrypt cost 3 is outside 4..=12: no bcrypt library"),
        ] {
            let e = with_cost(cost).unwrap_err();
            assert!(e.contains(says), "{cost}: {e}");
        }
        for cost in ["04", "10", "12"] {
            with_cost(cost).unwrap();
        }
    }

    /// Whatever asks for a protection pptune would not give is refused,
    /// by name, with where.
    #[test]
    fn what_pptune_does_not_implement_is_refused_not_ignored() {
        let cases = [
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
                "web.yml:4:3: unknown field `cipher_suites`",
            ),
            (
                "tls_server_config:\n  cert_file: a\n",
                "needs both cert_file and key_file",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n",
                "without verifying them",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
                "client_ca_file is needed",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n",
                "TLS 1.2 and 1.3 only",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n",
                "min_version is above max_version",
            ),
            ("http_server_config:\n  http2: true\n", "HTTP/1.1 only"),
            (
                "http_server_config:\n  headers:\n    Set-Cookie: a\n",
                "`Set-Cookie` is not one of",
            ),
            (
                "basic_auth_users:\n  prom: secret\n",
                "basic_auth_users.prom: not a bcrypt hash",
            ),
            (
                "basic_auth_users:\n  prom: a\n  prom: b\n",
                "`prom` appears twice",
            ),
            (
                "rate_limit:\n  interval: 1s\n",
                "unknown field `rate_limit`",
            ),
            ("- a\n", "web.yml:1:1:"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
            assert!(
                !e.contains("DuplicateKeyPolicy") && !e.contains("struct "),
                "{e}"
            );
        }
    }
}
