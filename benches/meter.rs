//! What an observe-cost bench binary measures: process CPU time, monotonic
//! wall time, peak RSS and allocation counts, and the one JSON line each
//! binary prints.
//!
//! Allocations are counted by `stats_alloc`'s instrumented system allocator
//! (each binary installs it as its global allocator), so no unsafe code of
//! our own is needed.

use std::alloc::System;

use nix::sys::resource::{UsageWho, getrusage};
use nix::time::{ClockId, clock_gettime};
use stats_alloc::{Region, StatsAlloc};

/// Nanoseconds on `clock`, 0 if it cannot be read (never on Linux).
fn ns(clock: ClockId) -> u128 {
    clock_gettime(clock).map_or(0, |t| {
        u128::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
            + u128::try_from(t.tv_nsec()).unwrap_or(0)
    })
}

/// Peak resident set of this process so far, KiB (`ru_maxrss`).
pub fn maxrss_kib() -> i64 {
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |r| r.max_rss())
}

/// A measurement in progress.
pub struct Meter<'a> {
    cpu0: u128,
    wall0: u128,
    region: Region<'a, System>,
}

// `stats_alloc::Region` has no `Debug`: the clocks' starting points only.
impl std::fmt::Debug for Meter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter")
            .field("cpu0", &self.cpu0)
            .field("wall0", &self.wall0)
            .finish_non_exhaustive()
    }
}

/// What `passes` passes cost, per pass.
#[derive(Debug, Clone, Copy)]
pub struct PerPass {
    pub passes: u64,
    pub cpu_ns: f64,
    pub wall_ns: f64,
    pub allocs: f64,
    pub alloc_bytes: f64,
    pub maxrss_kib: i64,
    /// Resident now: anonymous (heap, stacks) and file-backed (the
    /// binary's and libraries' pages), KiB, from /proc/self/status.
    pub rss_anon_kib: i64,
    pub rss_file_kib: i64,
}

/// A `Name:   N kB` line of /proc/self/status, KiB (0 if absent).
fn status_kib(name: &str) -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

impl<'a> Meter<'a> {
    pub fn start(alloc: &'a StatsAlloc<System>) -> Self {
        Self {
            region: Region::new(alloc),
            cpu0: ns(ClockId::CLOCK_PROCESS_CPUTIME_ID),
            wall0: ns(ClockId::CLOCK_MONOTONIC),
        }
    }

    // Per-pass means of counts far below 2^52: the f64 is exact enough.
    #[allow(clippy::cast_precision_loss)]
    pub fn stop(self, passes: u64) -> PerPass {
        let cpu = ns(ClockId::CLOCK_PROCESS_CPUTIME_ID) - self.cpu0;
        let wall = ns(ClockId::CLOCK_MONOTONIC) - self.wall0;
        let s = self.region.change();
        let n = passes.max(1) as f64;
        PerPass {
            passes,
            cpu_ns: cpu as f64 / n,
            wall_ns: wall as f64 / n,
            allocs: s.allocations as f64 / n,
            alloc_bytes: s.bytes_allocated as f64 / n,
            maxrss_kib: maxrss_kib(),
            rss_anon_kib: status_kib("RssAnon"),
            rss_file_kib: status_kib("RssFile"),
        }
    }
}

impl PerPass {
    /// One JSON object (no serde in the netlink crate's benches).
    pub fn json(&self, tool: &str, pools: usize, extra: &str) -> String {
        format!(
            "{{\"tool\":\"{tool}\",\"pools\":{pools},\"passes\":{},\"cpu_us_per_pass\":{:.1},\
             \"wall_us_per_pass\":{:.1},\"allocs_per_pass\":{:.1},\"alloc_bytes_per_pass\":{:.0},\
             \"maxrss_kib\":{},\"rss_anon_kib\":{},\"rss_file_kib\":{}{extra}}}",
            self.passes,
            self.cpu_ns / 1e3,
            self.wall_ns / 1e3,
            self.allocs,
            self.alloc_bytes,
            self.maxrss_kib,
            self.rss_anon_kib,
            self.rss_file_kib
        )
    }
}

/// `--name VALUE` from the arguments (cargo bench adds `--bench`).
pub fn arg(name: &str) -> Option<String> {
    let mut it = std::env::args().skip_while(|a| a != name);
    it.next()?;
    it.next()
}
