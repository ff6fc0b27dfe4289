//! The daemon's clocks: its monotonic time since start (the clock of
//! policy's `Observation::now`, of every backoff and evaluation deadline),
//! wall-clock milliseconds for the records, and the local time the change
//! windows read.

use std::time::Duration;

use policy::engine::LocalTime;
use tokio::time::Instant;

/// Monotonic time since the daemon started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
}

impl Clock {
    /// A clock starting now.
    pub(crate) fn start() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    /// Time since the start.
    pub(crate) fn now(self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }
}

/// Wall-clock time since the epoch, and in milliseconds: the recording's
/// clock, which its crate defines.
pub use record::{now_unix, unix_ms};

/// The local weekday and minute of the day, for the change windows.
#[must_use]
pub fn local_time() -> LocalTime {
    use chrono::{Datelike, Timelike};
    let t = chrono::Local::now();
    LocalTime {
        weekday: u8::try_from(t.weekday().num_days_from_monday()).unwrap_or(0),
        minute_of_day: u16::try_from(t.hour() * 60 + t.minute()).unwrap_or(0),
    }
}
