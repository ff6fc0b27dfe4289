//! Kernel-provided numbers at the edge of their range: a pool
//! may report `inflight-mem` or counters near `u64::MAX` (a buggy driver,
//! a corrupted reply that still decodes). The engine must neither panic
//! (debug) nor wrap (release: a wrong memory budget).

use super::support::{World, bursty, device};
use crate::fixtures::policy;
use crate::plan::Action;

fn saturated(ifindex: u32) -> crate::snapshot::Device {
    let mut d = device(ifindex, "ice", 512, 8160, 2);
    for q in &mut d.rx_queues {
        for p in &mut q.pools {
            p.inflight = Some(1);
            p.inflight_mem = Some(u64::MAX);
        }
    }
    d
}

/// Two devices whose byte figures saturate: their host sum overflowed.
#[test]
fn host_memory_sum_saturates() {
    let mut p = policy();
    p.budget.per_host_bytes = Some(60_000_000);
    let mut w = World::new(p, vec![saturated(1), saturated(2)]);
    let big = |_: &World, _| bursty(512, 4096, 20, false);
    for _ in 0..4 {
        let plan = w.tick(big);
        // Saturated memory figures exhaust any budget: nothing may grow.
        assert!(
            plan.decisions.iter().all(|d| !matches!(
                d.action,
                Action::SetRing { from, to, .. } | Action::SetChannels { from, to, .. } if to > from
            )),
            "{plan:#?}"
        );
    }
    assert_eq!((w.ring(0), w.ring(1)), (512, 512));
}

/// Counters at the top of their range, then a pool whose counters went
/// backwards past zero: no panic, no wrap into a huge delta.
#[test]
fn counters_at_u64_max_do_not_wrap() {
    let mut w = World::new(policy(), vec![device(1, "ice", 512, 8160, 2)]);
    let big = |_: &World, _| bursty(512, 4096, 20, false);
    w.tick(big);
    w.tick_with(big, |s| {
        let pools = s
            .devices
            .iter_mut()
            .flat_map(|d| d.rx_queues.iter_mut())
            .flat_map(|q| q.pools.iter_mut());
        for p in pools {
            if let Some(st) = p.stats.as_mut() {
                st.alloc_fast = u64::MAX;
                st.recycle_ring = u64::MAX;
                st.recycle_cached = u64::MAX;
                st.recycle_ring_full = u64::MAX;
                st.recycle_released_refcnt = u64::MAX;
                st.alloc_refill = u64::MAX;
                st.alloc_waive = u64::MAX;
            }
            p.inflight = Some(u64::MAX);
            p.inflight_mem = Some(u64::MAX);
        }
    });
    w.tick(big);
    w.tick(big);
}
