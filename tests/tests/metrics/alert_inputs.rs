//! The alert tests' inputs come from the daemon's own exposition:
//! each scenario drives the real metrics (`Metrics::known` for the devices
//! a pass decides for, `Metrics::count` for the actuator's events), encodes
//! a scrape a minute, and writes every series of the families the alert
//! reads in promtool's input form between the `generated:` markers of
//! packaging/prometheus/pptune-alerts.test.yaml. This test fails when the
//! checked-in inputs differ from what the daemon exports now (a series born
//! at 1 instead of 0, a label renamed); `PPTUNE_BLESS=1` rewrites them.
//! promtool runs the file in packaging_observability.rs. Every input
//! series of the file is generated here but `up`, which Prometheus writes
//! itself: restarts are new processes (a fresh `Metrics`), the fleet's
//! arms come from the rollout standing the daemon exports.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;

use policy::knobs::{ChannelField, Knob, RingField};
use pptune::act::events::Event;
use pptune::publish::metrics::Metrics;
use pptune_tests::exposition::{is_of_family, samples, with_target};

const FILE: &str = "packaging/prometheus/pptune-alerts.test.yaml";

/// What the daemon of host `instance` does in the scenario's minute `m`
/// (the scrape at `m` minutes sees it), through the calls the loop makes.
type Script = fn(&Metrics, &str, u32);

struct Scenario {
    name: &'static str,
    /// The scraped hosts, each its own daemon.
    hosts: &'static [&'static str],
    /// Scrapes, one a minute from 0.
    minutes: u32,
    /// The families written (every series of each).
    families: &'static [&'static str],
    script: Script,
    /// Whether host `instance`'s daemon restarted just before minute `m`'s
    /// scrape: a new process, its counters from 0.
    restart: fn(&str, u32) -> bool,
    /// The two managed NICs every other scenario's hosts have (the fleet
    /// scenario's hosts have their own one).
    managed_nics: bool,
}

fn never(_: &str, _: u32) -> bool {
    false
}

/// The restarts of the restarting scenario: a at 10, 20 and 30 minutes,
/// b once, at 30.
fn restarted(host: &str, m: u32) -> bool {
    match host {
        "a:9864" => [10, 20, 30].contains(&m),
        _ => m == 30,
    }
}

fn action(device: &str, knob: Knob, direction: &'static str, result: &str) -> Event {
    Event::Action {
        device: device.into(),
        knob,
        direction,
        result: result.into(),
    }
}

const RING: Knob = Knob::Ring(RingField::Rx);
const CHANNELS: Knob = Knob::Channels(ChannelField::Combined);

/// Host `host` of the fleet scenario (`{m,i,b}-{e,h}N:9864`: its driver,
/// and whether it is in the enforce arm or the holdout) at minute `m`: its
/// arm, and its one NIC (eth0) whose pools free 30 % of returns (`bad`) or
/// 5 %, 100 returns a minute.
fn fleet_host(metrics: &Metrics, host: &str, m: u32) {
    use policy::fixtures::{Nic, QueueCounters};
    use pptune::act::rollout::{Draw, Standing};
    let (driver, speed) = match &host[..1] {
        "m" => ("mlx5_core", 100_000),
        "i" => ("ice", 25_000),
        _ => ("bnxt_en", 50_000),
    };
    let enforce = &host[2..3] == "e";
    // The tuner hurts on mlx5_core and bnxt_en, helps on ice.
    let bad = enforce != (driver == "ice");
    let full = if bad { 30 } else { 5 };
    let policy = policy::fixtures::policy();
    metrics.set_rollout(
        Standing::of(
            &policy,
            Draw {
                host_selected: enforce,
                holdout: !enforce,
            },
        ),
        &policy,
    );
    let snap = |m: u32| {
        let m = u64::from(m);
        let mut dev = Nic::pci(0, driver, 1).device(|_| {
            let mut c = QueueCounters::default();
            c.pool.recycle_ring_full = full * m;
            c.pool.recycle_cached = (100 - full) * m;
            c
        });
        dev.speed_mbps = Some(speed);
        policy::fixtures::snapshot(m * 60_000, "7.3.0", vec![dev])
    };
    let now = snap(m);
    let before = m.checked_sub(1).map(snap);
    metrics.observe(
        &now,
        &policy::accounting::PassDeltas::of(before.as_ref(), &now),
    );
}

/// Host `host`'s one NIC at minute `m` for the slow-path scenario, its
/// pools' counters grown at the rates below since minute 0.
fn slow_path_snapshot(host: &str, m: u32) -> policy::Snapshot {
    use policy::fixtures::{Nic, QueueCounters};
    let m = u64::from(m);
    // (NIC, ring, per queue: slow refills, ring refills a minute)
    let (d, ring, queues): (u32, u32, &[(u64, u64)]) = match host {
        // slow path 30 % with the ring at the driver's maximum
        "a:9864" => (0, 8192, &[(30, 70)]),
        // as bad, but the ring can still grow: pptune's job, no alert
        "b:9864" => (1, 1024, &[(30, 70)]),
        // one queue at 60 % carrying 5 of the device's 1,000 refills a
        // minute: 5 % over the device
        _ => (2, 8192, &[(3, 2), (47, 948)]),
    };
    let mut nic = Nic::pci(d, "ice", u32::try_from(queues.len()).unwrap());
    nic.rings.rx = Some(ring);
    nic.rings.rx_max = Some(8192);
    let dev = nic.device(|q| {
        let (slow, refill) = queues[q as usize];
        let mut c = QueueCounters::default();
        c.pool.alloc_slow = slow * m;
        c.pool.alloc_refill = refill * m;
        c
    });
    policy::fixtures::snapshot(m * 60_000, "7.3.0", vec![dev])
}

const SCENARIOS: &[Scenario] = &[
    // a: the loop stops completing samples at 10 minutes (6 a minute
    // before); b keeps going.
    Scenario {
        name: "not-sampling",
        hosts: &["a:9864", "b:9864"],
        minutes: 41,
        families: &["pptune_samples_total"],
        restart: never,
        managed_nics: true,
        script: |metrics, host, m| {
            if m > 0 && (host != "a:9864" || m <= 10) {
                metrics.samples.inc_by(6);
            }
        },
    },
    // Each restart is a new process: its counter starts again at 0.
    Scenario {
        name: "restarting",
        hosts: &["a:9864", "b:9864"],
        minutes: 61,
        families: &["pptune_samples_total"],
        restart: restarted,
        managed_nics: true,
        script: |metrics, host, m| {
            if m > 0 && !restarted(host, m) {
                metrics.samples.inc_by(6);
            }
        },
    },
    // Fleet mode: per driver and link speed, the enforce arm's hosts
    // against the holdout's (mlx5_core and bnxt_en worse enforced, ice
    // better; bnxt_en with only 2 holdout hosts).
    Scenario {
        name: "fleet-arms",
        hosts: &[
            "m-e0:9864",
            "m-h0:9864",
            "i-e0:9864",
            "i-h0:9864",
            "m-e1:9864",
            "m-h1:9864",
            "i-e1:9864",
            "i-h1:9864",
            "m-e2:9864",
            "m-h2:9864",
            "i-e2:9864",
            "i-h2:9864",
            "b-e0:9864",
            "b-e1:9864",
            "b-e2:9864",
            "b-h0:9864",
            "b-h1:9864",
        ],
        minutes: 81,
        families: &[
            "pptune_device_info",
            "pptune_rollout_arm",
            "pptune_device_pool_recycle_ring_full_total",
            "pptune_device_pool_recycle_cached_pages_total",
            "pptune_device_pool_recycle_ring_pages_total",
        ],
        restart: never,
        managed_nics: false,
        script: fleet_host,
    },
    // a's policy reloaded into an invalid one at minute 3 (the last good
    // one stays in force).
    Scenario {
        name: "policy-invalid",
        hosts: &["a:9864"],
        minutes: 24,
        families: &["pptune_policy_valid"],
        restart: never,
        managed_nics: true,
        script: |metrics, _, m| {
            if m == 3 {
                metrics.policy_loaded(Err("interval: not a duration"));
            }
        },
    },
    // The slow-path alert reads the per-device sums every
    // `daemon.queue_metrics` setting exports: a and b export none of the
    // per-queue series, c all of them, which must not change the verdict.
    Scenario {
        name: "slow-path",
        hosts: &["a:9864", "b:9864", "c:9864"],
        minutes: 41,
        families: &[
            "pptune_device_pool_alloc_slow_refills_total",
            "pptune_device_pool_alloc_refill_refills_total",
            "pptune_queue_slow_refill_ratio",
            "pptune_ring_entries",
            "pptune_ring_max_entries",
        ],
        restart: never,
        managed_nics: true,
        script: |metrics, host, m| {
            use policy::accounting::PassDeltas;
            use policy::policy::QueueSelection;
            metrics.set_queue_series(if host == "c:9864" {
                QueueSelection::All
            } else {
                QueueSelection::None
            });
            let now = slow_path_snapshot(host, m);
            let before = m.checked_sub(1).map(|p| slow_path_snapshot(host, p));
            metrics.observe(&now, &PassDeltas::of(before.as_ref(), &now));
        },
    },
    // eth0: a channel change refused every ~11 minutes; eth1: a ring
    // change refused once and one applied each minute.
    Scenario {
        name: "changes-refused",
        hosts: &["a:9864"],
        minutes: 44,
        families: &["pptune_actions_total"],
        restart: never,
        managed_nics: true,
        script: |metrics, _, m| {
            let mut e = Vec::new();
            if [10, 20, 30].contains(&m) {
                e.push(action("eth0", CHANNELS, "shrink", "refused"));
            }
            if m == 10 {
                e.push(action("eth1", RING, "grow", "refused"));
            }
            if m > 0 {
                e.push(action("eth1", RING, "grow", "applied"));
            }
            metrics.count(e);
        },
    },
    // eth0's ring changed by someone else at minute 5; eth1 untouched.
    Scenario {
        name: "operator-override",
        hosts: &["a:9864"],
        minutes: 26,
        families: &["pptune_operator_overrides_total"],
        restart: never,
        managed_nics: true,
        script: |metrics, _, m| {
            if m == 5 {
                metrics.count([Event::Override {
                    device: "eth0".into(),
                    knob: RING,
                }]);
            }
        },
    },
    // eth0 backed off for good; eth1 for half an hour.
    Scenario {
        name: "device-backed-off",
        hosts: &["a:9864"],
        minutes: 71,
        families: &["pptune_device_backoff"],
        restart: never,
        managed_nics: true,
        script: |metrics, _, m| {
            metrics.set_backoff("eth0", true);
            metrics.set_backoff("eth1", m <= 30);
        },
    },
    // a: a kernel without CONFIG_PAGE_POOL_STATS, for good; b: its devices
    // down for half an hour, then up.
    Scenario {
        name: "judging-nothing",
        hosts: &["a:9864", "b:9864"],
        minutes: 71,
        families: &["pptune_judging_nothing"],
        restart: never,
        managed_nics: true,
        script: |metrics, host, m| {
            use pptune::publish::notes::Unjudged;
            metrics.set_judging_nothing(match host {
                "a:9864" => Some(Unjudged::NoPoolStats),
                _ if m <= 30 => Some(Unjudged::DeviceDown),
                _ => None,
            });
        },
    },
];

/// One host's scrapes: two NICs pptune manages rings and channels on,
/// known from minute 0, and the scenario's script.
fn scrapes(s: &Scenario, host: &str) -> Vec<BTreeMap<String, f64>> {
    let mut policy = policy::fixtures::policy();
    policy.channels.enabled = true;
    let devices = [
        policy::fixtures::Nic::pci(0, "ice", 4).device(|_| Default::default()),
        policy::fixtures::Nic::pci(1, "ice", 4).device(|_| Default::default()),
    ];
    let mut m = Metrics::new();
    (0..s.minutes)
        .map(|minute| {
            if (s.restart)(host, minute) {
                m = Metrics::new();
            }
            if s.managed_nics {
                for d in &devices {
                    m.known(d, &policy, "enforce");
                }
            }
            (s.script)(&m, host, minute);
            let text = pptune::publish::http::openmetrics_to_text004(&m.encode().unwrap());
            let mut kept = samples(&text);
            kept.retain(|series, _| s.families.iter().any(|f| is_of_family(series, f)));
            kept
        })
        .collect()
}

/// Values in promtool's expanding notation: runs of a constant step as
/// `a+bxn` (`axn` for a step of 0), n + 1 values each; a scrape without
/// the series is `_` (a run of them `_xn`).
fn expanding(values: &[Option<f64>]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let Some(a) = values[i] else {
            let n = values[i + 1..].iter().take_while(|v| v.is_none()).count();
            out.push(if n == 0 {
                "_".to_owned()
            } else {
                format!("_x{n}")
            });
            i += n + 1;
            continue;
        };
        let step = values.get(i + 1).copied().flatten().map_or(0.0, |b| b - a);
        let mut n = 0;
        while values
            .get(i + n + 1)
            .copied()
            .flatten()
            .is_some_and(|v| v == a + step * f64::from(u32::try_from(n + 1).unwrap()))
        {
            n += 1;
        }
        out.push(if n == 0 {
            format!("{a}")
        } else if step == 0.0 {
            format!("{a}x{n}")
        } else if step < 0.0 {
            format!("{a}{step}x{n}")
        } else {
            format!("{a}+{step}x{n}")
        });
        i += n + 1;
    }
    out.join(" ")
}

/// The input series lines of one scenario, as each host's daemon exports
/// them, scraped under `job="pptune"`.
fn input_series(s: &Scenario) -> String {
    let mut out = String::new();
    for host in s.hosts {
        host_series(s, host, &mut out);
    }
    out
}

fn host_series(s: &Scenario, host: &str, out: &mut String) {
    let scrapes = scrapes(s, host);
    let last = scrapes.last().unwrap();
    for series in last.keys() {
        // Every counter exists from the first scrape: one born later would
        // hide its first event from increase(). A gauge may come later (a
        // ratio needs two passes).
        let values: Vec<Option<f64>> = scrapes.iter().map(|sc| sc.get(series).copied()).collect();
        assert!(
            !series.contains("_total{") || values.iter().all(Option::is_some),
            "{}: {series} missing from a scrape",
            s.name
        );
        out.push_str(&format!(
            "      - series: '{}'\n        values: '{}'\n",
            with_target(series, host),
            expanding(&values)
        ));
    }
}

/// The test file with every scenario's block regenerated.
fn regenerated(text: &str) -> String {
    let mut out = text.to_owned();
    for s in SCENARIOS {
        let begin = format!(
            "      # generated: {} (tests/tests/metrics/alert_inputs.rs)\n",
            s.name
        );
        let end = format!("      # end generated: {}\n", s.name);
        let at = out
            .find(&begin)
            .unwrap_or_else(|| panic!("{FILE} has no `{}` marker", begin.trim()))
            + begin.len();
        let to = at
            + out[at..]
                .find(&end)
                .unwrap_or_else(|| panic!("{FILE} has no `{}` marker", end.trim()));
        out.replace_range(at..to, &input_series(s));
    }
    out
}

#[test]
fn alert_test_inputs_are_the_daemons_exposition() {
    let path = pptune_tests::repo_root().join(FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let want = regenerated(&text);
    if std::env::var_os("PPTUNE_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert!(
        text == want,
        "{FILE}: the generated inputs differ from what the daemon exports now; run: PPTUNE_BLESS=1 cargo test -p pptune-tests --test metrics alert_inputs::"
    );
}

#[test]
fn expanding_notation_round_trips() {
    let some = |v: &[f64]| v.iter().copied().map(Some).collect::<Vec<_>>();
    assert_eq!(expanding(&some(&[0.0, 0.0, 1.0, 1.0, 1.0])), "0x1 1x2");
    assert_eq!(expanding(&some(&[0.0, 1.0, 2.0, 3.0])), "0+1x3");
    assert_eq!(expanding(&some(&[5.0])), "5");
    assert_eq!(expanding(&some(&[3.0, 1.0, 1.0])), "3-2x1 1");
    assert_eq!(
        expanding(&[None, None, Some(0.6), Some(0.6), None]),
        "_x1 0.6x1 _"
    );
}
