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
    let t = local_now();
    LocalTime {
        weekday: u8::try_from(t.weekday().to_monday_zero_offset()).unwrap_or(0),
        minute_of_day: u16::try_from(i32::from(t.hour()) * 60 + i32::from(t.minute())).unwrap_or(0),
    }
}

/// The time now in the local zone ([`local_zone`]).
#[must_use]
pub fn local_now() -> jiff::Zoned {
    jiff::Timestamp::now().to_zoned(local_zone().0.clone())
}

/// Whether the local zone could not be read as `TZ` or `/etc/localtime`
/// name it, and why (UTC is used then). For one line of the log at start.
#[must_use]
pub fn local_zone_problem() -> Option<&'static str> {
    local_zone().1.as_deref()
}

/// The largest time zone file read (the largest in tzdata is ~4 KiB).
const MAX_TZIF_BYTES: u64 = 256 << 10;
const ZONEINFO: &str = "/usr/share/zoneinfo";

/// The local zone, read once per process: `TZ` as the C library reads it
/// (`:file`, an absolute path, a name under `/usr/share/zoneinfo`, or a
/// POSIX rule such as `EST5EDT`), else `/etc/localtime`. A file is read
/// by the one file rule (`config::file::read_regular`: never blocking on
/// a FIFO, a regular file only, at most 256 KiB), so `TZ=/dev/zero` or a
/// FIFO cannot wedge or fill the process; what does not load is UTC, with
/// the reason kept for the log.
fn local_zone() -> &'static (jiff::tz::TimeZone, Option<String>) {
    static ZONE: std::sync::OnceLock<(jiff::tz::TimeZone, Option<String>)> =
        std::sync::OnceLock::new();
    ZONE.get_or_init(|| {
        let tz = std::env::var_os("TZ");
        match zone_from(tz.as_deref(), std::path::Path::new(ZONEINFO)) {
            Ok(z) => (z, None),
            Err(why) => (jiff::tz::TimeZone::UTC, Some(why)),
        }
    })
}

/// [`local_zone`] for a `TZ` value and a zoneinfo directory.
fn zone_from(
    tz: Option<&std::ffi::OsStr>,
    zoneinfo: &std::path::Path,
) -> Result<jiff::tz::TimeZone, String> {
    use std::path::{Component, Path, PathBuf};
    let file = |p: &Path| -> Result<jiff::tz::TimeZone, String> {
        let bytes = config::file::read_regular(p, MAX_TZIF_BYTES).map_err(|e| e.to_string())?;
        jiff::tz::TimeZone::tzif(&p.to_string_lossy(), &bytes)
            .map_err(|e| format!("{}: not a time zone file: {e}", p.display()))
    };
    let Some(tz) = tz.filter(|t| !t.is_empty()) else {
        return match file(Path::new("/etc/localtime")) {
            Err(e) if !Path::new("/etc/localtime").exists() => {
                // No zone configured: UTC, as the C library has it.
                drop(e);
                Ok(jiff::tz::TimeZone::UTC)
            }
            r => r,
        };
    };
    let text = tz
        .to_str()
        .ok_or_else(|| format!("TZ={}: not UTF-8", tz.to_string_lossy()))?;
    let name = text.strip_prefix(':').unwrap_or(text);
    let path = PathBuf::from(name);
    if path.is_absolute() {
        return file(&path);
    }
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
    if plain && zoneinfo.join(&path).exists() {
        return file(&zoneinfo.join(&path));
    }
    jiff::tz::TimeZone::posix(name)
        .map_err(|e| format!("TZ={text}: neither a zone file nor a rule: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::ffi::OsStr;
    use std::time::Duration;
    use tokio::time::Instant;

    /// `TZ` naming a FIFO, `/dev/zero`, a directory: UTC and a reason, at
    /// once, without reading more than the bound.
    #[test]
    fn a_tz_that_is_not_a_zone_file_is_refused_without_blocking_or_reading_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let big = dir.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let t0 = Instant::now();
        for (tz, says) in [
            (format!(":{}", fifo.display()), "a FIFO"),
            (fifo.display().to_string(), "a FIFO"),
            ("/dev/zero".to_owned(), "a device node"),
            (":/dev/zero".to_owned(), "a device node"),
            (dir.path().display().to_string(), "a directory"),
            (big.display().to_string(), "more than"),
        ] {
            let e = zone_from(Some(OsStr::new(&tz)), dir.path()).unwrap_err();
            assert!(e.contains(says), "{tz}: {e}");
        }
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }

    /// A name under the zoneinfo directory (never `..` out of it), a POSIX
    /// rule, nothing: each the zone it names.
    #[test]
    fn names_rules_and_nothing_are_zones() {
        let dir = tempfile::tempdir().unwrap();
        let utc = zone_from(Some(OsStr::new("UTC0")), dir.path()).unwrap();
        assert_eq!(utc.to_offset(jiff::Timestamp::UNIX_EPOCH).seconds(), 0);
        let est = zone_from(Some(OsStr::new("EST5")), dir.path()).unwrap();
        assert_eq!(
            est.to_offset(jiff::Timestamp::UNIX_EPOCH).seconds(),
            -5 * 3600
        );
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let fifo = dir.path().join("sub/Zone");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = zone_from(Some(OsStr::new("sub/Zone")), dir.path()).unwrap_err();
        assert!(e.contains("a FIFO"), "{e}");
        // `..` is not a zone name: read as a rule, which it is not.
        assert!(zone_from(Some(OsStr::new("../sub/Zone")), dir.path()).is_err());
    }
}
