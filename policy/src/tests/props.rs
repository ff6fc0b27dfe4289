//! Properties over generated devices, policies and traffic.

use proptest::prelude::*;

use super::support::{Traffic, World, device};
use crate::drivers::{POOL_RING_CLAMP, driver_info};
use crate::engine::device_bytes;
use crate::fixtures::policy;
use crate::plan::{Action, ReasonCode};
use crate::snapshot::PoolStats;

const DRIVERS: [&str; 7] = [
    "ice",
    "gve",
    "bnxt_en",
    "mlx5_core",
    "idpf",
    "other",
    "netdevsim",
];

fn traffic() -> impl Strategy<Value = Traffic> {
    (
        0u64..200_000,
        0u64..200_000,
        0u64..200_000,
        0u64..5_000,
        0u64..5_000,
        0u64..50_000,
        0u64..2_000,
        0u64..3,
    )
        .prop_map(
            |(cached, ring, full, slow, refill, released, waive, fail)| Traffic {
                pool: PoolStats {
                    alloc_fast: cached + ring + full,
                    alloc_slow: slow,
                    alloc_empty: slow,
                    alloc_refill: refill,
                    alloc_waive: waive,
                    recycle_cached: cached,
                    recycle_ring: ring,
                    recycle_ring_full: full,
                    recycle_released_refcnt: released,
                    ..PoolStats::default()
                },
                drops: full / 100,
                packets: cached + ring + full,
                alloc_fail: fail / 2,
                inflight: None,
            },
        )
}

#[derive(Debug, Clone)]
struct Setup {
    driver: &'static str,
    ring: u32,
    rx_max: u32,
    queues: u32,
    pmin: u32,
    pmax: u32,
    dev_budget: Option<u64>,
    host_budget: Option<u64>,
    steps: u32,
    channels: bool,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        0usize..DRIVERS.len(),
        6u32..13,
        10u32..15,
        1u32..16,
        6u32..9,
        10u32..15,
        prop::option::of(1u64..400),
        prop::option::of(1u64..800),
        1u32..4,
        any::<bool>(),
    )
        .prop_map(|(d, r, m, q, lo, hi, db, hb, steps, ch)| Setup {
            driver: DRIVERS[d],
            ring: 1 << r,
            rx_max: (1 << m).max(1 << r),
            queues: q,
            pmin: 1 << lo,
            pmax: (1 << hi).max(1 << lo),
            dev_budget: db.map(|m| m << 20),
            host_budget: hb.map(|m| m << 20),
            steps,
            channels: ch,
        })
}

fn world(s: &Setup) -> World {
    let mut p = policy();
    p.rings.min = s.pmin;
    p.rings.max = s.pmax;
    p.rings.max_steps_to_target = s.steps;
    p.budget.per_device_bytes = s.dev_budget;
    p.budget.per_host_bytes = s.host_budget;
    p.channels.enabled = s.channels;
    p.channels.max = 32;
    p.limits.max_changes_per_hour = 1000;
    p.timing.cooldown = std::time::Duration::from_secs(10);
    p.timing.evaluation = std::time::Duration::from_secs(10);
    p.timing.calm_before_shrink = std::time::Duration::from_secs(30);
    World::new(
        p,
        vec![
            device(1, s.driver, s.ring, s.rx_max, s.queues),
            device(2, s.driver, s.ring, s.rx_max, s.queues),
        ],
    )
}

fn total_bytes(w: &World) -> u64 {
    w.snap
        .devices
        .iter()
        .map(|d| device_bytes(d, &driver_info(d), w.ring(d.ifindex as usize - 1)))
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// No action ever exceeds rx-max, the policy bounds, the pool clamp,
    /// the channel bounds or a memory budget.
    #[test]
    fn no_output_exceeds_any_limit(s in setup(), ts in prop::collection::vec(traffic(), 4..24)) {
        let mut w = world(&s);
        for t in &ts {
            let before_total = total_bytes(&w);
            let snap_before = w.snap.clone();
            let plan = w.tick(|_, _| *t);
            let mut grew = false;
            for d in &plan.decisions {
                let dev = snap_before.devices.iter().find(|x| x.id == d.device_id).unwrap();
                let info = driver_info(dev);
                match d.action {
                    Action::SetRing { from, to, .. } if to > from => {
                        grew = true;
                        prop_assert!(to <= s.rx_max, "{to} > rx_max {}", s.rx_max);
                        prop_assert!(to <= s.pmax, "{to} > policy max {}", s.pmax);
                        prop_assert!(to >= s.pmin);
                        let pool = info.pool_for_ring(to).unwrap_or(to);
                        let pool_from = info.pool_for_ring(from).unwrap_or(from);
                        // Never ask for a bigger pool past the clamp.
                        prop_assert!(pool <= POOL_RING_CLAMP || pool_from >= POOL_RING_CLAMP,
                            "{} pool {pool}", s.driver);
                        if let Some(b) = s.dev_budget {
                            prop_assert!(device_bytes(dev, &info, to) <= b);
                        }
                    }
                    Action::SetRing { to, .. } => prop_assert!(to >= s.pmin.min(s.ring)),
                    Action::SetChannels { from, to, .. } => {
                        prop_assert!(s.channels);
                        prop_assert!((1..=32).contains(&to) && to <= 64);
                        prop_assert!(to != from);
                    }
                    Action::Hold => {}
                }
            }
            if grew && let Some(h) = s.host_budget {
                let after = total_bytes(&w);
                prop_assert!(after <= h.max(before_total), "host {after} > {h}");
            }
        }
    }

    /// The same window, again and again: ring moves go one way only.
    #[test]
    fn stationary_input_never_alternates(s in setup(), t in traffic()) {
        let mut w = world(&s);
        let mut dirs = vec![];
        for _ in 0..40 {
            for d in w.tick(|_, _| t).decisions {
                if let Action::SetRing { from, to, .. } = d.action {
                    dirs.push(to > from);
                }
            }
        }
        dirs.dedup();
        prop_assert!(dirs.len() <= 1, "alternated: {dirs:?}");
    }

    /// A window containing a counter that went backwards never acts.
    #[test]
    fn counter_reset_never_acts(
        s in setup(),
        ts in prop::collection::vec(traffic(), 2..10),
        at in 1usize..10,
    ) {
        let mut w = world(&s);
        let at = at.min(ts.len() - 1);
        for (i, t) in ts.iter().enumerate() {
            if i != at {
                w.tick(|_, _| *t);
                continue;
            }
            let had_counts = w.snap.devices[0]
                .pools()
                .any(|p| p.stats.is_some_and(|x| x != PoolStats::default()));
            let plan = w.tick_with(|_, _| *t, |snap| super::support::reset_pools(snap, 0));
            if had_counts {
                let d = &plan.decisions[0];
                prop_assert_eq!(d.action, Action::Hold);
                prop_assert_eq!(d.reason, ReasonCode::CounterReset);
            }
        }
    }

    /// Without ring_full, no amount of released_refcnt, waive or slow
    /// refills grows a ring.
    #[test]
    fn untunable_causes_never_grow(s in setup(), ts in prop::collection::vec(traffic(), 4..20)) {
        let mut w = world(&s);
        for t in &ts {
            let mut t = *t;
            t.pool.recycle_ring_full = 0;
            for d in w.tick(|_, _| t).decisions {
                if let Action::SetRing { from, to, .. } = d.action {
                    prop_assert!(to <= from, "grew without ring_full: {:?}", d);
                }
                prop_assert!(d.reason != ReasonCode::RecycleMissHigh);
            }
        }
    }
}

#[test]
fn counter_reset_hold_is_explicit() {
    // The deterministic core of `counter_reset_never_acts`.
    let s = Setup {
        driver: "ice",
        ring: 512,
        rx_max: 8160,
        queues: 2,
        pmin: 64,
        pmax: 16384,
        dev_budget: None,
        host_budget: None,
        steps: 2,
        channels: false,
    };
    let mut w = world(&s);
    let t = super::support::bursty(512, 4096, 50, false);
    w.tick(|_, _| t);
    w.tick(|_, _| t);
    let plan = w.tick_with(|_, _| t, |s| super::support::reset_pools(s, 0));
    assert_eq!(plan.decisions[0].reason, ReasonCode::CounterReset);
    assert_eq!(plan.decisions[0].action, Action::Hold);
}

/// Gate inputs the other properties leave alone: backoff, refusals and
/// failures in the history, overrides, change windows, bonds, a tight
/// hourly budget.
#[derive(Debug, Clone)]
struct Gates {
    backoff_s: Option<u64>,
    refused_target: Option<u32>,
    failed_ago_s: Option<u64>,
    override_dev1: bool,
    window: Option<(u16, u16)>,
    minute: u16,
    bonded: bool,
    per_hour: u32,
    cooldown_s: u64,
    evaluation_s: u64,
}

prop_compose! {
    fn gate_inputs()(
        backoff_s in prop::option::of(0u64..120),
        refused_target in prop::option::of(prop::sample::select(vec![512u32, 1024, 2048, 4096])),
        failed_ago_s in prop::option::of(0u64..120),
        override_dev1 in any::<bool>(),
        window in prop::option::of((0u16..1440, 0u16..1440)),
        minute in 0u16..1440,
        bonded in any::<bool>(),
        per_hour in 1u32..6,
        cooldown_s in 0u64..40,
        evaluation_s in 0u64..40,
    ) -> Gates {
        Gates {
            backoff_s,
            refused_target,
            failed_ago_s,
            override_dev1,
            window,
            minute,
            bonded,
            per_hour,
            cooldown_s,
            evaluation_s,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The plan and the actuator's gate never disagree: every change the
    /// engine plans, asked of `gates::admit` the way the actuator asks it
    /// (after the plan's earlier changes were made), is admitted
    /// (`World::tick` checks it on every tick, `support::check_seam`), over
    /// random traffic and random gate inputs.
    #[test]
    fn plan_and_gate_never_disagree(
        s in setup(),
        g in gate_inputs(),
        ts in prop::collection::vec(traffic(), 4..24),
    ) {
        use std::time::Duration;
        use crate::engine::{Backoff, LocalTime, Outcome};
        use crate::plan::{Knob, RingField};
        use crate::policy::ChangeWindow;

        let mut w = world(&s);
        w.policy.limits.max_changes_per_hour = g.per_hour;
        w.policy.timing.cooldown = Duration::from_secs(g.cooldown_s);
        w.policy.timing.evaluation = Duration::from_secs(g.evaluation_s);
        if let Some((start, end)) = g.window {
            w.policy.limits.windows = vec![ChangeWindow { days: vec![], start_minute: start, end_minute: end }];
        }
        w.local_time = Some(LocalTime { weekday: 2, minute_of_day: g.minute });
        if g.bonded {
            for d in &mut w.snap.devices {
                d.master = Some(9);
            }
        }
        let id1 = w.snap.devices[0].id.clone();
        if let Some(secs) = g.backoff_s {
            w.backoff.insert(id1.key(), Backoff {
                failures: 1,
                until: Duration::from_secs(secs),
                last_error: "EIO".into(),
            });
        }
        if let Some(to) = g.refused_target {
            let refused = Outcome::Refused { errno: 22, message: "EINVAL".into() };
            w.changed(1, Knob::Ring(RingField::Rx), (s.ring, to), Duration::ZERO, refused);
        }
        if let Some(ago) = g.failed_ago_s {
            w.now = Duration::from_secs(ago);
            let failed = Outcome::Failed { message: "gone".into() };
            w.changed(0, Knob::Ring(RingField::Rx), (s.ring, s.ring), Duration::ZERO, failed);
        }
        if g.override_dev1 {
            w.overrides.push((id1, Knob::Ring(RingField::Rx)));
        }
        for t in &ts {
            let _ = w.tick(|_, _| *t);
        }
    }
}

/// A snapshot copied over another of any shape (more or fewer devices,
/// queues, pools) is equal to its source, as a fresh clone is.
#[test]
fn clone_from_over_any_shape_equals_its_source() {
    use crate::fixtures::{Nic, QueueCounters, snapshot};
    let shape = |devices: u32, queues: u32, k: u64| {
        let devs = (0..devices)
            .map(|d| {
                Nic::pci(d, if d % 2 == 0 { "ice" } else { "mlx5_core" }, queues + d).device(|q| {
                    QueueCounters {
                        inflight: k * 10 + u64::from(q),
                        ..QueueCounters::default()
                    }
                })
            })
            .collect();
        snapshot(k, "7.3.4", devs)
    };
    let shapes = [
        shape(0, 0, 1),
        shape(1, 4, 2),
        shape(3, 2, 3),
        shape(2, 8, 4),
    ];
    for a in &shapes {
        for b in &shapes {
            let mut t = a.clone();
            t.clone_from(b);
            assert_eq!(&t, b);
            assert_eq!(&b.clone(), b);
        }
    }
}
