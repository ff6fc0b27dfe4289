//! Judging a change: rates over a window before it (the baseline) and after
//! it, from two samples of one device.
//!
//! A ring or channel change rebuilds the device's pools, so pool deltas are
//! computed per pool id (a pool present in both samples); the harm counters
//! (qstats, link stats64) belong to the device and survive the rebuild.

use std::time::Duration;

use policy::plan::ReasonCode;
use policy::signals;
use policy::snapshot::{Device, PoolStats, QueueStats};

/// What one window of one device looked like.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub secs: f64,
    /// Pool counter deltas summed over pools present at both ends.
    pub pools: PoolStats,
    pub provider: bool,
    /// Harm events: hw drops + overruns + rx-alloc-fail, plus link
    /// rx_dropped/missed/fifo.
    pub harm: u64,
    /// Received packets (qstats, else link stats), for normalising harm.
    pub packets: u64,
}

impl Rates {
    /// The rates between two samples of the same device; `None` when the
    /// interval is empty.
    #[must_use]
    pub fn between(a: &Device, b: &Device, elapsed: Duration) -> Option<Self> {
        let secs = elapsed.as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        let mut pools = PoolStats::default();
        let mut provider = false;
        for pb in b.pools() {
            provider |= pb.provider.is_some();
            let Some(sb) = pb.stats else { continue };
            if let Some(sa) = a.pools().find(|p| p.id == pb.id).and_then(|p| p.stats)
                && let Some(d) = sb.delta(&sa)
            {
                pools = pools.add(&d);
            }
        }
        let qa = device_qstats(a);
        let qb = device_qstats(b);
        let dq = |f: fn(&QueueStats) -> Option<u64>| match (f(&qa), f(&qb)) {
            (Some(x), Some(y)) => y.saturating_sub(x),
            _ => 0,
        };
        let mut harm =
            dq(|q| q.rx_hw_drops) + dq(|q| q.rx_hw_drop_overruns) + dq(|q| q.rx_alloc_fail);
        let mut packets = dq(|q| q.rx_packets);
        if let (Some(la), Some(lb)) = (a.link_stats, b.link_stats) {
            harm += lb.rx_dropped.saturating_sub(la.rx_dropped)
                + lb.rx_missed_errors.saturating_sub(la.rx_missed_errors)
                + lb.rx_fifo_errors.saturating_sub(la.rx_fifo_errors);
            if packets == 0 {
                packets = lb.rx_packets.saturating_sub(la.rx_packets);
            }
        }
        Some(Self {
            secs,
            pools,
            provider,
            harm,
            packets,
        })
    }

    #[must_use]
    pub fn recycle_miss(&self) -> Option<f64> {
        signals::recycle_miss_share(&self.pools)
    }

    #[must_use]
    pub fn slow_refill(&self) -> Option<f64> {
        signals::slow_refill_share(&self.pools, self.provider)
    }

    /// Harm per received packet when packets were counted, else per second.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn harm_level(&self) -> f64 {
        if self.packets > 0 {
            self.harm as f64 / self.packets as f64
        } else {
            self.harm as f64 / self.secs
        }
    }
}

/// Device-scope qstats, or the sum of its queues' when the driver reports
/// only per-queue figures.
fn device_qstats(d: &Device) -> QueueStats {
    if let Some(q) = d.qstats {
        return q;
    }
    let sum = |f: fn(&QueueStats) -> Option<u64>| {
        let v: Vec<u64> = d
            .rx_queues
            .iter()
            .filter_map(|q| q.qstats.as_ref().and_then(f))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    QueueStats {
        rx_packets: sum(|q| q.rx_packets),
        rx_bytes: sum(|q| q.rx_bytes),
        rx_alloc_fail: sum(|q| q.rx_alloc_fail),
        rx_hw_drops: sum(|q| q.rx_hw_drops),
        rx_hw_drop_overruns: sum(|q| q.rx_hw_drop_overruns),
    }
}

/// The verdict on a change.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Harm got worse: put the old value back.
    Harmful(String),
    /// The signal the change was made for did not move.
    Ineffective(String),
    Effective(String),
}

/// Harm is "worse" when it grew by half and by a floor that keeps noise on
/// an idle link from counting (1 drop per 10⁴ packets, or 1 per second).
const HARM_FACTOR: f64 = 1.5;
const HARM_FLOOR_PER_PACKET: f64 = 1e-4;
const HARM_FLOOR_PER_SEC: f64 = 1.0;
/// The signal "moved" when it fell by at least a tenth, or below the
/// threshold that would have triggered the change. A first ring step is
/// deliberately partial (the burst estimate from ring_full is a lower
/// bound), so a 0.52 → 0.40 recycle-miss share is progress, not a failure:
/// with a quarter as the bar, that step was judged ineffective in the VM and
/// growth stopped halfway.
const MOVE_FACTOR: f64 = 0.9;

/// Compares the window after a change with the baseline before it.
#[must_use]
pub fn judge(reason: ReasonCode, before: &Rates, after: &Rates, grow_threshold: f64) -> Verdict {
    let floor = if after.packets > 0 {
        HARM_FLOOR_PER_PACKET
    } else {
        HARM_FLOOR_PER_SEC
    };
    let (hb, ha) = (before.harm_level(), after.harm_level());
    if ha > hb * HARM_FACTOR + floor {
        return Verdict::Harmful(format!("harm rose from {hb:.6} to {ha:.6}"));
    }
    let moved = |b: Option<f64>, a: Option<f64>, name: &str, below: Option<f64>| match (b, a) {
        (_, None) => Verdict::Ineffective(format!("no {name} data after the change (no traffic)")),
        (Some(b), Some(a)) if a <= b * MOVE_FACTOR || below.is_some_and(|t| a < t) => {
            Verdict::Effective(format!("{name} {b:.4} -> {a:.4}"))
        }
        (b, Some(a)) => Verdict::Ineffective(format!(
            "{name} did not move: {} -> {a:.4}",
            b.map_or_else(|| "n/a".to_owned(), |b| format!("{b:.4}"))
        )),
    };
    match reason {
        ReasonCode::RecycleMissHigh => moved(
            before.recycle_miss(),
            after.recycle_miss(),
            "recycle-miss share",
            Some(grow_threshold),
        ),
        ReasonCode::ChannelsShrinkContended => moved(
            before.slow_refill(),
            after.slow_refill(),
            "slow-refill share",
            None,
        ),
        ReasonCode::ChannelsGrowHealthy => moved(
            Some(before.harm_level()),
            Some(after.harm_level()),
            "harm",
            None,
        ),
        // Shrinking gives memory back: it worked if misses stayed below the
        // level that would grow the ring again.
        _ => match after.recycle_miss() {
            Some(a) if a >= grow_threshold => Verdict::Ineffective(format!(
                "recycle-miss share {a:.4} is back at the grow threshold"
            )),
            _ => Verdict::Effective("no harm".to_owned()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(miss: (u64, u64), harm: u64, packets: u64) -> Rates {
        Rates {
            secs: 10.0,
            pools: PoolStats {
                recycle_ring_full: miss.0,
                recycle_ring: miss.1,
                ..PoolStats::default()
            },
            provider: false,
            harm,
            packets,
        }
    }

    #[test]
    fn verdicts() {
        let before = r((500, 500), 10, 1_000_000);
        assert!(matches!(
            judge(
                ReasonCode::RecycleMissHigh,
                &before,
                &r((10, 990), 10, 1_000_000),
                0.05
            ),
            Verdict::Effective(_)
        ));
        assert!(matches!(
            judge(
                ReasonCode::RecycleMissHigh,
                &before,
                &r((480, 520), 10, 1_000_000),
                0.05
            ),
            Verdict::Ineffective(_)
        ));
        assert!(matches!(
            judge(
                ReasonCode::RecycleMissHigh,
                &before,
                &r((10, 990), 5000, 1_000_000),
                0.05
            ),
            Verdict::Harmful(_)
        ));
    }
}
