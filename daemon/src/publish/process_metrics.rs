//! The standard `process_*` metrics (the names every Prometheus client
//! library's process collector uses), read from `/proc/self` at scrape time.
//!
//! `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
//! `process_start_time_seconds`. A figure `/proc` cannot give is left out
//! of that scrape rather than exported as a made-up 0.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Reads `/proc/self` on each scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// The family names as they appear in the exposition.
pub const FAMILY_NAMES: [&str; 6] = [
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
];

/// One reading of `/proc/self`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessFigures {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessFigures {
    /// This process, now.
    #[must_use]
    pub fn read() -> Self {
        let Ok(me) = procfs::process::Process::myself() else {
            return Self::default();
        };
        let mut f = Self {
            open_fds: me.fd_count().ok().map(|n| n as u64),
            max_fds: me
                .limits()
                .ok()
                .and_then(|l| match l.max_open_files.soft_limit {
                    procfs::process::LimitValue::Value(v) => Some(v),
                    procfs::process::LimitValue::Unlimited => None,
                }),
            ..Self::default()
        };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second();
            #[allow(clippy::cast_precision_loss)]
            if ticks > 0 {
                let t = ticks as f64;
                f.cpu_seconds = Some((stat.utime + stat.stime) as f64 / t);
                f.start_time_seconds = procfs::boot_time_secs()
                    .ok()
                    .map(|boot| boot as f64 + stat.starttime as f64 / t);
            }
            f.virtual_bytes = Some(stat.vsize);
            f.resident_bytes = Some(stat.rss.saturating_mul(procfs::page_size()));
        }
        f
    }
}

fn sat(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let f = ProcessFigures::read();
        if let Some(v) = f.cpu_seconds {
            let m = ConstCounter::new(v);
            m.encode(enc.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent",
                Some(&Unit::Seconds),
                m.metric_type(),
            )?)?;
        }
        let bytes = Unit::Bytes;
        for (name, help, unit, v) in [
            (
                "process_resident_memory",
                "Resident memory size",
                Some(&bytes),
                f.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size",
                Some(&bytes),
                f.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Open file descriptors",
                None,
                f.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors (soft limit)",
                None,
                f.max_fds,
            ),
        ] {
            if let Some(v) = v {
                let m = ConstGauge::new(sat(v));
                m.encode(enc.encode_descriptor(name, help, unit, m.metric_type())?)?;
            }
        }
        if let Some(v) = f.start_time_seconds {
            let m = ConstGauge::new(v);
            m.encode(enc.encode_descriptor(
                "process_start_time",
                "Start time of the process since the Unix epoch",
                Some(&Unit::Seconds),
                m.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_plausibly() {
        let f = ProcessFigures::read();
        assert!(f.cpu_seconds.is_some_and(|c| c >= 0.0), "{f:?}");
        assert!(f.resident_bytes.is_some_and(|r| r > 1 << 20), "{f:?}");
        assert!(f.virtual_bytes >= f.resident_bytes, "{f:?}");
        let _held = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(f.open_fds.is_some_and(|n| n >= 3), "{f:?}");
        assert!(f.max_fds.is_some_and(|n| n >= 64), "{f:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = f.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86400.0,
            "{start} vs {now}"
        );
    }
}
