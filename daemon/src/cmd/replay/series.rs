//! `pptune replay --series`: one row per pass and device, A's columns and,
//! with `--against`, B's, paired by pass and device.

use std::collections::BTreeMap;
use std::io::Write;

use crate::publish::logging::action_text;
use crate::replay::{Basis, Point, Report};

use super::SeriesFormat;

/// A's and B's point of one device in one pass (either may be missing: the
/// two policies need not decide on the same devices).
type Row<'r> = (Option<&'r Point>, Option<&'r Point>);

/// The rows in pass order, devices by name within a pass.
fn rows<'r>(a: &'r Report, b: Option<&'r Report>) -> BTreeMap<(u64, &'r str), Row<'r>> {
    let mut rows: BTreeMap<(u64, &str), Row<'_>> = BTreeMap::new();
    for p in &a.series {
        rows.entry((p.pass, &p.device)).or_default().0 = Some(p);
    }
    for p in b.iter().flat_map(|b| &b.series) {
        rows.entry((p.pass, &p.device)).or_default().1 = Some(p);
    }
    rows
}

/// RFC 3339 in UTC with milliseconds.
pub(super) fn rfc3339(ms: u64) -> String {
    super::utc(ms, "%Y-%m-%dT%H:%M:%S%.3fZ")
}

/// A point's own columns, in the order of [`COLUMNS`].
fn columns(p: Option<&Point>) -> [Option<String>; 7] {
    let Some(p) = p else {
        return Default::default();
    };
    [
        p.ring_rx.map(|v| v.to_string()),
        p.rx_queues.map(|v| v.to_string()),
        p.action.as_ref().map(action_text),
        p.reason.map(|r| r.as_str().to_owned()),
        p.recycle_miss_share.map(|v| format!("{v:.6}")),
        p.slow_refill_share.map(|v| format!("{v:.6}")),
        Some(basis(p.basis).to_owned()),
    ]
}

const COLUMNS: [&str; 7] = [
    "ring_rx",
    "rx_queues",
    "action",
    "reason",
    "recycle_miss_share",
    "slow_refill_share",
    "basis",
];

fn basis(b: Basis) -> &'static str {
    match b {
        Basis::Observed => "observed",
        Basis::Modelled => "modelled",
    }
}

/// A point's own fields as JSON (`null` where there is none).
fn object(p: Option<&Point>) -> serde_json::Value {
    serde_json::json!({
        "ring_rx": p.and_then(|p| p.ring_rx),
        "rx_queues": p.and_then(|p| p.rx_queues),
        "action": p.and_then(|p| p.action.as_ref()).map(action_text),
        "reason": p.and_then(|p| p.reason).map(|r| r.as_str()),
        "recycle_miss_share": p.and_then(|p| p.recycle_miss_share),
        "slow_refill_share": p.and_then(|p| p.slow_refill_share),
        "basis": p.map(|p| basis(p.basis)),
    })
}

/// One CSV field (RFC 4180: quoted when it holds a comma, a quote or a
/// line break), control characters escaped as on every human line.
fn csv_field(s: &str) -> String {
    let s = crate::human::printable(s);
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.into_owned()
    }
}

/// Writes the series of `a` (and `b`) to `out`.
///
/// # Errors
/// Writing failed.
pub fn write(
    mut out: impl Write,
    format: SeriesFormat,
    a: &Report,
    b: Option<&Report>,
) -> std::io::Result<()> {
    let rows = rows(a, b);
    match format {
        SeriesFormat::Csv => {
            let mut head = vec!["time", "unix_ms", "interface"];
            head.extend(COLUMNS);
            let b_head: Vec<String> = COLUMNS.iter().map(|c| format!("b_{c}")).collect();
            if b.is_some() {
                head.extend(b_head.iter().map(String::as_str));
            }
            writeln!(out, "{}", head.join(","))?;
            for ((_, device), (pa, pb)) in &rows {
                let Some(ms) = pa.or(*pb).map(|p| p.unix_ms) else {
                    continue;
                };
                let mut line = vec![rfc3339(ms), ms.to_string(), csv_field(device)];
                let own = columns(*pa).into_iter();
                let other = b.map(|_| columns(*pb)).into_iter().flatten();
                line.extend(
                    own.chain(other)
                        .map(|c| c.as_deref().map(csv_field).unwrap_or_default()),
                );
                writeln!(out, "{}", line.join(","))?;
            }
        }
        SeriesFormat::Jsonl => {
            for ((_, device), (pa, pb)) in &rows {
                let Some(ms) = pa.or(*pb).map(|p| p.unix_ms) else {
                    continue;
                };
                let mut v = object(*pa);
                if let serde_json::Value::Object(m) = &mut v {
                    m.insert("time".into(), rfc3339(ms).into());
                    m.insert("unix_ms".into(), ms.into());
                    m.insert("interface".into(), (*device).into());
                    if b.is_some() {
                        m.insert("b".into(), object(*pb));
                    }
                }
                serde_json::to_writer(&mut out, &v)?;
                out.write_all(b"\n")?;
            }
        }
    }
    out.flush()
}

/// [`write`] to stdout.
///
/// # Errors
/// Writing to stdout failed.
pub fn print(format: SeriesFormat, a: &Report, b: Option<&Report>) -> std::io::Result<()> {
    let out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    write(out, format, a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_with_milliseconds_and_csv_fields_are_quoted_when_needed() {
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
        assert_eq!(csv_field("eth0"), "eth0");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("x\u{1b}[2J"), "x\\u{1b}[2J");
    }
}
