//! Table tests: one row per driver of docs/drivers.md.

use super::*;
use crate::policy::Rounding;
use crate::snapshot::{Availability, Pool, RxQueue};

fn mode(mtu: u32, rx: u32, rx_jumbo: Option<u32>, pools_per_queue: u32) -> DriverMode {
    DriverMode {
        mtu: Some(mtu),
        rx: Some(rx),
        rx_jumbo,
        pools_per_queue,
    }
}

/// (driver, mode, rx_mini, ring, pool, rounding, min, resize)
type Row = (
    &'static str,
    DriverMode,
    u32,
    u32,
    Option<u32>,
    DriverRounding,
    u32,
    PoolResize,
);

#[test]
fn one_row_per_driver() {
    use DriverRounding as R;
    use PoolResize::{Never, NextReconfiguration, Now};
    let m = |mtu| mode(mtu, 1024, None, 1);
    let rows: Vec<Row> = vec![
        (
            "ice",
            m(1500),
            0,
            2048,
            Some(2048),
            R::UpMultiple(32),
            64,
            Now,
        ),
        (
            "iavf",
            m(1500),
            0,
            512,
            Some(512),
            R::UpMultiple(32),
            64,
            Now,
        ),
        // idpf split queue (two pools per queue): each buffer queue rx/2.
        (
            "idpf",
            mode(1500, 1024, None, 2),
            0,
            1024,
            Some(512),
            R::UpMultiple(64),
            64,
            Now,
        ),
        (
            "idpf",
            mode(1500, 1024, None, 1),
            0,
            1024,
            Some(1024),
            R::UpMultiple(64),
            64,
            Now,
        ),
        (
            "gve",
            m(1500),
            0,
            1024,
            Some(4096),
            R::PowerOfTwoOrRefuse,
            1,
            NextReconfiguration,
        ),
        // bnxt with agg rings (TPA: agg = 4 × rx), capped at 8191.
        (
            "bnxt_en",
            mode(1500, 511, Some(2044), 1),
            0,
            511,
            Some(2044),
            R::None,
            1,
            Now,
        ),
        (
            "bnxt_en",
            mode(1500, 511, Some(2044), 1),
            0,
            2047,
            Some(8188),
            R::None,
            1,
            Now,
        ),
        // MTU 9000 without TPA: agg factor 3 (PAGE_ALIGN(9000 - 40) / 4096).
        (
            "bnxt_en",
            mode(9000, 1000, Some(3000), 1),
            0,
            2047,
            Some(6141),
            R::None,
            1,
            Now,
        ),
        (
            "bnxt_en",
            mode(1500, 511, None, 1),
            0,
            2047,
            None,
            R::None,
            1,
            Never,
        ),
        // mlx5 striding RQ: 0.5 at 1500, 4 at 9000, floor 256.
        (
            "mlx5_core",
            m(1500),
            0,
            1024,
            Some(512),
            R::UpPowerOfTwo,
            16,
            Now,
        ),
        (
            "mlx5_core",
            m(9000),
            0,
            1024,
            Some(4096),
            R::UpPowerOfTwo,
            16,
            Now,
        ),
        (
            "mlx5_core",
            m(1500),
            0,
            64,
            Some(256),
            R::UpPowerOfTwo,
            16,
            Now,
        ),
        (
            "mlx4_en",
            m(1500),
            0,
            1024,
            Some(1024),
            R::UpPowerOfTwo,
            256,
            Now,
        ),
        (
            "mlx4_en",
            m(9000),
            0,
            1024,
            Some(3072),
            R::UpPowerOfTwo,
            256,
            Now,
        ),
        // mana: two buffers per page at MTU 1500, one at 9000; + 1.
        (
            "mana",
            m(1500),
            0,
            1024,
            Some(513),
            R::UpPowerOfTwo,
            128,
            Now,
        ),
        (
            "mana",
            m(9000),
            0,
            1024,
            Some(1025),
            R::UpPowerOfTwo,
            128,
            Now,
        ),
        (
            "ionic",
            m(1500),
            0,
            1024,
            Some(1024),
            R::PowerOfTwoOrRefuse,
            64,
            Now,
        ),
        (
            "eea",
            m(1500),
            0,
            1024,
            Some(1024),
            R::PowerOfTwoOrRefuse,
            64,
            Now,
        ),
        (
            "rvu_nicpf",
            m(1500),
            0,
            1024,
            Some(1024),
            R::QuarterPowers,
            16,
            Now,
        ),
        (
            "rvu_nicvf",
            m(1500),
            0,
            4096,
            Some(2048),
            R::QuarterPowers,
            16,
            Now,
        ),
        (
            "rvu-nicvf",
            m(1500),
            0,
            16384,
            Some(2048),
            R::QuarterPowers,
            16,
            Now,
        ),
        (
            "enic",
            m(1500),
            0,
            1024,
            Some(1024),
            R::DownMultiple(32),
            64,
            Now,
        ),
        (
            "fbnic",
            m(1500),
            256,
            1024,
            Some(1280),
            R::UpPowerOfTwo,
            1,
            Now,
        ),
        ("netdevsim", m(1500), 0, 1024, None, R::None, 1, Never),
        ("virtio_net", m(1500), 0, 1024, None, R::None, 1, Never),
        ("weird", m(1500), 0, 1024, Some(1024), R::None, 1, Now),
    ];
    for (drv, md, mini, ring, pool, rounding, min, resize) in rows {
        let info = driver_row(drv, &md, mini);
        assert_eq!(info.pool_for_ring(ring), pool, "{drv} {md:?} ring {ring}");
        assert_eq!(info.rounding, rounding, "{drv} rounding");
        assert_eq!(info.driver_min, min, "{drv} min");
        assert_eq!(info.resize, resize, "{drv} resize");
        assert_eq!(
            info.ring_does_not_resize_pool().is_none(),
            resize == Now,
            "{drv}"
        );
        if let Some(pool) = pool {
            // The inverse gives the smallest ring reaching that pool.
            let r = info.ring_for_pool(pool).expect("invertible");
            assert!(info.pool_for_ring(r).unwrap() >= pool, "{drv} inverse");
            assert!(
                r == 1 || info.pool_for_ring(r - 1).unwrap() < pool,
                "{drv} inverse is the smallest ring"
            );
        }
    }
    assert_eq!(
        driver_row("fbnic", &DriverMode::default(), 0).field,
        RingField::RxJumbo
    );
    assert!(!driver_row("weird", &DriverMode::default(), 0).mode_known);
    assert!(!driver_row("mlx5_core", &DriverMode::default(), 0).mode_known);
    assert!(driver_row("bnxt_en", &mode(1500, 511, Some(2044), 1), 0).mode_known);
}

#[test]
fn pool_caps_bound_the_useful_ring() {
    // octeontx2: the pool stops at 2048; the smallest ring the driver keeps
    // that reaches it is 4096.
    let otx = driver_row("rvu_nicpf", &DriverMode::default(), 0);
    assert_eq!(otx.max_pool(), Some(2048));
    let r = otx.ring_for_pool(u32::MAX).unwrap();
    assert_eq!(r, 2048);
    assert_eq!(otx.rounding.up(r), 4096);
    // bnxt agg: 4 × 2047 = 8188 stays under the 8191 cap.
    let bnxt = driver_row("bnxt_en", &mode(1500, 511, Some(2044), 1), 0);
    assert_eq!(bnxt.max_pool(), Some(8191));
    assert_eq!(bnxt.ring_for_pool(8191), Some(2048));
    // gve: 4 × 4096 reaches the page_pool clamp.
    let gve = driver_row("gve", &DriverMode::default(), 0);
    assert_eq!(gve.ring_for_pool(u32::MAX), Some(4096));
}

#[test]
fn mode_is_read_from_the_device() {
    let pool = Pool::default();
    let dev = Device {
        driver: Some("idpf".into()),
        mtu: Some(1500),
        rings: Availability::Available(Rings {
            rx: Some(1024),
            rx_max: Some(8128),
            ..Rings::default()
        }),
        rx_queues: vec![RxQueue {
            id: 0,
            napi_id: None,
            provider: None,
            qstats: None,
            pools: vec![pool.clone(), pool],
        }],
        ..Device::default()
    };
    let info = driver_info(&dev);
    assert_eq!(info.pools_per_queue, 2);
    assert_eq!(info.pool_for_ring(1024), Some(512));
    // bnxt: the agg ring shows as rx-jumbo, with its maximum.
    let bnxt = Device {
        driver: Some("bnxt_en".into()),
        rings: Availability::Available(Rings {
            rx: Some(511),
            rx_max: Some(2047),
            rx_jumbo: Some(2044),
            rx_jumbo_max: Some(8191),
            ..Rings::default()
        }),
        ..Device::default()
    };
    assert_eq!(driver_info(&bnxt).pool_for_ring(1000), Some(4000));
    let no_agg = Device {
        rings: Availability::Available(Rings {
            rx: Some(511),
            rx_max: Some(8191),
            ..Rings::default()
        }),
        ..bnxt
    };
    assert_eq!(driver_info(&no_agg).resize, PoolResize::Never);
}

#[test]
fn factors_follow_the_source() {
    assert!((mlx5_striding_factor(1500, false) - 0.5).abs() < 1e-9);
    assert!((mlx5_striding_factor(1500, true) - 1.0).abs() < 1e-9);
    assert!((mlx5_striding_factor(9000, false) - 4.0).abs() < 1e-9);
    assert_eq!(mlx4_pages_per_frame(1500), 1);
    assert_eq!(mlx4_pages_per_frame(9000), 3);
    assert_eq!(mana_frag_count(1500), 2);
    assert_eq!(mana_frag_count(4000), 1);
}

#[test]
fn driver_rounding_table() {
    use DriverRounding as R;
    // (rule, request, applied by the driver, up, down)
    let cases: [(R, u32, Option<u32>, u32, u32); 16] = [
        (R::None, 1000, Some(1000), 1000, 1000),
        (R::UpPowerOfTwo, 1000, Some(1024), 1024, 512),
        (R::UpPowerOfTwo, 1024, Some(1024), 1024, 1024),
        (R::PowerOfTwoOrRefuse, 1000, None, 1024, 512),
        (R::PowerOfTwoOrRefuse, 2048, Some(2048), 2048, 2048),
        (R::UpMultiple(32), 1000, Some(1024), 1024, 992),
        (R::UpMultiple(64), 1000, Some(1024), 1024, 960),
        (R::UpMultiple(64), 8160, Some(8192), 8192, 8128),
        (R::DownMultiple(32), 1000, Some(992), 1024, 992),
        (R::DownMultiple(32), 63, Some(32), 64, 32),
        // octeontx2: 1024 → 1500 is a no-op, 2048 goes up to 4096.
        (R::QuarterPowers, 1500, Some(1024), 4096, 1024),
        (R::QuarterPowers, 2047, Some(1024), 4096, 1024),
        (R::QuarterPowers, 2048, Some(4096), 4096, 1024),
        (R::QuarterPowers, 32, Some(64), 64, 16),
        (R::QuarterPowers, 16, Some(16), 16, 16),
        (R::QuarterPowers, 5000, Some(4096), 16384, 4096),
    ];
    for (r, v, applied, up, down) in cases {
        assert_eq!(r.applied(v), applied, "{r:?} applied {v}");
        assert_eq!(r.up(v), up, "{r:?} up {v}");
        assert_eq!(r.down(v), down, "{r:?} down {v}");
        assert!(r.keeps(r.up(v)), "{r:?} keeps its own up({v})");
        assert!(
            r.down(v) == 0 || r.keeps(r.down(v)),
            "{r:?} keeps down({v})"
        );
    }
}

#[test]
fn targets_round_down_when_that_still_covers_the_burst() {
    use DriverRounding as R;
    // (rule, estimate with headroom, without, current, target)
    let cases = [
        (R::UpPowerOfTwo, 4375, 3500, 1024, 4096),
        (R::UpPowerOfTwo, 4375, 4200, 1024, 8192),
        (R::PowerOfTwoOrRefuse, 2560, 2048, 256, 2048),
        (R::QuarterPowers, 2560, 2048, 1024, 4096),
        // A lower-bound estimate at the current ring: rounding down would
        // be no change, so up.
        (R::QuarterPowers, 1250, 1000, 1024, 4096),
        (R::UpMultiple(64), 1000, 980, 512, 1024),
        (R::UpMultiple(64), 1000, 900, 512, 960),
        (R::None, 1000, 800, 512, 1000),
    ];
    for (r, wanted, needed, current, target) in cases {
        assert_eq!(
            r.target(wanted, needed, current),
            target,
            "{r:?} {wanted} {needed}"
        );
        assert!(r.keeps(target));
    }
}

#[test]
fn policy_rounding_combines_with_the_driver() {
    use DriverRounding as R;
    assert_eq!(
        R::UpMultiple(32).with_policy(Rounding::Auto),
        R::UpMultiple(32)
    );
    assert_eq!(
        R::UpMultiple(32).with_policy(Rounding::None),
        R::UpMultiple(32)
    );
    assert_eq!(R::None.with_policy(Rounding::PowerOfTwo), R::UpPowerOfTwo);
    assert_eq!(
        R::PowerOfTwoOrRefuse.with_policy(Rounding::PowerOfTwo),
        R::PowerOfTwoOrRefuse
    );
    assert_eq!(
        R::None.with_policy(Rounding::MultipleOf32),
        R::UpMultiple(32)
    );
    assert_eq!(round_up(1000, Rounding::PowerOfTwo), 1024);
    assert_eq!(round_down(1000, Rounding::MultipleOf32), 992);
    assert_eq!(round_up(1000, Rounding::None), 1000);
}

#[test]
fn refusals_teach_the_rule() {
    // (errno, message, from, to, rule)
    let cases: [(i32, &str, u32, u32, Option<LearnedRule>); 10] = [
        (
            22,
            "ppsim: rx ring must be at least 64",
            256,
            32,
            Some(LearnedRule::Min(33)),
        ),
        // gve/ionic/eea: EINVAL without words for a non power of two.
        (22, "", 1024, 1500, Some(LearnedRule::PowerOfTwo)),
        (
            22,
            "Descriptor count must be a power of 2",
            1024,
            1536,
            Some(LearnedRule::PowerOfTwo),
        ),
        // ethtool core: above rx_max_pending.
        (
            22,
            "requested ring size exceeds maximum",
            1024,
            4096,
            Some(LearnedRule::Max(4095)),
        ),
        // EINVAL without words for a power of two: out of range that way.
        (22, "", 1024, 4096, Some(LearnedRule::Max(4095))),
        (22, "", 1024, 256, Some(LearnedRule::Min(257))),
        (22, "rx (8) < min (16)", 64, 8, Some(LearnedRule::Min(9))),
        (95, "", 1024, 2048, Some(LearnedRule::NotSettable)),
        (12, "", 1024, 2048, None),
        (
            22,
            "rx pending (9000) not in range [64,4096]",
            1024,
            9000,
            Some(LearnedRule::Max(8999)),
        ),
    ];
    for (errno, msg, from, to, rule) in cases {
        assert_eq!(
            learn_from_refusal(errno, msg, from, to),
            rule,
            "{errno} {msg:?}"
        );
    }
    let l = Learned::from_refusals([
        (22, "", 1024, 1500),
        (22, "", 1024, 4096),
        (22, "", 1024, 8192),
    ]);
    assert!(l.power_of_two);
    assert_eq!(l.max, Some(4095));
    assert_eq!(
        l.rounding(DriverRounding::None),
        DriverRounding::PowerOfTwoOrRefuse
    );
    assert_eq!(
        l.rounding(DriverRounding::UpPowerOfTwo),
        DriverRounding::UpPowerOfTwo
    );
}

/// The known-driver list, the rows and docs/drivers.md's table name the
/// same drivers: every listed name has a row of its own, and the table's
/// first column names exactly the listed drivers.
#[test]
fn known_drivers_are_the_rows_and_the_documented_table() {
    let mode = mode(1500, 1024, None, 1);
    for d in KNOWN_DRIVERS {
        assert_ne!(
            driver_row(d, &mode, 0).note,
            driver_row("no-such-driver", &mode, 0).note,
            "{d}: listed as known but falls to the unknown row"
        );
    }
    let doc = include_str!("../../../docs/drivers.md");
    let table = doc
        .split("| driver (`ethtool -i`)")
        .nth(1)
        .expect("docs/drivers.md has the driver table");
    let mut documented: Vec<&str> = Vec::new();
    for row in table.lines().skip(2) {
        let Some(first) = row.strip_prefix("| ").and_then(|r| r.split(" | ").next()) else {
            break;
        };
        // The names before any parenthesis (which may quote other things).
        let names = first.split('(').next().unwrap_or_default();
        documented.extend(names.split('`').skip(1).step_by(2));
    }
    let mut listed: Vec<&str> = KNOWN_DRIVERS.to_vec();
    listed.sort_unstable();
    documented.sort_unstable();
    documented.dedup();
    assert_eq!(
        documented, listed,
        "docs/drivers.md's table vs KNOWN_DRIVERS"
    );
}
