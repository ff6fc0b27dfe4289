//! Logging: readable text on a terminal, JSON lines when stderr is not a
//! terminal (or with `--log-format json`), native journald fields under
//! systemd; one line per decision, identical repeated findings
//! deduplicated.
//!
//! One layer writes all three formats, so every event carries the same
//! fields everywhere. A decision's evidence is structured: a JSON object
//! `"evidence": {"recycle_miss_share": 0.5, …}`, journald fields
//! `PPTUNE_EVIDENCE_RECYCLE_MISS_SHARE=0.5`, `key=value` pairs on a
//! terminal. Decisions carry journald's `MESSAGE_ID`, one stable id per
//! reason code ([`message_id`]), so `journalctl MESSAGE_ID=…` finds every
//! recommendation of one kind. (`tracing-journald` prefixes every field,
//! `MESSAGE_ID` included, and cannot emit fields whose names are only known
//! at run time, which is why this module speaks the journal's native
//! protocol itself: one datagram per event.)

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal as _, Write as _};
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use policy::plan::{Action, Decision, ReasonCode};
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Failed `accept`s of a listener (out of descriptors: `EMFILE`,
/// `ENFILE`), said at warning level: the first at once, then at most one
/// line a minute with how many failed since, so a descriptor shortage is
/// seen without flooding the log.
#[derive(Debug)]
pub struct AcceptFailures {
    what: &'static str,
    last: Option<tokio::time::Instant>,
    since: u64,
}

impl AcceptFailures {
    #[must_use]
    pub fn new(what: &'static str) -> Self {
        Self {
            what,
            last: None,
            since: 0,
        }
    }

    /// One failure, said as above; then a short pause, so that a listener
    /// out of descriptors backs off instead of spinning.
    pub async fn failed(&mut self, e: &std::io::Error) {
        self.say(e);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    fn say(&mut self, e: &std::io::Error) {
        self.since += 1;
        let now = tokio::time::Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(60))
        {
            return;
        }
        tracing::warn!(
            listener = self.what,
            error = %crate::human::cause(e),
            failed = self.since,
            "accepting a connection failed (out of file descriptors? LimitNOFILE, and what holds them: ls /proc/<pid>/fd); retrying in 100 ms"
        );
        self.last = Some(now);
        self.since = 0;
    }
}

/// The journal's native socket.
const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// Field names with a meaning of their own.
const EVIDENCE: &str = "evidence";
const MESSAGE_ID: &str = "message_id";

/// A resolved output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Journald,
}

/// Whether stderr is the journal stream systemd connected
/// (`$JOURNAL_STREAM` is `device:inode` of that stream; a child that
/// redirected stderr elsewhere must not log to the journal).
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = v.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    std::fs::metadata("/proc/self/fd/2")
        .is_ok_and(|m| dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()))
}

/// How `run` writes its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// journald when stderr is the journal (under systemd), readable text
    /// on a terminal, JSON lines otherwise.
    Auto,
    /// Readable text.
    Human,
    /// One JSON object per line.
    Json,
    /// Native journald fields (needs the journal socket).
    Journald,
}

/// `auto` → journald under systemd, text on a terminal, JSON otherwise.
#[must_use]
pub fn resolve(format: LogFormat) -> Format {
    match format {
        LogFormat::Human => Format::Human,
        LogFormat::Json => Format::Json,
        LogFormat::Journald => Format::Journald,
        LogFormat::Auto if stderr_is_journal() => Format::Journald,
        LogFormat::Auto if std::io::stderr().is_terminal() => Format::Human,
        LogFormat::Auto => Format::Json,
    }
}

/// The log filter: `PPTUNE_LOG` (an `EnvFilter` directive list, e.g.
/// `debug` or `pptune=debug,info`), `info` when it is unset or empty.
///
/// # Errors
/// `PPTUNE_LOG` is set but not a filter (it silently became `info`, so a
/// `PPTUNE_LOG=pptune=verbose` while chasing a problem showed nothing new), or not
/// UTF-8.
pub fn filter_from_env() -> Result<EnvFilter, FilterError> {
    match std::env::var("PPTUNE_LOG") {
        Err(std::env::VarError::NotPresent) => Ok(EnvFilter::new("info")),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(FilterError::NotUtf8(v.to_string_lossy().into_owned()))
        }
        Ok(v) if v.trim().is_empty() => Ok(EnvFilter::new("info")),
        Ok(v) => EnvFilter::builder()
            .parse(&v)
            .map_err(|e| FilterError::NotAFilter(v, e)),
    }
}

/// Why `PPTUNE_LOG` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("PPTUNE_LOG is not UTF-8 ({0})")]
    NotUtf8(String),
    #[error("PPTUNE_LOG=`{0}` is not a log filter: {1} (e.g. info, debug, pptune=debug,warn)")]
    NotAFilter(String, tracing_subscriber::filter::ParseError),
}

/// Installs the subscriber once, in the binary, with `filter`
/// ([`filter_from_env`]). Journald that cannot be reached falls back to
/// JSON on stderr, saying so.
pub fn init(format: LogFormat, filter: EnvFilter) {
    let mut format = resolve(format);
    let mut journal = None;
    let mut fallback = None;
    if format == Format::Journald {
        match UnixDatagram::unbound().and_then(|s| s.connect(JOURNAL_SOCKET).map(|()| s)) {
            Ok(s) => journal = Some(s),
            Err(e) => {
                fallback = Some(e);
                format = Format::Json;
            }
        }
    }
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(Sink {
            format,
            journal,
            out: Box::new(|b| {
                // Nothing sensible is left to do when stderr is gone.
                let _ = std::io::stderr().lock().write_all(b);
            }),
        })
        .try_init();
    if let Some(e) = fallback {
        tracing::warn!(error = %crate::human::cause(&e), socket = JOURNAL_SOCKET, "journald unreachable: logging JSON lines to stderr");
    }
}

/// journald's `MESSAGE_ID` for decisions with this reason: 32 hex digits,
/// FNV-1a 128 of `pptune.decision.<reason>`. Stable across versions and
/// hosts (a test pins one value); `docs/install.md` lists how to query it.
#[must_use]
pub fn message_id(reason: ReasonCode) -> String {
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in format!("pptune.decision.{}", reason.as_str()).bytes() {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    format!("{h:032x}")
}

/// Where a finished text or JSON line goes.
type Out = Box<dyn Fn(&[u8]) + Send + Sync>;

/// The layer that writes every event in the chosen format.
struct Sink {
    format: Format,
    journal: Option<UnixDatagram>,
    /// Where a text or JSON line goes: stderr (a buffer in tests).
    out: Out,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("format", &self.format)
            .finish()
    }
}

/// An event's fields in the order they were written.
#[derive(Default)]
struct Fields {
    message: String,
    message_id: Option<String>,
    evidence: Map<String, Value>,
    pairs: Vec<(&'static str, Value)>,
}

impl Visit for Fields {
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.pairs.push((f.name(), Value::from(v)));
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.pairs.push((f.name(), Value::from(v)));
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.pairs.push((f.name(), Value::from(v)));
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.pairs.push((f.name(), Value::from(v)));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        match f.name() {
            "message" => v.clone_into(&mut self.message),
            MESSAGE_ID => self.message_id = Some(v.to_owned()),
            // Written by `DecisionLog` as a JSON object.
            EVIDENCE => match serde_json::from_str(v) {
                Ok(Value::Object(m)) => self.evidence = m,
                _ => self.pairs.push((EVIDENCE, Value::from(v))),
            },
            n => self.pairs.push((n, Value::from(v))),
        }
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        let text = format!("{v:?}");
        self.record_str(f, &text);
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value on a text line: quoted when it has spaces or is empty, so
/// `key=value` pairs stay readable. (A value of several lines is not
/// written here: see [`Sink::human`].)
fn text_pair(v: &Value) -> String {
    let t = text(v);
    if t.is_empty() || t.contains(char::is_whitespace) {
        format!("{t:?}")
    } else {
        t
    }
}

fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Journal field name: upper case, `[A-Z0-9_]`.
fn journal_name(parts: &[&str]) -> String {
    parts
        .join("_")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// One field in the journal's binary-safe encoding.
fn journal_field(buf: &mut Vec<u8>, name: &str, value: &str) {
    buf.extend_from_slice(name.as_bytes());
    buf.push(b'\n');
    buf.extend_from_slice(&(value.len() as u64).to_le_bytes());
    buf.extend_from_slice(value.as_bytes());
    buf.push(b'\n');
}

fn priority(level: Level) -> &'static str {
    match level {
        Level::ERROR => "3",
        Level::WARN => "4",
        Level::INFO => "6",
        Level::DEBUG | Level::TRACE => "7",
    }
}

impl Sink {
    fn json(meta: &tracing::Metadata<'_>, f: &Fields) -> String {
        let mut m = Map::new();
        m.insert("timestamp".into(), timestamp().into());
        m.insert("level".into(), meta.level().as_str().into());
        m.insert("target".into(), meta.target().into());
        m.insert("message".into(), f.message.clone().into());
        if let Some(id) = &f.message_id {
            m.insert(MESSAGE_ID.into(), id.clone().into());
        }
        for (k, v) in &f.pairs {
            m.insert((*k).to_owned(), v.clone());
        }
        if !f.evidence.is_empty() {
            m.insert(EVIDENCE.into(), Value::Object(f.evidence.clone()));
        }
        let mut line = Value::Object(m).to_string();
        line.push('\n');
        line
    }

    fn human(meta: &tracing::Metadata<'_>, f: &Fields) -> String {
        let mut line = format!(
            "{} {:>5} {}",
            crate::clock::local_now().strftime("%H:%M:%S%.3f"),
            meta.level().as_str(),
            f.message
        );
        // A value of several lines (a policy file's problems, an error
        // with its causes) goes below the line, indented, as a person
        // would write it; quoted on the line it would read `\n`.
        let mut below = Vec::new();
        for (k, v) in &f.pairs {
            match v {
                Value::String(t) if t.trim_end().contains('\n') => below.push((k, t)),
                _ => {
                    let _ = write!(line, " {k}={}", text_pair(v));
                }
            }
        }
        if !f.evidence.is_empty() {
            line.push_str(" evidence:");
            for (k, v) in &f.evidence {
                let _ = write!(line, " {k}={}", text(v));
            }
        }
        for (k, t) in below {
            let _ = write!(line, "\n    {k}:");
            for l in t.trim_end().lines() {
                let _ = write!(line, "\n      {l}");
            }
        }
        line.push('\n');
        // What the kernel and the files name (an interface, a path, an
        // error's text) cannot move a terminal's cursor or forge a line.
        crate::human::printable(&line).into_owned()
    }

    fn journal(meta: &tracing::Metadata<'_>, f: &Fields) -> Vec<u8> {
        let mut buf = Vec::with_capacity(512);
        journal_field(&mut buf, "PRIORITY", priority(*meta.level()));
        journal_field(&mut buf, "SYSLOG_IDENTIFIER", "pptune");
        journal_field(&mut buf, "MESSAGE", &f.message);
        if let Some(id) = &f.message_id {
            journal_field(&mut buf, "MESSAGE_ID", id);
        }
        journal_field(&mut buf, "PPTUNE_TARGET", meta.target());
        for (k, v) in &f.pairs {
            journal_field(&mut buf, &journal_name(&["PPTUNE", k]), &text(v));
        }
        for (k, v) in &f.evidence {
            journal_field(&mut buf, &journal_name(&["PPTUNE_EVIDENCE", k]), &text(v));
        }
        buf
    }
}

impl<S: Subscriber> Layer<S> for Sink {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut f = Fields::default();
        event.record(&mut f);
        if let (Format::Journald, Some(sock)) = (self.format, &self.journal)
            && sock.send(&Self::journal(meta, &f)).is_ok()
        {
            return;
        }
        // Journald refused the datagram: stderr (the journal stream) still
        // gets the whole event.
        let line = match self.format {
            Format::Human => Self::human(meta, &f),
            Format::Json | Format::Journald => Self::json(meta, &f),
        };
        (self.out)(line.as_bytes());
    }
}

/// A short word for an action.
#[must_use]
pub fn action_kind(a: &Action) -> &'static str {
    match a {
        Action::Hold => "hold",
        Action::SetRing { .. } => "set_ring",
        Action::SetChannels { .. } => "set_channels",
    }
}

/// Human form of an action: `hold`, `ring.rx 256 -> 1024`.
#[must_use]
pub fn action_text(a: &Action) -> String {
    match a {
        Action::Hold => "hold".to_owned(),
        Action::SetRing { from, to, .. } | Action::SetChannels { from, to, .. } => {
            let knob = a.knob().map(|k| k.to_string()).unwrap_or_default();
            format!("{knob} {from} -> {to}")
        }
    }
}

/// Suppresses identical findings: a device's decision is logged when its
/// (action, reason, id) changes, and repeated at most every `remind` with the
/// count of suppressed repeats.
#[derive(Debug)]
pub struct DecisionLog {
    /// By device key: what its last line said.
    last: BTreeMap<String, Logged>,
    remind: Duration,
    /// The device key of the decision at hand, written in place.
    key: String,
}

/// What a device's last decision line said, and when; a repeat is the same
/// action, reason, id and mode (the message's numbers may differ).
#[derive(Debug)]
struct Logged {
    action: Action,
    reason: policy::plan::ReasonCode,
    id: String,
    mode: String,
    at: Duration,
    suppressed: u64,
}

impl Logged {
    fn repeats(&self, d: &Decision, mode: &str) -> bool {
        self.action == d.action && self.reason == d.reason && self.id == d.id.0 && self.mode == mode
    }
}

impl DecisionLog {
    #[must_use]
    pub fn new(remind: Duration) -> Self {
        Self {
            last: BTreeMap::new(),
            remind,
            key: String::new(),
        }
    }

    /// Forgets the devices `keep` refuses (gone, or no longer selected):
    /// the log remembers one line per device the host has now, not per
    /// device it ever had (a host whose NICs or containers come and go
    /// grew it by one entry per identity for the daemon's life). A device
    /// that comes back has its first decision logged again.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.last.retain(|k, _| keep(k));
    }

    /// Logs the decision unless it repeats the last one for the device.
    /// Returns whether a line was written. A repeat allocates nothing.
    pub fn log(&mut self, d: &Decision, effective_mode: &str, now: Duration) -> bool {
        self.key.clear();
        // Writing to a String cannot fail.
        let _ = d.device_id.write_key(&mut self.key);
        let suppressed = match self.last.get_mut(self.key.as_str()) {
            Some(l) if l.repeats(d, effective_mode) => {
                if now.saturating_sub(l.at) < self.remind {
                    l.suppressed += 1;
                    return false;
                }
                l.suppressed
            }
            _ => 0,
        };
        let evidence = serde_json::to_string(&d.evidence).unwrap_or_default();
        let mid = message_id(d.reason);
        macro_rules! decision_event {
            ($level:expr) => {
                tracing::event!(
                    target: "pptune::decision",
                    $level,
                    device = %d.device,
                    action = action_text(&d.action),
                    reason = d.reason.as_str(),
                    recommendation = %d.id,
                    mode = effective_mode,
                    message_id = mid.as_str(),
                    evidence = evidence.as_str(),
                    repeats_suppressed = suppressed,
                    "{}", d.message
                )
            };
        }
        // Only a change pptune is about to make warns: a hold, and what
        // observe mode merely recommends, change nothing and must not fire
        // log-based alerts.
        if effective_mode == "enforce" && !matches!(d.action, Action::Hold) {
            decision_event!(Level::WARN);
        } else {
            decision_event!(Level::INFO);
        }
        match self.last.get_mut(self.key.as_str()) {
            Some(l) => {
                l.action = d.action;
                l.reason = d.reason;
                l.id.clone_from(&d.id.0);
                effective_mode.clone_into(&mut l.mode);
                l.at = now;
                l.suppressed = 0;
            }
            None => {
                self.last.insert(
                    self.key.clone(),
                    Logged {
                        action: d.action,
                        reason: d.reason,
                        id: d.id.0.clone(),
                        mode: effective_mode.to_owned(),
                        at: now,
                        suppressed: 0,
                    },
                );
            }
        }
        true
    }

    /// Forgets everything (a reload may change every decision).
    pub fn reset(&mut self) {
        self.last.clear();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use policy::plan::{Knob, ReasonCode, RecommendationId, RingField};
    use policy::snapshot::DeviceId;

    /// A sampling error as the kernel sampler makes it: the log said only
    /// "dumping links" (its Display), dropping the netlink error and the
    /// decode failure under it. The variant: a cause whose text the outer
    /// message already quotes is not said twice.
    #[test]
    fn an_error_field_carries_every_cause() {
        let e = crate::sample::SampleError {
            context: "dumping links".into(),
            source: Some(Box::new(netlink::Error::Decode {
                op: "link-dump",
                source: netlink::CodecError::Truncated {
                    what: "ifinfomsg",
                    need: 16,
                    have: 3,
                },
            })),
        };
        let text = crate::human::cause(&e);
        assert!(
            text.starts_with("dumping links: link-dump: malformed reply: ")
                && text.contains("ifinfomsg"),
            "{text}"
        );
        let io = std::io::Error::other("disk full");
        let outer = anyhow::Error::new(io).context("writing x: disk full");
        assert_eq!(crate::human::cause(outer.as_ref()), "writing x: disk full");
    }

    fn decision(action: Action, reason: ReasonCode) -> Decision {
        let id = DeviceId {
            name_fallback: Some("eth0".into()),
            ..DeviceId::default()
        };
        Decision {
            ifindex: 2,
            device: "eth0".into(),
            id: RecommendationId::new(&id, action.knob(), reason),
            device_id: id,
            mode: policy::Mode::Observe,
            action,
            reason,
            message: "m".into(),
            evidence: [("recycle_miss_share", 0.5)].into_iter().collect(),
            baseline: None,
        }
    }

    use std::sync::{Arc, Mutex};

    /// Logs `d` through a sink of `format` and returns what it wrote: the
    /// text line, or the journal datagram.
    fn written(format: Format, d: &Decision, mode: &str) -> Vec<u8> {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let b2 = Arc::clone(&buf);
        let (ours, theirs) = UnixDatagram::pair().unwrap();
        let sink = Sink {
            format,
            journal: (format == Format::Journald).then_some(ours),
            out: Box::new(move |b| b2.lock().unwrap().extend_from_slice(b)),
        };
        let sub = tracing_subscriber::registry().with(sink);
        tracing::subscriber::with_default(sub, || {
            DecisionLog::new(Duration::from_secs(60)).log(d, mode, Duration::ZERO);
        });
        if format == Format::Journald {
            let mut dg = vec![0u8; 65536];
            theirs.set_nonblocking(true).unwrap();
            let n = theirs.recv(&mut dg).unwrap();
            dg.truncate(n);
            return dg;
        }
        buf.lock().unwrap().clone()
    }

    /// The journal's binary-safe fields back as (name, value).
    fn journal_fields(mut dg: &[u8]) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        while let Some(nl) = dg.iter().position(|&b| b == b'\n') {
            let name = String::from_utf8(dg[..nl].to_vec()).unwrap();
            let len = u64::from_le_bytes(dg[nl + 1..nl + 9].try_into().unwrap());
            let len = usize::try_from(len).unwrap();
            let v = String::from_utf8(dg[nl + 9..nl + 9 + len].to_vec()).unwrap();
            m.insert(name, v);
            dg = &dg[nl + 10 + len..];
        }
        m
    }

    fn grow() -> Decision {
        decision(
            Action::SetRing {
                field: RingField::Rx,
                from: 256,
                to: 2048,
            },
            ReasonCode::RecycleMissHigh,
        )
    }

    #[test]
    fn json_lines_carry_evidence_as_an_object_and_observe_is_info() {
        let out = written(Format::Json, &grow(), "observe");
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["level"], "INFO", "{v}");
        assert_eq!(v["evidence"]["recycle_miss_share"], 0.5, "{v}");
        assert_eq!(v["reason"], "recycle_miss_high");
        assert_eq!(v["message_id"], message_id(ReasonCode::RecycleMissHigh));
        assert_eq!(v["message"], "m");
        // Enforcing the same change warns.
        let out = written(Format::Json, &grow(), "enforce");
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["level"], "WARN", "{v}");
    }

    #[test]
    fn journald_gets_native_fields_and_an_unprefixed_message_id() {
        let f = journal_fields(&written(Format::Journald, &grow(), "observe"));
        assert_eq!(f["MESSAGE"], "m");
        assert_eq!(f["PRIORITY"], "6");
        assert_eq!(f["SYSLOG_IDENTIFIER"], "pptune");
        assert_eq!(f["MESSAGE_ID"], message_id(ReasonCode::RecycleMissHigh));
        assert_eq!(f["PPTUNE_DEVICE"], "eth0");
        assert_eq!(f["PPTUNE_REASON"], "recycle_miss_high");
        assert_eq!(f["PPTUNE_EVIDENCE_RECYCLE_MISS_SHARE"], "0.5");
        assert!(!f.contains_key("PPTUNE_EVIDENCE"), "{f:?}");
    }

    #[test]
    fn text_lines_are_readable() {
        let out = String::from_utf8(written(Format::Human, &grow(), "observe")).unwrap();
        assert!(
            out.contains(
                " INFO m device=eth0 action=\"ring.rx 256 -> 2048\" reason=recycle_miss_high"
            ),
            "{out}"
        );
        assert!(
            out.ends_with(" evidence: recycle_miss_share=0.5\n"),
            "{out}"
        );
        assert!(!out.contains('{'), "{out}");
    }

    #[test]
    fn a_value_of_several_lines_is_written_below_the_line_not_escaped() {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let b2 = Arc::clone(&buf);
        let sink = Sink {
            format: Format::Human,
            journal: None,
            out: Box::new(move |b| b2.lock().unwrap().extend_from_slice(b)),
        };
        let problems =
            "p.yaml:3:1: mode: not one of observe, enforce\n    hint: observe\n1 problem found\n";
        tracing::subscriber::with_default(tracing_subscriber::registry().with(sink), || {
            tracing::warn!(error = problems, path = "p.yaml", "policy reload refused");
        });
        let out = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert!(!out.contains("\\n"), "{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].ends_with(" WARN policy reload refused path=p.yaml"),
            "{out}"
        );
        assert_eq!(
            lines[1..],
            [
                "    error:",
                "      p.yaml:3:1: mode: not one of observe, enforce",
                "          hint: observe",
                "      1 problem found"
            ],
            "{out}"
        );
    }

    #[test]
    fn message_ids_are_stable_and_distinct_per_reason() {
        // Pinned (FNV-1a 128, checked with an independent implementation):
        // operators' journal queries and alerts use it.
        assert_eq!(
            message_id(ReasonCode::RecycleMissHigh),
            "b37816d98b770dd91699822d28484e10"
        );
        let ids: std::collections::BTreeSet<String> = [
            ReasonCode::RecycleMissHigh,
            ReasonCode::CalmShrink,
            ReasonCode::Healthy,
            ReasonCode::OperatorOverride,
        ]
        .into_iter()
        .map(message_id)
        .collect();
        assert_eq!(ids.len(), 4);
        assert!(ids.iter().all(|i| i.len() == 32));
    }

    #[test]
    fn identical_findings_are_logged_once_per_reminder_period() {
        let mut log = DecisionLog::new(Duration::from_secs(3600));
        let grow = decision(
            Action::SetRing {
                field: RingField::Rx,
                from: 256,
                to: 2048,
            },
            ReasonCode::RecycleMissHigh,
        );
        assert!(log.log(&grow, "observe", Duration::from_secs(0)));
        let mut again = grow.clone();
        // Evidence moves every tick; the finding is the same.
        again.evidence.insert("recycle_miss_share", 0.51);
        assert!(!log.log(&again, "observe", Duration::from_secs(10)));
        assert!(!log.log(&again, "observe", Duration::from_secs(20)));
        // A different finding is logged at once…
        let hold = decision(Action::Hold, ReasonCode::Healthy);
        assert!(log.log(&hold, "observe", Duration::from_secs(30)));
        // …and the reminder comes after the period.
        assert!(!log.log(&hold, "observe", Duration::from_secs(40)));
        assert!(log.log(&hold, "observe", Duration::from_secs(3700)));
        assert_eq!(grow.action.knob(), Some(Knob::Ring(RingField::Rx)));
    }

    #[test]
    fn a_device_no_longer_decided_for_is_forgotten() {
        let mut log = DecisionLog::new(Duration::from_secs(3600));
        let hold = decision(Action::Hold, ReasonCode::Healthy);
        assert!(log.log(&hold, "observe", Duration::ZERO));
        log.retain(|_| true);
        assert!(!log.log(&hold, "observe", Duration::from_secs(1)));
        log.retain(|_| false);
        assert!(log.last.is_empty());
        // Back: its first decision is a line again.
        assert!(log.log(&hold, "observe", Duration::from_secs(2)));
    }
}
