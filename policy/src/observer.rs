//! The pass: what one sample means against the one before it.
//!
//! Every loop that feeds the engine (the daemon's, `plan`'s, the
//! counterfactual's under replay and the shadow policy, the benches) keeps
//! the previous sample and when it was taken, computes the pool deltas of
//! the new one against it and the time between. [`Observer`] is that
//! bookkeeping, once: `next(snapshot, now)` yields the [`Pass`] every
//! consumer reads, `keep` makes the sample the next pass's previous.

use std::time::Duration;

use crate::accounting::PassDeltas;
use crate::snapshot::Snapshot;

/// One pass as its consumers read it: the previous sample (`None` on the
/// first), this one, the pool deltas between them and the time.
#[derive(Debug, Clone, Copy)]
pub struct Pass<'a> {
    /// The previous sample (`None` on the first pass).
    pub previous: Option<&'a Snapshot>,
    pub current: &'a Snapshot,
    /// The pool deltas of `current` against `previous`, computed once for
    /// the pass ([`PassDeltas::compute`]) and read by the engine and every
    /// output.
    pub deltas: &'a PassDeltas,
    /// Time between `previous` and `current` (zero on the first pass).
    pub elapsed: Duration,
    /// Monotonic time since an origin the caller picks (cooldowns,
    /// budgets).
    pub now: Duration,
}

impl<'a> Pass<'a> {
    /// `current` alone, with no previous sample and no deltas: what the
    /// gates read (they judge no counters) when a change is asked again
    /// at the moment it is made.
    #[must_use]
    pub fn alone(current: &'a Snapshot, now: Duration) -> Self {
        Self {
            previous: None,
            current,
            deltas: &crate::accounting::NO_DELTAS,
            elapsed: Duration::ZERO,
            now,
        }
    }
}

/// The previous sample and its time, this pass's deltas against it, and
/// the number of passes: what a loop carries from one pass to the next.
#[derive(Debug, Default)]
pub struct Observer {
    prev: Option<(Snapshot, Duration)>,
    deltas: PassDeltas,
    passes: u64,
}

impl Observer {
    /// The pass of `current`, taken at `now`: its deltas against the
    /// previous sample computed (once), the pass counted.
    pub fn next<'a>(&'a mut self, current: &'a Snapshot, now: Duration) -> Pass<'a> {
        self.deltas
            .compute(self.prev.as_ref().map(|(s, _)| s), current);
        self.passes += 1;
        self.pass(current, now)
    }

    /// The pass [`Self::next`] computed, read again (its deltas are not
    /// recomputed).
    #[must_use]
    pub fn pass<'a>(&'a self, current: &'a Snapshot, now: Duration) -> Pass<'a> {
        Pass {
            previous: self.previous(),
            current,
            deltas: &self.deltas,
            elapsed: self.elapsed(now),
            now,
        }
    }

    /// `current` becomes the next pass's previous; the sample it replaces
    /// is given back, for its buffers to be reused.
    pub fn keep(&mut self, current: Snapshot, now: Duration) -> Option<Snapshot> {
        self.prev.replace((current, now)).map(|(spent, _)| spent)
    }

    /// [`Self::keep`] in place: `snap` becomes the previous sample and
    /// holds the one it replaced (empty on the first pass), which the
    /// caller decodes the next pass into.
    pub fn keep_swap(&mut self, snap: &mut Snapshot, now: Duration) {
        let current = std::mem::take(snap);
        if let Some(spent) = self.keep(current, now) {
            *snap = spent;
        }
    }

    /// Starts again from `previous` (none: the next pass is a first one),
    /// as a replay does at the start of a recorded run.
    pub fn restart(&mut self, previous: Option<(Snapshot, Duration)>) {
        self.prev = previous;
    }

    /// The previous sample.
    #[must_use]
    pub fn previous(&self) -> Option<&Snapshot> {
        self.prev.as_ref().map(|(s, _)| s)
    }

    /// The previous sample, the observer done with.
    #[must_use]
    pub fn into_previous(self) -> Option<Snapshot> {
        self.prev.map(|(s, _)| s)
    }

    /// The previous sample and when it was taken.
    #[must_use]
    pub fn previous_taken(&self) -> Option<(&Snapshot, Duration)> {
        self.prev.as_ref().map(|(s, at)| (s, *at))
    }

    /// When the previous sample was taken.
    #[must_use]
    pub fn previous_at(&self) -> Option<Duration> {
        self.prev.as_ref().map(|(_, at)| *at)
    }

    /// Time from the previous sample to `now` (zero without one).
    #[must_use]
    pub fn elapsed(&self, now: Duration) -> Duration {
        self.previous_at()
            .map_or(Duration::ZERO, |at| now.saturating_sub(at))
    }

    /// The last pass's pool deltas.
    #[must_use]
    pub fn deltas(&self) -> &PassDeltas {
        &self.deltas
    }

    /// The previous sample and the last pass's deltas, to write: a caller
    /// that stands another reading of some devices in for a moment (the
    /// shadow policy's modelled devices) swaps their deltas in and back
    /// out.
    pub fn split_mut(&mut self) -> (Option<&Snapshot>, &mut PassDeltas) {
        (self.prev.as_ref().map(|(s, _)| s), &mut self.deltas)
    }

    /// Passes computed by this observer.
    #[must_use]
    pub fn passes(&self) -> u64 {
        self.passes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{Nic, QueueCounters, snapshot};
    use crate::snapshot::PoolStats;

    /// One NIC of one queue whose pool made `slow` slow-path refills.
    fn snap(slow: u64) -> Snapshot {
        let nic = Nic::pci(0, "mlx5_core", 1).device(|_| QueueCounters {
            pool: PoolStats {
                alloc_slow: slow,
                ..PoolStats::default()
            },
            ..QueueCounters::default()
        });
        snapshot(0, "7.3.0", vec![nic])
    }

    #[test]
    fn a_pass_is_read_against_the_sample_kept_before_it() {
        let mut o = Observer::default();
        let first = snap(10);
        let p = o.next(&first, Duration::from_secs(5));
        assert!(p.previous.is_none());
        assert_eq!(p.elapsed, Duration::ZERO);
        assert!(o.keep(first, Duration::from_secs(5)).is_none());

        let second = snap(25);
        let p = o.next(&second, Duration::from_secs(7));
        assert_eq!(p.elapsed, Duration::from_secs(2));
        assert_eq!(p.previous.map(|s| s.devices.len()), Some(1));
        assert_eq!(p.deltas.device(0).stats.alloc_slow, 15);
        assert_eq!(o.passes(), 2);
        // Read again: the same deltas, not recomputed against itself.
        assert_eq!(
            o.pass(&second, Duration::from_secs(7))
                .deltas
                .device(0)
                .stats
                .alloc_slow,
            15
        );
        let spent = o.keep(second, Duration::from_secs(7));
        assert_eq!(
            spent.map(|s| s.devices[0].rx_queues[0].pools[0]
                .stats
                .map(|st| st.alloc_slow)),
            Some(Some(10))
        );
    }

    #[test]
    fn keep_swap_hands_back_the_replaced_sample() {
        let mut o = Observer::default();
        let mut s = snap(1);
        o.keep_swap(&mut s, Duration::ZERO);
        assert!(s.devices.is_empty(), "first pass: nothing to hand back");
        let mut s = snap(2);
        o.keep_swap(&mut s, Duration::from_secs(1));
        assert_eq!(
            s.devices[0].rx_queues[0].pools[0]
                .stats
                .map(|st| st.alloc_slow),
            Some(1)
        );
        assert_eq!(o.previous_at(), Some(Duration::from_secs(1)));
        o.restart(None);
        assert!(o.previous().is_none());
    }
}
