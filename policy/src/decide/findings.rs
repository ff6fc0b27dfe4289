//! One closed window of a device judged: the per-queue signals against the
//! thresholds (docs/decisions.md §1-2), the severe-miss check on each
//! sample, the evidence a decision carries and the streaks it extends.

use std::time::Duration;

use super::DeviceRun;
use crate::plan::Evidence;
use crate::state::DeviceState;
use crate::window::{QueueFacts, WindowAcc};

/// The per-window findings of one device.
#[derive(Debug, Default)]
pub(super) struct Findings {
    /// Queues with enough traffic to judge.
    pub(super) judged: usize,
    pub(super) grow: bool,
    pub(super) contended: bool,
    pub(super) calm: bool,
    pub(super) healthy_drops: bool,
    pub(super) pressure: bool,
    pub(super) untunable: Option<String>,
    /// The untunable cause is held pages (released_refcnt, or slow refills
    /// with ring_full flat): no ring fixes it, fewer queues contending for
    /// the allocator may ([`Shed::Held`]).
    pub(super) held: bool,
    /// Worst queue by recycle-miss share.
    pub(super) worst_miss: Option<QueueFacts>,
    /// Worst queue by slow-refill share.
    pub(super) worst_slow: Option<QueueFacts>,
    /// The window closed early on a severe miss and says grow: the ring
    /// may grow without a streak of windows.
    pub(super) severe: bool,
    /// The most pages a queue had out at once beyond its posted ring in
    /// the window (any queue, judged or not): pages in the stack and pages
    /// parked in the pool, so at least the most out since the pool was
    /// built that its ring could park ([`crate::state::PoolHeld`]).
    pub(super) held_peak: u64,
}

impl DeviceRun<'_> {
    /// `thresholds.min_pages_per_window` in proportion to `span` of a
    /// window.
    pub(super) fn pages_over(&self, span: Duration) -> u64 {
        let (min, window) = (
            self.th.min_pages_per_window,
            self.policy.timing.window.as_secs_f64(),
        );
        if window <= 0.0 {
            return min;
        }
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let pages = (min as f64 * (span.as_secs_f64() / window).min(1.0)).ceil() as u64;
        pages
    }

    /// Whether this pass's interval had a severe miss on some queue: its
    /// recycle-miss share at or above `thresholds.severe_recycle_miss`
    /// over at least the interval's share of the window's page floor.
    pub(super) fn severe_sample(&self) -> bool {
        let th = &self.th;
        if th.severe_samples == 0 {
            return false;
        }
        let min_pages = self.pages_over(self.obs.pass.elapsed);
        self.queues.iter().any(|(_, q)| {
            q.pools > 0
                && !q.reset
                && crate::window::judged(&q.stats, min_pages)
                && crate::signals::recycle_miss_share(&q.stats)
                    .is_some_and(|m| m >= th.severe_recycle_miss)
        })
    }

    pub(super) fn findings(&self, acc: &WindowAcc, min_pages: u64) -> Findings {
        let th = &self.th;
        let mut f = Findings {
            pressure: acc.alloc_fail > 0,
            calm: true,
            ..Findings::default()
        };
        let ring = super::ring::Ring(self).current();
        for (key, q) in &acc.queues {
            let facts = QueueFacts::from_acc(*key, q);
            let held = super::ring::held_pages(&facts, &self.info, ring).unwrap_or(0);
            f.held_peak = f.held_peak.max(held);
            if !facts.judged(min_pages) {
                continue;
            }
            let miss = facts.recycle_miss.unwrap_or(0.0);
            let slow = facts.slow_refill.unwrap_or(0.0);
            // Tunable: the pool ring overflowed, or slow refills follow
            // from ring_full (the ring had to free pages it later lacked).
            let grow_q = miss >= th.grow_recycle_miss
                || (slow >= th.grow_slow_refill
                    && facts.stats.recycle_ring_full > 0
                    && miss >= th.shrink_recycle_miss);
            f.grow |= grow_q;
            f.contended |= slow >= th.grow_slow_refill;
            f.calm &= miss < th.shrink_recycle_miss;
            if !grow_q && f.untunable.is_none() {
                let rel = facts.released_share.unwrap_or(0.0);
                let waive = facts.waive_share.unwrap_or(0.0);
                if rel >= th.grow_recycle_miss {
                    f.held = true;
                    f.untunable = Some(format!(
                        "{}: {:.1} % of returned pages were still referenced (released_refcnt); a bigger ring cannot fix that",
                        facts.key,
                        rel * 100.0
                    ));
                } else if waive >= th.grow_slow_refill {
                    f.untunable = Some(format!(
                        "{}: {:.1} % of refills hit NUMA-remote pages (waive): IRQ/NAPI on the wrong node, not a ring size problem",
                        facts.key,
                        waive * 100.0
                    ));
                } else if slow >= th.grow_slow_refill {
                    f.held = true;
                    f.untunable = Some(format!(
                        "{}: {:.1} % of refills went to the slow path while ring_full stayed flat: pages are held (sockets, driver ring), not overflowing the pool ring",
                        facts.key,
                        slow * 100.0
                    ));
                }
            }
            f.judged += 1;
            keep_worst(&mut f.worst_miss, &facts, |q| q.recycle_miss);
            keep_worst(&mut f.worst_slow, &facts, |q| q.slow_refill);
        }
        let drop_share = crate::signals::ratio(acc.drops, acc.packets).unwrap_or(0.0);
        f.healthy_drops = !f.grow
            && !f.contended
            && f.judged > 0
            && acc.drops > 0
            && drop_share >= self.policy.channels.grow_drop_share;
        f
    }

    pub(super) fn evidence(&self, f: &Findings, acc: &WindowAcc, ev: &mut Evidence) {
        #[allow(clippy::cast_precision_loss)]
        let n = |v: u64| v as f64;
        ev.insert("queues_judged", n(f.judged as u64));
        // What a miss costs here, in page-allocator misses: the shares
        // above were compared with the thresholds divided by it.
        ev.insert("miss_cost_factor", self.cost.factor());
        ev.insert("rx_alloc_fail", n(acc.alloc_fail));
        ev.insert("harm_drops", n(acc.drops));
        ev.insert("rx_packets", n(acc.packets));
        if let Some(q) = &f.worst_miss {
            ev.insert("recycle_miss_share", q.recycle_miss.unwrap_or(0.0));
            ev.insert("ring_full", n(q.stats.recycle_ring_full));
            ev.insert("recycle_ring", n(q.stats.recycle_ring));
            ev.insert("recycle_cached", n(q.stats.recycle_cached));
            ev.insert("released_refcnt", n(q.stats.recycle_released_refcnt));
            ev.insert("alloc_waive", n(q.stats.alloc_waive));
            if let Some(p) = q.recycling_pct {
                ev.insert("recycling_pct", p);
            }
            if let crate::accounting::QueueKey::Id(id) = q.key {
                ev.insert("worst_queue", f64::from(id));
            }
        }
        if let Some(q) = &f.worst_slow {
            ev.insert("slow_refill_share", q.slow_refill.unwrap_or(0.0));
            ev.insert("memory_provider", if q.provider { 1.0 } else { 0.0 });
        }
    }

    /// `min_pages`: what a queue had to move in the window to be judged.
    pub(super) fn update_streaks(&self, ds: &mut DeviceState, f: &Findings, min_pages: u64) {
        let bump = |c: &mut u32, on: bool| *c = if on { c.saturating_add(1) } else { 0 };
        // Memory pressure breaks a growth streak: growth must be re-earned
        // once allocations stop failing.
        bump(&mut ds.grow_windows, f.grow && !f.pressure);
        bump(&mut ds.contended_windows, f.contended);
        bump(&mut ds.drop_windows, f.healthy_drops);
        let ring = super::ring::Ring(self);
        let th = &self.th;
        if ds.calm_since.is_some() {
            // Judged over the calm's own returns (`CalmLedger`), a window
            // that finds growth too: a growth ends the calm when its streak
            // makes one. A window inside a give-back step's evaluation is
            // the step's to judge.
            ds.calm.fold(&ds.window, min_pages);
            bump(&mut ds.calm.over_windows, !f.calm);
            let windows = self.policy.timing.windows_for_finding;
            if ds.calm.over(th.shrink_recycle_miss, windows) && !ring.judging_shrink() {
                ds.end_calm();
            }
        } else if f.calm {
            ds.calm_since = Some(self.obs.pass.now);
            ds.calm.fold(&ds.window, min_pages);
        }
        if f.judged == 0 && !f.pressure {
            ds.idle_since.get_or_insert(self.obs.pass.now);
        } else {
            ds.idle_since = None;
        }
        ds.pool_held.note(ring.current(), f.held_peak);
        ring.note_shrink_outcome(ds);
    }
}

/// Keeps in `worst` the queue with the largest `key` of those that have
/// one; of equal ones, the later (queues come in key order).
fn keep_worst(
    worst: &mut Option<QueueFacts>,
    q: &QueueFacts,
    key: impl Fn(&QueueFacts) -> Option<f64>,
) {
    let Some(v) = key(q) else { return };
    if worst
        .as_ref()
        .and_then(&key)
        .is_none_or(|w| v.total_cmp(&w).is_ge())
    {
        *worst = Some(q.clone());
    }
}
