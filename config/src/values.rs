//! The text forms policy values take: durations, byte sizes, times of
//! day, listen addresses and PCI models, each parsed in one place for the
//! policy files and the command line alike.

use std::net::SocketAddr;
use std::time::Duration;

/// What a listen address may look like, for hints.
pub const LISTEN_EXAMPLES: &str = "e.g. 127.0.0.1:9864, [::1]:9864, or :9864 for every address";

/// A listen address as `--metrics-listen` and `daemon.metrics_listen`
/// take it: `address:port`, or `:port` for every address (node_exporter's
/// `--web.listen-address=:9100`), which is `[::]:port` served dual-stack
/// (IPv4 too; `0.0.0.0` where the host has no IPv6).
#[must_use]
pub fn parse_listen(s: &str) -> Option<SocketAddr> {
    match s.strip_prefix(':') {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .map(|p| SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, p))),
        None => s.parse().ok(),
    }
}

/// The longest duration any policy key accepts. Every timer the daemon
/// arms is "now + a policy duration" (or a small multiple of one): bounding
/// them here keeps that arithmetic far from `Instant`'s range, and no
/// tuning term needs more than a month.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
pub(crate) const MAX_DURATION_TEXT: &str = "720h (30 days)";

/// `10s`, `5m`, `1h30m`, `250ms`.
#[must_use]
pub fn parse_duration(s: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        let n: u64 = rest.get(..digits)?.parse().ok()?;
        let after = rest.get(digits..)?;
        let (unit_len, d) = if after.starts_with("ms") {
            (2, Duration::from_millis(n))
        } else if after.starts_with('s') {
            (1, Duration::from_secs(n))
        } else if after.starts_with('m') {
            (1, Duration::from_secs(n.checked_mul(60)?))
        } else if after.starts_with('h') {
            (1, Duration::from_secs(n.checked_mul(3600)?))
        } else {
            return None;
        };
        total = total.checked_add(d)?;
        rest = after.get(unit_len..)?;
    }
    Some(total)
}

/// `4096`, `512MiB`, `2 GiB`, `1GB`.
#[must_use]
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s.get(..split)?.parse().ok()?;
    let mult: u64 = match s.get(split..)?.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

pub(crate) fn parse_hhmm(s: &str) -> Option<u16> {
    let (h, m) = s.trim().split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let h: u16 = h.parse().ok()?;
    let m: u16 = m.parse().ok()?;
    (m < 60 && (h < 24 || (h == 24 && m == 0))).then_some(h * 60 + m)
}

/// `vendor:device`, four lower-case hex digits each (what sysfs gives and
/// `lspci -n` prints).
pub(crate) fn is_pci_model(m: &str) -> bool {
    let b = m.as_bytes();
    b.len() == 9
        && b.get(4) == Some(&b':')
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("10s", Some(10_000)),
            ("5m", Some(300_000)),
            ("1h30m", Some(5_400_000)),
            ("250ms", Some(250)),
            ("1m30s", Some(90_000)),
            ("10", None),
            ("s", None),
            ("10 s", None),
            ("", None),
            ("1d", None),
        ];
        for (s, ms) in cases {
            assert_eq!(
                parse_duration(s).map(|d| u64::try_from(d.as_millis()).unwrap()),
                ms,
                "{s}"
            );
        }
    }

    #[test]
    fn sizes_and_times() {
        assert_eq!(parse_bytes("4GiB"), Some(4 << 30));
        assert_eq!(parse_bytes("512 MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("1GB"), Some(1_000_000_000));
        assert_eq!(parse_bytes("12"), Some(12));
        assert_eq!(parse_bytes("4gb"), None);
        assert_eq!(parse_hhmm("22:30"), Some(1350));
        assert_eq!(parse_hhmm("24:00"), Some(1440));
        assert_eq!(parse_hhmm("24:01"), None);
        assert_eq!(parse_hhmm("7:5"), None);
    }
}
