//! `pptune fleet suggest`: starting rings per device class from what the
//! fleet learned, read through the Prometheus HTTP API (instant query,
//! `/api/v1/query`), written as a policy drop-in (`priors`, docs/policy.md).
//!
//! The evidence is each device whose `ring.rx` change pptune judged
//! effective in the window and none reverted (`pptune_actions_total`), at
//! the ring it has now (`pptune_ring_entries`), in the class its
//! `pptune_device_info` gives (driver, model, firmware, MTU, link speed;
//! a label the host left empty is "any"). A class's prior is the median
//! of its devices' rings, and only a class with `--min-hosts` hosts gets
//! one. Holdout and observing hosts change nothing, so they give no
//! evidence. Any error from Prometheus (unreachable, an HTTP error, an
//! error answer, a partial answer, no series at all) ends the command
//! before anything is written.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
pub use config::fleet::{Class, Converged, drop_in, read_back, usable};

use super::args::{parse_duration, parse_prometheus};

/// `pptune fleet suggest`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SuggestArgs {
    /// The Prometheus (or Thanos/Mimir query) base URL, e.g.
    /// http://prometheus:9090; host:port alone means http://host:port.
    #[arg(long, value_name = "URL", value_parser = parse_prometheus)]
    pub prometheus: String,
    /// How far back to look (at most 720h).
    #[arg(long, value_name = "D", default_value = "168h", value_parser = parse_duration)]
    pub since: std::time::Duration,
    /// Hosts a class needs for a prior; fewer get none.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub min_hosts: u32,
    /// The label matchers that pick pptune's series.
    #[arg(long, value_name = "MATCHERS", default_value = r#"job="pptune""#)]
    pub selector: String,
    /// The drop-in to write (default: standard output); written only
    /// when the query succeeded.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `pptune fleet suggest`.
///
/// # Errors
/// Prometheus could not answer the query in full, or the drop-in could not
/// be written.
pub fn suggest(a: &SuggestArgs) -> anyhow::Result<ExitCode> {
    let range = promql_duration(a.since);
    let q = query(&a.selector, &range);
    let rows = ask(&a.prometheus, &q)?;
    if rows.is_empty() {
        bail!(
            "Prometheus at {} has no tuned device in the last {range}: no host's ring.rx change was judged effective there (is the selector `{}` right, and does any host enforce?)",
            a.prometheus,
            a.selector
        );
    }
    let text = drop_in(
        &rows,
        a.min_hosts,
        &format!("{} (last {range}, {})", a.prometheus, a.selector),
    );
    // Parsed back before it goes anywhere: a label value that made it say
    // more than its priors is a bug here, and nothing is written.
    read_back(&text, &rows, a.min_hosts).map_err(anyhow::Error::msg)?;
    match a.output.as_deref() {
        Some(path) => write_atomically(path, &text)?,
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The PromQL: each tuned device's ring now, with its class. A
/// counter's `max_over_time` rather than `increase`: a counter born at 1
/// (the first effective change) has no increase Prometheus can see.
#[must_use]
pub fn query(selector: &str, range: &str) -> String {
    let sel = |extra: &str| format!("{{{selector}{extra}}}");
    format!(
        "max by (instance, device, {CLASS}) (\
           last_over_time(pptune_ring_entries{ring}[{range}]) \
           * on (instance, device) group_left ({CLASS}) \
           max by (instance, device, {CLASS}) (last_over_time(pptune_device_info{info}[{range}]))\
         ) \
         and on (instance, device) \
         (max by (instance, device) (max_over_time(pptune_actions_total{effective}[{range}])) > 0) \
         unless on (instance, device) \
         (max by (instance, device) (max_over_time(pptune_actions_total{taken_back}[{range}])) > 0)",
        CLASS = "driver, model, firmware, mtu, speed",
        ring = sel(r#", ring="rx""#),
        info = sel(""),
        effective = sel(r#", knob="ring.rx", result="effective""#),
        taken_back = sel(r#", knob="ring.rx", result="reverted""#),
    )
}

/// `7d`, `36h`, `90s`: the largest PromQL unit that divides the duration.
fn promql_duration(d: Duration) -> String {
    let s = d.as_secs().max(1);
    for (unit, secs) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if s.is_multiple_of(secs) {
            return format!("{}{unit}", s / secs);
        }
    }
    format!("{s}s")
}

/// Runs the instant query; the vector's rows, or what went wrong.
fn ask(base: &str, q: &str) -> anyhow::Result<Vec<Converged>> {
    let url = format!("{}/api/v1/query", base.trim_end_matches('/'));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                .build(),
        )
        .build()
        .into();
    let mut resp = agent
        .post(&url)
        .send_form([("query", q)])
        .with_context(|| format!("cannot reach Prometheus at {base}"))?;
    let status = resp.status();
    let body = resp
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_string()
        .with_context(|| format!("reading Prometheus' answer from {url}"))?;
    parse_answer(status.as_u16(), &body).with_context(|| format!("Prometheus at {base}"))
}

/// Prometheus' JSON answer to an instant query: its vector, or the error
/// it reports (HTTP status, `status: error`, warnings of a partial
/// answer, another result type).
///
/// # Errors
/// Any answer that is not a complete vector.
pub fn parse_answer(http: u16, body: &str) -> anyhow::Result<Vec<Converged>> {
    let v: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| anyhow::anyhow!("HTTP {http}, not a query answer ({e}): {}", excerpt(body)))?;
    if v["status"] != "success" || !(200..300).contains(&http) {
        bail!(
            "HTTP {http}: {} {}",
            v["errorType"].as_str().unwrap_or("error"),
            v["error"]
                .as_str()
                .map_or_else(|| excerpt(body), str::to_owned)
        );
    }
    if let Some(w) = v["warnings"].as_array().filter(|w| !w.is_empty()) {
        bail!(
            "a partial answer (warnings: {}): priors from part of the fleet would mislead",
            w.iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    if v["data"]["resultType"] != "vector" {
        bail!("the answer is a {}, not a vector", v["data"]["resultType"]);
    }
    let mut rows = Vec::new();
    for s in v["data"]["result"].as_array().into_iter().flatten() {
        let m = &s["metric"];
        let label = |k: &str| m[k].as_str().unwrap_or("").to_owned();
        let ring = s["value"][1]
            .as_str()
            .and_then(|x| x.parse::<f64>().ok())
            .filter(|r| r.is_finite() && *r >= 1.0 && *r <= f64::from(u32::MAX));
        let (driver, Some(ring)) = (label("driver"), ring) else {
            continue;
        };
        let some = |k: &str| Some(label(k)).filter(|v| !v.is_empty());
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        rows.push(Converged {
            instance: label("instance"),
            class: Class {
                driver,
                model: some("model"),
                firmware: some("firmware"),
                mtu: label("mtu").parse().ok(),
                speed: label("speed").parse().ok(),
            },
            ring: ring.round() as u32,
        });
        // Values pptune never exports (a blank driver, a model that is not
        // a PCI id, an MTU below 68, a ring out of range) are not pptune's
        // evidence: the policy would refuse the prior, and with it the
        // whole drop-in.
        if rows.last().is_some_and(|r| !usable(r)) {
            rows.pop();
        }
    }
    Ok(rows)
}

fn excerpt(body: &str) -> String {
    let b = body.trim();
    match b.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &b[..i]),
        None => b.to_owned(),
    }
}

/// Writes `text` to `path` through a temporary file in its directory and a
/// rename: a reader (a reload) sees the old drop-in or the new one.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fleet suggest --help` names the class by the fields it uses.
    /// `--prometheus host:9090` is plain HTTP to that host (it was "http:
    /// invalid format" from the HTTP client); a scheme other than http(s)
    /// or no host is refused by name.
    #[test]
    fn a_prometheus_without_a_scheme_is_http() {
        assert_eq!(parse_prometheus("host:9090").unwrap(), "http://host:9090");
        assert_eq!(
            parse_prometheus("https://thanos.example:10902/").unwrap(),
            "https://thanos.example:10902/"
        );
        for bad in [
            "ftp://host:9090",
            "http://",
            ":9090",
            "http://:9090",
            "a b:9090",
        ] {
            let e = parse_prometheus(bad).unwrap_err().to_string();
            assert!(e.contains("not a Prometheus base URL"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_answer_that_is_not_a_complete_vector_is_an_error() {
        let ok = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a","device":"eth0","driver":"ice","mtu":"1500","model":""},"value":[1,"4096"]}]}}"#;
        assert_eq!(
            parse_answer(200, ok).unwrap(),
            [Converged {
                instance: "a".into(),
                class: Class {
                    driver: "ice".into(),
                    model: None,
                    firmware: None,
                    mtu: Some(1500),
                    speed: None,
                },
                ring: 4096,
            }]
        );
        for (http, body, want) in [
            (500, "upstream broke", "HTTP 500, not a query answer"),
            (
                422,
                r#"{"status":"error","errorType":"execution","error":"query timed out"}"#,
                "HTTP 422: execution query timed out",
            ),
            (
                200,
                r#"{"status":"success","warnings":["store eu-1 unavailable"],"data":{"resultType":"vector","result":[]}}"#,
                "a partial answer (warnings: store eu-1 unavailable)",
            ),
            (
                200,
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
                "not a vector",
            ),
        ] {
            let e = parse_answer(http, body).unwrap_err().to_string();
            assert!(e.contains(want), "{http} {body}: {e}");
        }
    }

    /// A row with values pptune never exports (found by the `fleet` fuzz
    /// target: an `mtu` label of "0" made the whole drop-in fail to
    /// parse) is left out; the good row stays.
    #[test]
    fn rows_the_policy_would_refuse_are_not_evidence() {
        let row = |driver: &str, model: &str, mtu: &str, ring: &str| {
            format!(
                r#"{{"metric":{{"instance":"a","driver":"{driver}","model":"{model}","mtu":"{mtu}"}},"value":[1,"{ring}"]}}"#
            )
        };
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            [
                row("ice", "", "0", "4096"),
                row("ice", "bogus", "1500", "4096"),
                row(" ", "", "1500", "4096"),
                row("ice", "8086:159b", "1500", "4096"),
            ]
            .join(",")
        );
        let rows = parse_answer(200, &body).unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].class.model.as_deref(), Some("8086:159b"));
    }

    #[test]
    fn durations_are_written_in_promql_units() {
        assert_eq!(promql_duration(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(promql_duration(Duration::from_secs(36 * 3600)), "36h");
        assert_eq!(promql_duration(Duration::from_secs(90)), "90s");
    }
}
