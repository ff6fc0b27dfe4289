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

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};

/// A device class: what `pptune_device_info` says of it (`None`: the
/// host did not know).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Class {
    pub driver: String,
    pub model: Option<String>,
    pub firmware: Option<String>,
    pub mtu: Option<u32>,
    pub speed: Option<u32>,
}

impl Class {
    /// `ice 8086:159b, firmware 4.40, MTU 1500, 25000 Mb/s`.
    fn describe(&self) -> String {
        let mut t = self.driver.clone();
        if let Some(m) = &self.model {
            let _ = write!(t, " {m}");
        }
        if let Some(f) = &self.firmware {
            let _ = write!(t, ", firmware {f}");
        }
        let _ = match self.mtu {
            Some(m) => write!(t, ", MTU {m}"),
            None => write!(t, ", any MTU"),
        };
        if let Some(s) = self.speed {
            let _ = write!(t, ", {s} Mb/s");
        }
        t
    }

    /// The prior's YAML flow mapping, the class's keys that are known.
    fn entry(&self, ring: u32) -> String {
        let mut t = format!("{{driver: {}", yaml_str(&self.driver));
        if let Some(m) = &self.model {
            let _ = write!(t, ", model: {}", yaml_str(m));
        }
        if let Some(f) = &self.firmware {
            let _ = write!(t, ", firmware: {}", yaml_str(f));
        }
        if let Some(m) = self.mtu {
            let _ = write!(t, ", mtu: {m}");
        }
        if let Some(s) = self.speed {
            let _ = write!(t, ", speed: {s}");
        }
        let _ = write!(t, ", ring_rx: {ring}}}");
        t
    }
}

/// One device's evidence: its host, its class, the ring it converged to.
#[derive(Debug, Clone, PartialEq)]
pub struct Converged {
    pub instance: String,
    pub class: Class,
    pub ring: u32,
}

/// What `suggest` is asked.
#[derive(Debug)]
pub struct SuggestArgs<'a> {
    pub prometheus: &'a str,
    pub since: Duration,
    pub min_hosts: u32,
    pub selector: &'a str,
    pub output: Option<&'a Path>,
}

/// `pptune fleet suggest`.
///
/// # Errors
/// Prometheus could not answer the query in full, or the drop-in could not
/// be written.
pub fn suggest(a: &SuggestArgs<'_>) -> anyhow::Result<ExitCode> {
    let range = promql_duration(a.since);
    let q = query(a.selector, &range);
    let rows = ask(a.prometheus, &q)?;
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
    read_back(&text, &rows, a.min_hosts)?;
    match a.output {
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
        // Labels pptune never writes (a blank driver, a model that is not
        // a PCI id) are not pptune's evidence: the policy would refuse them.
        if driver.trim().is_empty()
            || m["model"]
                .as_str()
                .is_some_and(|v| !v.is_empty() && !config::is_pci_model(v))
        {
            continue;
        }
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

/// Text for one YAML comment line: what came from outside (a label value
/// any exporter, federation source or remote write can set; the
/// Prometheus address and selector) cannot end the comment and start a
/// key. Every control character (newline and carriage return among them),
/// the Unicode line and paragraph separators, the byte-order mark and the
/// characters that reorder text are written as `\u{..}` escapes. The one
/// place comment text is made; every comment of the drop-in goes through
/// it.
fn comment(s: &str) -> String {
    let hidden = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            )
    };
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// The classes that get a prior (those with `min_hosts` hosts), each with
/// its devices, and the others.
fn by_class(rows: &[Converged]) -> BTreeMap<&Class, Vec<&Converged>> {
    let mut classes: BTreeMap<&Class, Vec<&Converged>> = BTreeMap::new();
    for r in rows {
        classes.entry(&r.class).or_default().push(r);
    }
    classes
}

/// A class's hosts (distinct) and its rings (sorted).
fn hosts_and_rings(devs: &[&Converged]) -> (u32, Vec<u32>) {
    let mut hosts: Vec<&str> = devs.iter().map(|d| d.instance.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let mut rings: Vec<u32> = devs.iter().map(|d| d.ring).collect();
    rings.sort_unstable();
    (u32::try_from(hosts.len()).unwrap_or(u32::MAX), rings)
}

/// The ring at quantile `q` of sorted, non-empty `rings`.
fn quantile(rings: &[u32], q: f64) -> u32 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((rings.len() - 1) as f64 * q).round() as usize;
    rings[i]
}

/// The priors the drop-in is meant to hold, as the policy has them.
fn meant(rows: &[Converged], min_hosts: u32) -> Vec<policy::policy::Prior> {
    by_class(rows)
        .into_iter()
        .filter_map(|(class, devs)| {
            let (n, rings) = hosts_and_rings(&devs);
            (n >= min_hosts).then(|| policy::policy::Prior {
                driver: class.driver.clone(),
                mtu: class.mtu,
                speed_mbps: class.speed,
                model: class.model.clone(),
                firmware: class.firmware.clone(),
                ring_rx: quantile(&rings, 0.5),
            })
        })
        .collect()
}

/// `text` parsed as a drop-in over the embedded default must be that
/// default with exactly the priors meant, nothing else.
///
/// # Errors
/// It does not parse, or says something the generator did not mean.
pub fn read_back(text: &str, rows: &[Converged], min_hosts: u32) -> anyhow::Result<()> {
    let got = config::parse_str("fleet suggest's drop-in", text).map_err(|e| {
        anyhow::anyhow!(
            "the generated drop-in does not parse (nothing written): {}",
            config::render(&e)
        )
    })?;
    let mut want =
        config::parse_str("empty", "{}").map_err(|e| anyhow::anyhow!("{}", config::render(&e)))?;
    want.priors = meant(rows, min_hosts);
    if got != want {
        bail!(
            "the generated drop-in says more than its priors (nothing written): a label value changed it"
        );
    }
    Ok(())
}

/// The drop-in: one prior per class with `min_hosts` hosts, the evidence
/// in comments, the classes left out listed.
#[must_use]
pub fn drop_in(rows: &[Converged], min_hosts: u32, source: &str) -> String {
    let classes = by_class(rows);
    let mut out = format!(
        "# Fleet priors, written by `pptune fleet suggest` from {}.\n\
         # Per class (driver, model, firmware, MTU, link speed): the median RX\n\
         # ring of the devices whose ring.rx change pptune judged effective and\n\
         # none reverted. A device pptune has not changed yet starts there\n\
         # (docs/policy.md, `priors`).\n\
         priors:\n",
        comment(source)
    );
    let mut left_out = Vec::new();
    let mut any = false;
    for (class, devs) in &classes {
        let (n, rings) = hosts_and_rings(devs);
        let what = comment(&class.describe());
        if n < min_hosts {
            left_out.push(format!("{what}: {n} host(s)"));
            continue;
        }
        any = true;
        let at = |q: f64| quantile(&rings, q);
        let _ = writeln!(
            out,
            "  # {what}: {n} hosts, {} devices; ring min {}, p10 {}, median {}, p90 {}, max {}",
            devs.len(),
            rings[0],
            at(0.1),
            at(0.5),
            at(0.9),
            rings[rings.len() - 1],
        );
        let _ = writeln!(out, "  - {}", class.entry(at(0.5)));
    }
    if !any {
        out = out.replace("priors:\n", "priors: []\n");
    }
    if !left_out.is_empty() {
        let _ = writeln!(
            out,
            "# No prior (fewer than {min_hosts} hosts): {}",
            left_out.join("; ")
        );
    }
    out
}

/// A name as a YAML scalar: plain when it is a plain word, double-quoted
/// otherwise (a model's colon, a firmware's spaces), with `"` and `\`
/// escaped and every character YAML may not carry raw or reads as a line
/// break (controls, DEL, C1, U+2028/9, the byte-order mark, U+FFFE/F) as a
/// `\u`/`\U` escape, which YAML reads back as that character.
fn yaml_str(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
    {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                let _ = if u32::from(c) <= 0xffff {
                    write!(out, "\\u{:04x}", u32::from(c))
                } else {
                    write!(out, "\\U{:08x}", u32::from(c))
                };
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
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

    fn row(instance: &str, driver: &str, mtu: Option<u32>, ring: u32) -> Converged {
        Converged {
            instance: instance.into(),
            class: Class {
                driver: driver.into(),
                model: None,
                firmware: None,
                mtu,
                speed: None,
            },
            ring,
        }
    }

    #[test]
    fn a_class_with_enough_hosts_gets_its_median_and_the_others_are_listed() {
        let rows = [
            row("a", "mlx5_core", Some(1500), 4096),
            row("b", "mlx5_core", Some(1500), 2048),
            row("c", "mlx5_core", Some(1500), 8192),
            row("c", "mlx5_core", Some(1500), 4096),
            row("d", "ice", Some(9000), 2048),
        ];
        let text = drop_in(&rows, 3, "test");
        assert!(
            text.contains("  - {driver: mlx5_core, mtu: 1500, ring_rx: 4096}\n"),
            "{text}"
        );
        assert!(text.contains("3 hosts, 4 devices"), "{text}");
        assert!(
            text.contains("# No prior (fewer than 3 hosts): ice, MTU 9000: 1 host(s)"),
            "{text}"
        );
        let p = config::parse_str("fleet.yaml", &text).unwrap();
        assert_eq!(p.priors.len(), 1);
        assert_eq!(p.priors[0].ring_rx, 4096);
        // Nothing with enough evidence: a valid drop-in with no prior.
        let none = drop_in(&rows, 10, "test");
        assert!(
            config::parse_str("fleet.yaml", &none)
                .unwrap()
                .priors
                .is_empty(),
            "{none}"
        );
    }

    /// A class with every key known: the prior names them all, quoted
    /// where YAML needs it, and the policy reads them back.
    #[test]
    fn a_whole_class_is_written_and_read_back() {
        let class = Class {
            driver: "ice".into(),
            model: Some("8086:159b".into()),
            firmware: Some("4.40 0x8001c967 1.3534.0".into()),
            mtu: Some(9000),
            speed: Some(25_000),
        };
        let rows: Vec<Converged> = ["a", "b"]
            .into_iter()
            .map(|h| Converged {
                instance: h.into(),
                class: class.clone(),
                ring: 2048,
            })
            .collect();
        let text = drop_in(&rows, 2, "test");
        assert!(
            text.contains(
                r#"  - {driver: ice, model: "8086:159b", firmware: "4.40 0x8001c967 1.3534.0", mtu: 9000, speed: 25000, ring_rx: 2048}"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "# ice 8086:159b, firmware 4.40 0x8001c967 1.3534.0, MTU 9000, 25000 Mb/s: 2 hosts"
            ),
            "{text}"
        );
        let p = config::parse_str("fleet.yaml", &text).unwrap();
        let prior = &p.priors[0];
        assert_eq!(
            (
                prior.model.as_deref(),
                prior.firmware.as_deref(),
                prior.mtu,
                prior.speed_mbps
            ),
            (
                Some("8086:159b"),
                Some("4.40 0x8001c967 1.3534.0"),
                Some(9000),
                Some(25_000)
            )
        );
    }

    #[test]
    fn every_answer_that_is_not_a_complete_vector_is_an_error() {
        let ok = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a","device":"eth0","driver":"ice","mtu":"1500","model":""},"value":[1,"4096"]}]}}"#;
        assert_eq!(
            parse_answer(200, ok).unwrap(),
            [row("a", "ice", Some(1500), 4096)]
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

    fn class_rows(class: &Class) -> Vec<Converged> {
        ["a", "b"]
            .into_iter()
            .map(|h| Converged {
                instance: h.into(),
                class: class.clone(),
                ring: 2048,
            })
            .collect()
    }

    /// A `firmware` label holding a newline wrote `mode: enforce` with a
    /// selector on `*` into the drop-in, and `check` passed it. Now it
    /// stays in its comment, escaped, and the drop-in holds its prior only.
    #[test]
    fn a_label_value_cannot_add_a_key_to_the_drop_in() {
        let class = Class {
            driver: "ice".into(),
            model: None,
            firmware: Some("1.0\nmode: enforce\nselectors:\n  - names: [\"*\"]\n#".into()),
            mtu: None,
            speed: None,
        };
        let rows = class_rows(&class);
        let text = drop_in(&rows, 2, "http://prom\r\nmode: enforce");
        read_back(&text, &rows, 2).unwrap();
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("mode") || l.starts_with("selectors")),
            "{text}"
        );
        let p = config::parse_str("fleet.yaml", &text).unwrap();
        assert_eq!(p.mode, policy::Mode::default(), "{text}");
        assert_eq!(p.priors[0].firmware, class.firmware);
    }

    /// What the generator did not mean is refused before anything is
    /// written, whatever put it there.
    #[test]
    fn a_drop_in_that_says_more_than_its_priors_is_refused() {
        let rows = class_rows(&Class {
            driver: "ice".into(),
            model: None,
            firmware: None,
            mtu: Some(1500),
            speed: None,
        });
        let text = drop_in(&rows, 2, "test");
        read_back(&text, &rows, 2).unwrap();
        for extra in [
            "mode: enforce\n",
            "priors: []\n",
            "timing:\n  interval: 1s\n",
        ] {
            let e = read_back(&format!("{text}{extra}"), &rows, 2).unwrap_err();
            assert!(e.to_string().contains("nothing written"), "{extra}: {e}");
        }
        // One prior fewer (fewer hosts than asked for) is not what was meant.
        assert!(read_back(&text, &rows, 3).is_err());
    }

    /// The variant: every control character, the Unicode line breaks, the
    /// byte-order mark and a bidi override, in every label: the drop-in
    /// reads back as exactly its priors, the labels as they were.
    #[test]
    fn every_control_character_in_a_label_round_trips() {
        let odd = (0u32..0x20)
            .chain([0x7f, 0x85, 0x9b, 0x2028, 0x2029, 0xfeff, 0x202e])
            .filter_map(char::from_u32);
        for c in odd {
            let class = Class {
                driver: format!("d{c}x"),
                model: Some("8086:159b".into()),
                firmware: Some(format!("f{c}")),
                mtu: None,
                speed: None,
            };
            let rows = class_rows(&class);
            let text = drop_in(&rows, 2, &format!("src{c}"));
            read_back(&text, &rows, 2).unwrap_or_else(|e| panic!("{:?}: {e}\n{text}", c));
            let p = config::parse_str("fleet.yaml", &text).unwrap();
            assert_eq!(p.priors[0].driver, class.driver, "{c:?}");
            assert_eq!(p.priors[0].model, class.model, "{c:?}");
            assert_eq!(p.priors[0].firmware, class.firmware, "{c:?}");
        }
    }

    #[test]
    fn durations_are_written_in_promql_units() {
        assert_eq!(promql_duration(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(promql_duration(Duration::from_secs(36 * 3600)), "36h");
        assert_eq!(promql_duration(Duration::from_secs(90)), "90s");
    }
}
