//! The HTTP endpoint: `/metrics`, `/healthz`, `/livez`, `/readyz`, on
//! hyper's HTTP/1 server.
//!
//! - `/metrics` negotiates the format from `Accept`: OpenMetrics 1.0 when the
//!   scraper asks for `application/openmetrics-text` (Prometheus does), else
//!   the 0.0.4 text format (`curl`, `promtool check metrics`); gzip when
//!   `Accept-Encoding` allows it.
//! - `/healthz`: the process answers. `/livez`: the control loop passed
//!   within `health::LOOP_DEADLINE` (the watchdog's rule; 503 otherwise).
//!   `/readyz`: the last successful sample is younger than two intervals
//!   and the policy is valid (503 otherwise); each with a JSON body saying
//!   why.
//! - GET and HEAD; keep-alive; requests bounded in size; a client that does
//!   not send its headers in time is dropped; at most
//!   [`Limits::max_connections`] connections are open at once, and a new one
//!   evicts an idle or stuck one rather than wait behind it, so no client
//!   starves the probes ([`admission`]); a connection is closed after
//!   [`Limits::connection_lifetime`] (after its request in flight).
//! - Rendering and compression run on the blocking pool, never on the
//!   loop's thread, and concurrent scrapes share one render: a request
//!   reuses a render that started after it arrived, so it is never older
//!   than the request, and a burst of scrapes costs about two renders.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::publish::metrics::Metrics;

mod admission;
mod format;
pub mod web;
mod worker;
use admission::{Admission, Ticket, Tracked};
use format::gzip;
pub use format::{Format, OPENMETRICS, TEXT_004, accepts_gzip, negotiate, openmetrics_to_text004};
pub use web::{Web, WebError};

/// Resource bounds of the server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; a further one evicts an idle or stuck one
    /// ([`admission`]).
    pub max_connections: usize,
    /// A client must send a request's headers within this time (also the
    /// idle time allowed between keep-alive requests).
    pub header_read_timeout: Duration,
    /// The largest request head accepted (hyper's read buffer; at least
    /// 8192).
    pub max_request_bytes: usize,
    /// A connection is closed after this long (after its request in flight).
    pub connection_lifetime: Duration,
    /// A connection with no request in flight for this long may be evicted
    /// when the table is full ([`admission`]).
    pub idle_grace: Duration,
    /// A request whose response is still unwritten after this long (a
    /// client that does not read) may be evicted when the table is full.
    pub response_deadline: Duration,
}

/// Connections open at once by default: 1024, or half the descriptors the
/// process may open when that is fewer (the rest stay for netlink, the
/// recording and the journal; the unit sets `LimitNOFILE=4096`). An idle
/// connection costs a task and its buffers; the cap is well above what a
/// scrape storm holds (550 in `daemon_metrics`), so admission evicts only
/// under a flood.
fn default_max_connections() -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 2)
        .unwrap_or(usize::MAX)
        .clamp(16, 1024)
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: default_max_connections(),
            header_read_timeout: Duration::from_secs(5),
            max_request_bytes: 16 * 1024,
            connection_lifetime: Duration::from_secs(120),
            idle_grace: Duration::from_millis(100),
            response_deadline: Duration::from_secs(10),
        }
    }
}

/// One render of the exposition and the variants derived from it.
#[derive(Debug)]
struct Rendered {
    started: Instant,
    /// OpenMetrics; 0.0.4 text; OpenMetrics gzipped; text gzipped.
    variants: [Option<Bytes>; 4],
}

/// The shared render (see the module docs).
#[derive(Debug)]
struct Exposition {
    metrics: Arc<Metrics>,
    cache: tokio::sync::Mutex<Option<Rendered>>,
}

/// Why `/metrics` could not be rendered (a 500 and a log line).
#[derive(Debug, thiserror::Error)]
enum RenderError {
    #[error("render task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("{0}")]
    Encode(#[from] std::fmt::Error),
    #[error("gzip: {0}")]
    Gzip(#[from] std::io::Error),
    /// The cache was filled just before: not reached.
    #[error("no render")]
    Missing,
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RenderError> + Send + 'static,
) -> Result<T, RenderError> {
    tokio::task::spawn_blocking(f).await?
}

impl Exposition {
    async fn get(&self, format: Format, gz: bool) -> Result<Bytes, RenderError> {
        let asked = Instant::now();
        let mut slot = self.cache.lock().await;
        if slot.as_ref().is_none_or(|r| r.started < asked) {
            let started = Instant::now();
            let m = Arc::clone(&self.metrics);
            let om = blocking(move || Ok(m.encode()?)).await?;
            *slot = Some(Rendered {
                started,
                variants: [Some(Bytes::from(om)), None, None, None],
            });
        }
        let Some(r) = slot.as_mut() else {
            return Err(RenderError::Missing);
        };
        let plain = usize::from(format == Format::Text004);
        if r.variants[plain].is_none() {
            let om = r.variants[0].clone().unwrap_or_default();
            let text =
                blocking(move || Ok(openmetrics_to_text004(&String::from_utf8_lossy(&om)))).await?;
            r.variants[plain] = Some(Bytes::from(text));
        }
        let want = plain + if gz { 2 } else { 0 };
        if r.variants[want].is_none() {
            let src = r.variants[plain].clone().unwrap_or_default();
            let z = blocking(move || Ok(gzip(&src)?)).await?;
            r.variants[want] = Some(Bytes::from(z));
        }
        let body = r.variants[want].clone().unwrap_or_default();
        drop(slot);
        // A render allocates and frees the most of anything the daemon
        // does: give back what it left resident.
        crate::heap::settle();
        Ok(body)
    }
}

#[derive(Debug)]
struct Server {
    exposition: Exposition,
}

fn header_str<'a>(req: &'a Request<Incoming>, name: &header::HeaderName) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

fn response(
    status: StatusCode,
    ctype: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

/// A probe's answer: 200 when it passes, else 503, with its reasons.
fn probe(passes: bool, v: &impl serde::Serialize) -> Response<Full<Bytes>> {
    let status = if passes {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(status, v)
}

fn json(status: StatusCode, v: &impl serde::Serialize) -> Response<Full<Bytes>> {
    let mut body = serde_json::to_vec(v).unwrap_or_default();
    body.push(b'\n');
    let mut r = response(status, "application/json", body);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

impl Server {
    async fn respond(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = response(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                "GET or HEAD only\n",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        match req.uri().path() {
            "/metrics" => self.metrics(&req).await,
            "/healthz" => json(StatusCode::OK, &serde_json::json!({"status": "ok"})),
            "/livez" => {
                let l = self.exposition.metrics.health.liveness();
                probe(l.alive, &l)
            }
            "/readyz" => {
                let r = self.exposition.metrics.health.readiness();
                probe(r.ready, &r)
            }
            "/" => response(
                StatusCode::OK,
                "text/plain; charset=utf-8",
                "pptune: /metrics, /healthz, /livez, /readyz\n",
            ),
            _ => response(
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                "not found\n",
            ),
        }
    }

    async fn metrics(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        let format = negotiate(header_str(req, &header::ACCEPT));
        let gz = accepts_gzip(header_str(req, &header::ACCEPT_ENCODING));
        match self.exposition.get(format, gz).await {
            Ok(body) => {
                let mut r = response(StatusCode::OK, format.content_type(), body);
                let h = r.headers_mut();
                h.insert(
                    header::VARY,
                    HeaderValue::from_static("Accept, Accept-Encoding"),
                );
                if gz {
                    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                }
                r
            }
            Err(e) => {
                tracing::warn!(error = %crate::human::cause(&e), "rendering /metrics failed");
                response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain; charset=utf-8",
                    format!("encoding failed: {e}\n"),
                )
            }
        }
    }
}

/// A listener on `addr`; the unspecified IPv6 address (`:port`) is bound
/// dual-stack whatever `net.ipv6.bindv6only` says, and falls back to
/// `0.0.0.0` on a host without IPv6.
///
/// # Errors
/// The address is in use, not local, or not permitted.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let any6 = addr.ip() == std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED);
    let open = |addr: std::net::SocketAddr| -> std::io::Result<std::net::TcpListener> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        if addr.is_ipv6() && any6 {
            s.set_only_v6(false)?;
        }
        s.set_reuse_address(true)?;
        s.set_nonblocking(true)?;
        s.bind(&addr.into())?;
        s.listen(1024)?;
        Ok(s.into())
    };
    let std = match open(addr) {
        Err(e) if any6 && e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
            open((std::net::Ipv4Addr::UNSPECIFIED, addr.port()).into())?
        }
        r => r?,
    };
    TcpListener::from_std(std)
}

/// Serves with the default [`Limits`] until the task is dropped.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    serve_with(listener, metrics, Limits::default()).await;
}

/// Serves until the task is dropped.
pub async fn serve_with(listener: TcpListener, metrics: Arc<Metrics>, limits: Limits) {
    serve_secured(listener, metrics, limits, None).await;
}

/// Serves until the task is dropped, under `web`'s TLS and basic auth
/// when there is one (the configuration current when a connection is
/// accepted serves it: [`Web::current`]).
pub async fn serve_secured(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    limits: Limits,
    web: Option<Arc<Web>>,
) {
    let server = Arc::new(Server {
        exposition: Exposition {
            metrics,
            cache: tokio::sync::Mutex::new(None),
        },
    });
    let admission = Admission::new(
        limits.max_connections,
        limits.idle_grace,
        limits.response_deadline,
    );
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_request_bytes.max(8192));
    let mut failures = crate::publish::logging::AcceptFailures::new("metrics");
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // EMFILE and friends: said, and a short pause.
                failures.failed(&e).await;
                continue;
            }
        };
        let ticket = admission.place().await;
        let _ = stream.set_nodelay(true);
        let server = Arc::clone(&server);
        let web = web.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            // Off the accept loop: a re-read waits here, not there. The
            // server's work, not the client's idle time: the client's
            // grace starts when it ends and the server reads (a re-read or
            // a loaded host delayed the server, not the client).
            let active = {
                let _server_works = ticket.begin();
                match &web {
                    Some(w) => Some(w.current().await),
                    None => None,
                }
            };
            match active.as_ref().and_then(|a| a.tls.clone()) {
                None => drive(builder, stream, server, active, ticket, limits).await,
                Some(acceptor) => {
                    // The handshake is bounded like a request's headers,
                    // and under admission like an idle connection: a
                    // stalled one is evicted when a new one needs its
                    // slot. A whole ClientHello shows a TLS client at
                    // work: the rest of the handshake gets a grace of its
                    // own, so a probe slowed by a loaded host is not cut
                    // off by a flood of connections that send nothing.
                    let conn = ticket.conn();
                    let hs = async {
                        let hello = tokio_rustls::LazyConfigAcceptor::new(
                            rustls::server::Acceptor::default(),
                            stream,
                        )
                        .await?;
                        conn.waiting();
                        hello.into_stream(Arc::clone(acceptor.config())).await
                    };
                    let r = tokio::select! {
                        r = tokio::time::timeout(limits.header_read_timeout, hs) => r,
                        () = conn.evicted() => {
                            tracing::debug!("TLS handshake evicted");
                            return;
                        }
                    };
                    match r {
                        Ok(Ok(tls)) => drive(builder, tls, server, active, ticket, limits).await,
                        Ok(Err(e)) => {
                            tracing::debug!(error = %crate::human::cause(&e), "TLS handshake failed")
                        }
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

/// One connection, plain or TLS, until it ends, is evicted or has lived
/// its lifetime.
async fn drive<I>(
    builder: http1::Builder,
    io: I,
    server: Arc<Server>,
    active: Option<Arc<web::Active>>,
    ticket: Arc<Ticket>,
    limits: Limits,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let t = Arc::clone(&ticket);
    let conn = builder.serve_connection(
        TokioIo::new(io),
        service_fn(move |req| {
            let server = Arc::clone(&server);
            let active = active.clone();
            let busy = t.begin();
            async move {
                let r = match &active {
                    Some(a) => match a.authorized(req.headers()).await {
                        web::Auth::Allowed => server.respond(req).await,
                        web::Auth::Denied => unauthorized(),
                        web::Auth::Busy => checks_busy(),
                    },
                    None => server.respond(req).await,
                };
                let r = match &active {
                    Some(a) => a.decorate(r),
                    None => r,
                };
                Ok::<_, Infallible>(r.map(|body| Tracked::new(body, busy)))
            }
        }),
    );
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = ticket.conn().evicted() => {
            if ticket.conn().close_now() {
                return;
            }
            conn.as_mut().graceful_shutdown();
        }
        () = tokio::time::sleep(limits.connection_lifetime) => conn.as_mut().graceful_shutdown(),
    }
    // The request in flight gets one more header timeout to finish.
    let _ = tokio::time::timeout(limits.header_read_timeout, conn).await;
}

/// A request whose password could not be checked now (the checks are all
/// taken): asked to come back, not refused.
fn checks_busy() -> Response<Full<Bytes>> {
    let mut r = response(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain; charset=utf-8",
        "Busy: too many password checks waiting\n",
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

fn unauthorized() -> Response<Full<Bytes>> {
    let mut r = response(
        StatusCode::UNAUTHORIZED,
        "text/plain; charset=utf-8",
        "Unauthorized\n",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"pptune\""),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_the_scraper() {
        use Format::{OpenMetrics, Text004};
        // Prometheus 2.x and 3.x defaults.
        assert_eq!(
            negotiate(Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            )),
            OpenMetrics
        );
        assert_eq!(
            negotiate(Some(
                "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
            )),
            OpenMetrics
        );
        // A scraper that prefers the classic format, or says nothing.
        assert_eq!(
            negotiate(Some(
                "text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5"
            )),
            Text004
        );
        assert_eq!(negotiate(Some("*/*")), Text004);
        assert_eq!(negotiate(None), Text004);
        // A version we do not write is not OpenMetrics 1.0.
        assert_eq!(
            negotiate(Some("application/openmetrics-text;version=2.0.0")),
            Text004
        );
        assert_eq!(negotiate(Some("application/openmetrics-text;q=0")), Text004);
    }

    #[test]
    fn gzip_only_when_accepted() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, gzip;q=0.5")));
        assert!(accepts_gzip(Some("identity, *")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("identity")));
        assert!(!accepts_gzip(None));
    }

    #[test]
    fn text_format_names_counters_and_infos_by_their_samples() {
        let om = "# HELP a_things Things \\\"quoted\\\".\n# TYPE a_things counter\na_things_total{x=\"1\"} 3\n# HELP b_bytes Size.\n# TYPE b_bytes gauge\n# UNIT b_bytes bytes\nb_bytes 7\n# HELP c Build.\n# TYPE c info\nc_info{version=\"1\"} 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_text004(om),
            "# HELP a_things_total Things \"quoted\".\n# TYPE a_things_total counter\na_things_total{x=\"1\"} 3\n# HELP b_bytes Size.\n# TYPE b_bytes gauge\nb_bytes 7\n# HELP c_info Build.\n# TYPE c_info gauge\nc_info{version=\"1\"} 1\n"
        );
    }
}
