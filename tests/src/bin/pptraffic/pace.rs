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

#[cfg(test)]
mod tests {
    use super::{Budget, ahead_by, due, until_epoch};
    use std::time::{Duration, Instant};

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
}
