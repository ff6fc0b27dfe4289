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
    let mut s = TcpStream::connect(addr).ok()?;
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
