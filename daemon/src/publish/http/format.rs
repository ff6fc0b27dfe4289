//! What `/metrics` answers in: the format negotiated from `Accept`
//! (OpenMetrics 1.0 or the 0.0.4 text format, converted from the
//! OpenMetrics render), and gzip when `Accept-Encoding` allows it.

use std::io::Write as _;

/// The content type prometheus-client's text encoder writes.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Prometheus' classic text format.
pub const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Text004,
}

impl Format {
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => OPENMETRICS,
            Self::Text004 => TEXT_004,
        }
    }
}

/// The format for an `Accept` header: OpenMetrics only when asked for
/// explicitly (a version we write or none) and preferred at least as much
/// as plain text; anything else (`*/*`, no header) gets the 0.0.4 text.
#[must_use]
pub fn negotiate(accept: Option<&str>) -> Format {
    let (mut om, mut text) = (0.0f32, 0.0f32);
    for range in accept.unwrap_or("").split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let (mut q, mut version) = (1.0f32, None);
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.trim().parse().unwrap_or(0.0),
                    "version" => version = Some(v.trim().trim_matches('"').to_owned()),
                    _ => {}
                }
            }
        }
        match media.as_str() {
            "application/openmetrics-text"
                if version
                    .as_deref()
                    .is_none_or(|v| v == "1.0.0" || v == "0.0.1") =>
            {
                om = om.max(q);
            }
            "text/plain" | "text/*" | "*/*" => text = text.max(q),
            _ => {}
        }
    }
    if om > 0.0 && om >= text {
        Format::OpenMetrics
    } else {
        Format::Text004
    }
}

/// Whether `Accept-Encoding` allows gzip.
#[must_use]
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.unwrap_or("").split(',').any(|c| {
        let mut parts = c.split(';').map(str::trim);
        let coding = parts.next().unwrap_or("").to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, v)| v.trim().parse::<f32>().unwrap_or(0.0));
        matches!(coding.as_str(), "gzip" | "x-gzip" | "*") && q > 0.0
    })
}

/// The OpenMetrics exposition rewritten as the 0.0.4 text format: counter
/// families named with their `_total` sample name, `info` families as
/// gauges named `…_info`, no `# UNIT` and no `# EOF`, HELP escaped as 0.0.4
/// escapes it. Samples are unchanged.
#[must_use]
pub fn openmetrics_to_text004(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (suffix, ty) = match ty {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "stateset" | "gauge" => ("", "gauge"),
                "histogram" | "gaugehistogram" => ("", "histogram"),
                "summary" => ("", "summary"),
                _ => ("", "untyped"),
            };
            if let Some((h_name, text)) = help.take()
                && h_name == name
            {
                out.push_str("# HELP ");
                out.push_str(name);
                out.push_str(suffix);
                out.push(' ');
                out.push_str(&text.replace("\\\"", "\""));
                out.push('\n');
            }
            out.push_str("# TYPE ");
            out.push_str(name);
            out.push_str(suffix);
            out.push(' ');
            out.push_str(ty);
            out.push('\n');
        } else if line.starts_with("# UNIT ") || line == "# EOF" {
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

pub(super) fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut e = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 8 + 64),
        flate2::Compression::default(),
    );
    e.write_all(data)?;
    e.finish()
}
