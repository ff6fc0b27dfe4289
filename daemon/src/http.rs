//! A tiny HTTP/1.x server for `/metrics`: one request per connection, GET
//! only. Prometheus needs nothing more, and a web framework would be most
//! of the binary.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::metrics::Metrics;

/// The content type prometheus-client's text encoder writes.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Requests larger than this are not scrapes.
const MAX_REQUEST: usize = 8192;

/// Serves until the task is dropped. Each connection gets its own task and a
/// deadline, so a slow client cannot hold up a scrape or the loop.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // EMFILE and friends: back off briefly rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let m = Arc::clone(&metrics);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), handle(stream, &m)).await;
        });
    }
}

async fn handle(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() + n > MAX_REQUEST {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = buf.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => match metrics.encode() {
            Ok(b) => ("200 OK", OPENMETRICS, b),
            Err(_) => (
                "500 Internal Server Error",
                "text/plain",
                "encoding failed\n".to_owned(),
            ),
        },
        ("GET", "/") => (
            "200 OK",
            "text/plain",
            "pptune: metrics at /metrics\n".to_owned(),
        ),
        ("GET", _) => ("404 Not Found", "text/plain", "not found\n".to_owned()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n".to_owned(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
