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

/// Sum of the samples of `family` in a text exposition whose label set
/// contains every `labels` entry (`key="value"`); 0 when none matches.
/// `family` must be the whole name: `pptune_pools` does not match
/// `pptune_pools_orphaned`.
#[must_use]
pub fn sample_sum(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sample_sum_matches_whole_family_names_and_every_label() {
        let text = "# HELP pptune_pools x\n\
                    pptune_pools{device=\"a\"} 2\n\
                    pptune_pools{device=\"b\"} 3\n\
                    pptune_pools_orphaned 7\n\
                    pptune_resyncs_total 4\n";
        assert!((super::sample_sum(text, "pptune_pools", &[]) - 5.0).abs() < 1e-9);
        assert!((super::sample_sum(text, "pptune_pools", &["device=\"b\""]) - 3.0).abs() < 1e-9);
        assert!((super::sample_sum(text, "pptune_resyncs_total", &[]) - 4.0).abs() < 1e-9);
        assert!(super::sample_sum(text, "pptune_pool", &[]).abs() < 1e-9);
        assert!(super::sample_sum(text, "pptune_pools", &["device=\"c\""]).abs() < 1e-9);
    }
}
