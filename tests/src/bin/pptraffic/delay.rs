//! The mice messages' delays: a count per microsecond, from which the
//! percentiles are exact (nearest rank), in memory bounded by the distinct
//! delays rather than by the messages.

use std::collections::BTreeMap;

use serde::Serialize;

/// A message's delay in µs: its receive time minus its send time, both in
/// ns since the process's `t0` (one clock); never negative.
pub const fn delay_us(sent_ns: u64, now_ns: u64) -> u64 {
    now_ns.saturating_sub(sent_ns) / 1000
}

/// Delays in µs, as a count per value.
#[derive(Debug, Default, Clone)]
pub struct Hist {
    counts: BTreeMap<u64, u64>,
    n: u64,
}

/// What a `delay_us` field says: how many delays, their nearest-rank 50th
/// and 99th percentiles and their maximum, in µs (`null` when `n` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub n: u64,
    pub p50: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
}

impl Hist {
    pub fn add(&mut self, us: u64) {
        *self.counts.entry(us).or_default() += 1;
        self.n += 1;
    }

    /// Nearest rank: the ⌈p/100 × n⌉-th smallest delay (the smallest at
    /// least); `None` when there is none.
    pub fn percentile(&self, p: u64) -> Option<u64> {
        let rank = p.saturating_mul(self.n).div_ceil(100).max(1);
        let mut seen = 0u64;
        self.counts.iter().find_map(|(&v, &c)| {
            seen += c;
            (seen >= rank).then_some(v)
        })
    }

    pub fn stats(&self) -> Stats {
        Stats {
            n: self.n,
            p50: self.percentile(50),
            p99: self.percentile(99),
            max: self.counts.last_key_value().map(|(&v, _)| v),
        }
    }
}

/// The delays since the previous `mark`, and over the whole run.
#[derive(Debug, Default)]
pub struct Delays {
    window: Hist,
    all: Hist,
}

impl Delays {
    pub fn record(&mut self, us: u64) {
        self.window.add(us);
        self.all.add(us);
    }

    /// The delays since the previous call (or the start), and a new window.
    pub fn take_window(&mut self) -> Stats {
        std::mem::take(&mut self.window).stats()
    }

    pub fn all(&self) -> Stats {
        self.all.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::{Delays, Hist, Stats, delay_us};

    fn hist(values: impl IntoIterator<Item = u64>) -> Hist {
        let mut h = Hist::default();
        for v in values {
            h.add(v);
        }
        h
    }

    #[test]
    fn no_delays_say_n_0_and_nothing_else() {
        let s = Hist::default().stats();
        assert_eq!(
            s,
            Stats {
                n: 0,
                p50: None,
                p99: None,
                max: None
            }
        );
        assert_eq!(
            serde_json::to_value(s).unwrap(),
            serde_json::json!({"n": 0, "p50": null, "p99": null, "max": null})
        );
    }

    #[test]
    fn percentiles_are_nearest_rank_in_any_order() {
        // 1..=100 shuffled: rank ⌈0.5 × 100⌉ = 50, ⌈0.99 × 100⌉ = 99.
        let mut v: Vec<u64> = (1..=100).collect();
        fastrand::Rng::with_seed(3).shuffle(&mut v);
        let s = hist(v).stats();
        assert_eq!(
            (s.n, s.p50, s.p99, s.max),
            (100, Some(50), Some(99), Some(100))
        );
        // 10 values: p50 is the 5th, p99 the 10th (⌈9.9⌉).
        let s = hist((1..=10).map(|x| x * 7)).stats();
        assert_eq!((s.p50, s.p99, s.max), (Some(35), Some(70), Some(70)));
        // One value is every percentile.
        let s = hist([420]).stats();
        assert_eq!(
            (s.n, s.p50, s.p99, s.max),
            (1, Some(420), Some(420), Some(420))
        );
    }

    #[test]
    fn repeated_delays_count_once_each() {
        // 98 × 10 µs, then 5000 and 9000: p99 is the 99th = 5000.
        let s = hist(std::iter::repeat_n(10, 98).chain([9000, 5000])).stats();
        assert_eq!(
            (s.n, s.p50, s.p99, s.max),
            (100, Some(10), Some(5000), Some(9000))
        );
    }

    #[test]
    fn a_mark_window_restarts_and_the_run_keeps_everything() {
        let mut d = Delays::default();
        d.record(100);
        d.record(300);
        assert_eq!(d.take_window().n, 2);
        assert_eq!(d.take_window().n, 0);
        d.record(200);
        let w = d.take_window();
        assert_eq!((w.n, w.max), (1, Some(200)));
        let all = d.all();
        assert_eq!((all.n, all.p50, all.max), (3, Some(200), Some(300)));
    }

    #[test]
    fn a_delay_is_in_whole_microseconds_and_never_negative() {
        assert_eq!(delay_us(1_000, 2_500_999), 2_499);
        assert_eq!(delay_us(5_000, 4_000), 0);
    }
}
