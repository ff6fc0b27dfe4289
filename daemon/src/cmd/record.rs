//! `pptune record`: the live passes into a recording file.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use policy::Policy;
use tokio::time::Instant;

use super::args::{ConfigArg, parse_duration};
use super::load_policy;
use crate::clock::unix_ms;
use crate::record::Recorder;
use crate::record::format::{Inputs, Pass, nanos};
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::sample::{Kernel, SampleScope};

/// `pptune record`'s arguments.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// How long (e.g. 10m, 24h; default: until interrupted).
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// The file to write (default: pptune-<time>.pptrec here).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `pptune record`: samples every `interval` for `duration` (until ^C when
/// none) into one recording file.
pub async fn record(path: Option<&Path>, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let (duration, output) = (args.duration, args.output.clone());
    let policy = match load_policy(path) {
        Ok(l) => l.policy,
        Err(code) => return Ok(code),
    };
    let out = output.unwrap_or_else(|| {
        PathBuf::from(format!(
            "pptune-{}.{}",
            crate::clock::local_now().strftime("%Y%m%dT%H%M%S"),
            crate::record::file::EXTENSION
        ))
    });
    if out.exists() {
        anyhow::bail!(
            "{} exists: not overwritten (give another -o)",
            out.display()
        );
    }
    let kernel = NetlinkKernel::connect().await?;
    let progress = std::io::stderr().is_terminal();
    record_with(&kernel, &policy, duration, &out, progress).await?;
    Ok(ExitCode::SUCCESS)
}

/// What `record` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    pub passes: u64,
    pub bytes: u64,
    /// From the first pass to the end.
    pub elapsed: Duration,
}

/// The body of `record` over any kernel: a pass at the start and every
/// `interval` after it; with a `duration`, the last pass is taken at the
/// deadline, `duration` after the first, and the command ends there (the
/// deadline was checked a whole interval early, so `--duration 25s` at a
/// 10 s interval ended at 20 s). A pass's wall-clock time is the start's
/// plus the monotonic time since, so a clock step while recording cannot
/// reorder passes. `progress`: a line on stderr, redrawn every second
/// (for a terminal).
///
/// # Errors
/// Sampling or writing failed.
pub async fn record_with<K: Kernel>(
    kernel: &K,
    policy: &Policy,
    duration: Option<Duration>,
    out: &Path,
    progress: bool,
) -> anyhow::Result<Recorded> {
    let mut rec = Recorder::single(out, crate::VERSION);
    let interval = policy.timing.interval;
    let origin = Instant::now();
    let start_ms = unix_ms();
    let deadline = duration.map(|d| origin + d);
    // The previous sample and its time (no deltas: nothing here judges).
    let mut observer = policy::observer::Observer::default();
    let mut passes = 0_u64;
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    crate::say_err!(
        "pptune record: sampling every {}s into {}{}",
        interval.as_secs_f64(),
        out.display(),
        duration.map_or_else(
            || " until interrupted".to_owned(),
            |d| format!(" for {}", hms(d))
        )
    );
    let mut next_pass = origin;
    'passes: loop {
        let snap = kernel.sample(&SampleScope::default()).await?;
        let now = origin.elapsed();
        let elapsed = observer.elapsed(now);
        rec.write(
            || None,
            observer.previous_taken(),
            &snap,
            |snapshot| Pass {
                unix_ms: start_ms
                    .saturating_add(u64::try_from(now.as_millis()).unwrap_or(u64::MAX)),
                now_ns: nanos(now),
                elapsed_ns: nanos(elapsed),
                local_time: Some(crate::clock::local_time()).map(|t| (t.weekday, t.minute_of_day)),
                snapshot,
                inputs: Inputs::default(),
                decisions: Vec::new(),
                changes: Vec::new(),
            },
        )?;
        passes += 1;
        if let Some(old) = observer.keep(snap, now) {
            kernel.recycle(old);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        next_pass = (next_pass + interval).max(Instant::now());
        let wake = deadline.map_or(next_pass, |d| next_pass.min(d));
        loop {
            if progress {
                show_progress(origin.elapsed(), duration, passes, rec.size_bytes());
            }
            let redraw = Instant::now() + Duration::from_secs(1);
            tokio::select! {
                () = tokio::time::sleep_until(wake) => break,
                () = tokio::time::sleep_until(redraw), if progress && redraw < wake => {}
                _ = &mut stop => break 'passes,
            }
        }
    }
    let done = Recorded {
        passes,
        bytes: rec.size_bytes(),
        elapsed: origin.elapsed(),
    };
    if progress {
        // The progress line is overwritten by the summary.
        eprint!("\r\x1b[K");
    }
    crate::say_err!(
        "pptune record: {passes} pass(es) over {}, {} written to {}",
        hms(done.elapsed),
        crate::human::bytes(done.bytes),
        out.display()
    );
    Ok(done)
}

/// `1:02:03`, `2:03`: a duration as people read a clock.
fn hms(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// `record`'s progress line, redrawn in place.
fn show_progress(elapsed: Duration, duration: Option<Duration>, passes: u64, bytes: u64) {
    let of = duration.map_or_else(String::new, |d| format!(" of {}", hms(d)));
    eprint!(
        "\r\x1b[Kpptune record: {}{of}, {passes} pass(es), {} written",
        hms(elapsed),
        crate::human::bytes(bytes)
    );
    let _ = std::io::stderr().flush();
}
