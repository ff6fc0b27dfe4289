//! Time arithmetic of the read patterns and the UDP senders: `--sync`'s
//! drain epochs, the `slow` readers' byte budget, the UDP senders' 1 ms
//! ticks.

use std::thread;
use std::time::{Duration, Instant};

const NS_PER_S: u128 = 1_000_000_000;

/// The time until the next multiple of `pause` since `t0` (`--sync`; the
/// UDP senders' ticks).
pub fn until_epoch(t0: Instant, pause: Duration) -> Duration {
    let p = pause.as_nanos().max(1);
    let since = t0.elapsed().as_nanos();
    let next = (since / p + 1) * p;
    Duration::from_nanos(u64::try_from(next - since).unwrap_or(u64::MAX))
}

/// How long a reader that has taken `bytes` in the `elapsed` since its
/// first byte must wait until `rate` bytes per second allow them:
/// `bytes / rate − elapsed`, rounded up to the nanosecond (after the wait
/// it is not ahead), zero when it is not ahead.
pub fn ahead_by(bytes: u64, rate: u64, elapsed: Duration) -> Duration {
    let need = (u128::from(bytes) * NS_PER_S).div_ceil(u128::from(rate.max(1)));
    let wait = need.saturating_sub(elapsed.as_nanos());
    Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX))
}

/// Datagrams of `size` bytes that `rate` bytes per second allow in the
/// `elapsed` since a sender's start: ⌊rate × elapsed / size⌋.
pub fn due(rate: u64, size: u64, elapsed: Duration) -> u64 {
    let allowed = u128::from(rate) * elapsed.as_nanos() / (NS_PER_S * u128::from(size.max(1)));
    u64::try_from(allowed).unwrap_or(u64::MAX)
}

/// `--on-off-ms ON,OFF`: the part of `elapsed` since a sender's start
/// that fell in on phases (ON ms on, OFF ms off, on first), the clock its
/// rate is counted on; `None`: always on.
pub fn on_time(elapsed: Duration, phases: Option<(u64, u64)>) -> Duration {
    let Some((on, off)) = phases else {
        return elapsed;
    };
    let (on, cycle) = (u128::from(on) * 1_000_000, u128::from(on + off) * 1_000_000);
    let t = elapsed.as_nanos();
    let ns = t / cycle.max(1) * on + (t % cycle.max(1)).min(on);
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// Reads `--on-off-ms`: two millisecond counts, `ON,OFF`, both above 0.
pub fn parse_phases(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{s:?}: expected ON,OFF in milliseconds, both above 0");
    let (on, off) = s.split_once(',').ok_or_else(bad)?;
    let ms = |v: &str| v.trim().parse::<u64>().ok().filter(|n| *n > 0);
    ms(on).zip(ms(off)).ok_or_else(bad)
}

/// `--pattern slow`: a reader's bytes since its first one, kept within
/// `rate × elapsed`.
#[derive(Debug)]
pub struct Budget {
    rate: u64,
    first: Option<Instant>,
    bytes: u64,
}

impl Budget {
    pub const fn new(rate: u64) -> Self {
        Self {
            rate,
            first: None,
            bytes: 0,
        }
    }

    /// Counts a read of `n` bytes; when it put the reader ahead of the
    /// budget, one sleep until the budget has caught up.
    pub fn took(&mut self, n: usize) {
        let first = *self.first.get_or_insert_with(Instant::now);
        self.bytes += n as u64;
        let wait = ahead_by(self.bytes, self.rate, first.elapsed());
        if !wait.is_zero() {
            thread::sleep(wait);
        }
    }
}

/// The pauses of one drain receiver: `--pause-ms` each (with `--sync`, to
/// the next multiple of it since the start), or with `--pause-max-ms`, each
/// drawn between the two, uniform in the logarithm (every decade as
/// likely: a drain after a long pause returns a burst that many times
/// larger), seeded by `--seed` and the flow.
pub struct Pauses {
    min: Duration,
    /// `ln(max / min)`, with the generator, when the pauses vary.
    spread: Option<(f64, fastrand::Rng)>,
    sync: Option<Instant>,
}

impl Pauses {
    pub fn new(min_ms: u64, max_ms: u64, sync: Option<Instant>, seed: u64, flow: u32) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let spread = (max_ms > min_ms && min_ms > 0).then(|| {
            let rng = fastrand::Rng::with_seed(seed ^ (u64::from(flow) << 32) ^ 0x7061_7573_6573);
            ((max_ms as f64 / min_ms as f64).ln(), rng)
        });
        Self {
            min: Duration::from_millis(min_ms),
            spread,
            sync,
        }
    }

    /// The next pause.
    pub fn next(&mut self) -> Duration {
        if let Some(t0) = self.sync {
            return until_epoch(t0, self.min);
        }
        match &mut self.spread {
            Some((ln, rng)) => self.min.mul_f64((*ln * rng.f64()).exp()),
            None => self.min,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Budget, Pauses, ahead_by, due, on_time, parse_phases, until_epoch};
    use std::time::{Duration, Instant};

    #[test]
    fn a_sender_with_phases_counts_its_rate_in_on_time_only() {
        let ms = Duration::from_millis;
        let p = Some((300, 700));
        for (t, on) in [
            (0, 0),
            (200, 200),
            (300, 300),
            (999, 300),
            (1000, 300),
            (1250, 550),
            (2400, 900),
        ] {
            assert_eq!(on_time(ms(t), p), ms(on), "at {t} ms");
        }
        assert_eq!(on_time(ms(1234), None), ms(1234));
        assert_eq!(parse_phases("12000,18000"), Ok((12_000, 18_000)));
        for bad in ["12000", "0,5", "5,0", "a,5", "5,-1", ""] {
            assert!(parse_phases(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sync_waits_for_the_next_multiple_of_the_pause() {
        let pause = Duration::from_millis(50);
        let w = until_epoch(Instant::now(), pause);
        assert!(w > Duration::ZERO && w <= pause, "{w:?}");
    }

    #[test]
    fn a_reader_ahead_waits_until_the_rate_allows_its_bytes() {
        let ms = Duration::from_millis;
        // 2 MB/s: 1 MB takes 500 ms.
        assert_eq!(ahead_by(1_000_000, 2_000_000, ms(0)), ms(500));
        assert_eq!(ahead_by(1_000_000, 2_000_000, ms(200)), ms(300));
        assert_eq!(ahead_by(1_000_000, 2_000_000, ms(500)), Duration::ZERO);
        assert_eq!(ahead_by(1_000_000, 2_000_000, ms(900)), Duration::ZERO);
        // Rounded up: 1 byte at 3 B/s is 333,333,333.3 ns.
        assert_eq!(ahead_by(1, 3, ms(0)), Duration::from_nanos(333_333_334));
        // Hours of bytes do not overflow.
        assert_eq!(ahead_by(u64::MAX, 1, ms(0)), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn the_udp_budget_is_the_whole_datagrams_the_rate_allows() {
        let ms = Duration::from_millis;
        // 5 MB/s of 1,400-byte datagrams: 3,571.4 per second.
        assert_eq!(due(5_000_000, 1400, ms(0)), 0);
        assert_eq!(due(5_000_000, 1400, ms(1)), 3);
        assert_eq!(due(5_000_000, 1400, ms(1000)), 3571);
        assert_eq!(due(5_000_000, 1400, ms(10_000)), 35_714);
        // Below one datagram per tick it still moves.
        assert_eq!(due(1400, 1400, ms(999)), 0);
        assert_eq!(due(1400, 1400, ms(1000)), 1);
    }

    #[test]
    fn a_budgeted_reader_sleeps_once_its_bytes_run_ahead() {
        // 10 kB at 100 kB/s: 100 ms after the first byte.
        let mut b = Budget::new(100_000);
        let t = Instant::now();
        b.took(5_000);
        b.took(5_000);
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(100) && took < Duration::from_millis(1000),
            "{took:?}"
        );
    }

    /// Varying pauses stay between the two bounds, reach near both, and
    /// repeat with the seed; without a maximum, every pause is the pause.
    #[test]
    fn varying_pauses_span_the_range_log_uniformly() {
        let draw = |seed| {
            let mut p = Pauses::new(50, 5000, None, seed, 1);
            (0..2000)
                .map(|_| p.next().as_secs_f64() * 1e3)
                .collect::<Vec<f64>>()
        };
        let d = draw(7);
        assert!(d.iter().all(|&ms| (50.0..=5000.0).contains(&ms)), "{d:?}");
        let lo = d.iter().copied().fold(f64::MAX, f64::min);
        let hi = d.iter().copied().fold(0.0, f64::max);
        assert!(lo < 55.0 && hi > 4500.0, "{lo} {hi}");
        // Log-uniform: half the draws in the first of the two decades.
        let under_500 = d.iter().filter(|&&ms| ms < 500.0).count();
        assert!((900..1100).contains(&under_500), "{under_500}");
        assert_eq!(d, draw(7));
        assert_ne!(d, draw(8));
        let mut fixed = Pauses::new(50, 0, None, 7, 1);
        assert_eq!(fixed.next(), Duration::from_millis(50));
    }
}
