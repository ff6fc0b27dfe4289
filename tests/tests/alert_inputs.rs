//! The alert tests' counter inputs come from the daemon's own exposition:
//! each scenario drives the real metrics (`Metrics::known` for the devices
//! a pass decides for, `Metrics::count` for the actuator's events), encodes
//! a scrape a minute, and writes every series of the families the alert
//! reads in promtool's input form between the `generated:` markers of
//! packaging/prometheus/pptune-alerts.test.yaml. This test fails when the
//! checked-in inputs differ from what the daemon exports now (a series born
//! at 1 instead of 0, a label renamed); `PPTUNE_BLESS=1` rewrites them.
//! promtool runs the file in packaging_observability.rs.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;

use policy::knobs::{ChannelField, Knob, RingField};
use pptune::act::events::Event;
use pptune::publish::metrics::Metrics;

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

const SCENARIOS: &[Scenario] = &[
    // eth0: a channel change refused every ~11 minutes; eth1: a ring
    // change refused once and one applied each minute.
    Scenario {
        name: "changes-refused",
        hosts: &["a:9864"],
        minutes: 44,
        families: &["pptune_actions_total"],
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
    let m = Metrics::new();
    (0..s.minutes)
        .map(|minute| {
            for d in &devices {
                m.known(d, &policy, "enforce");
            }
            (s.script)(&m, host, minute);
            let text = pptune::publish::http::openmetrics_to_text004(&m.encode().unwrap());
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.rsplit_once(' '))
                .filter(|(series, _)| {
                    s.families.iter().any(|f| {
                        series
                            .strip_prefix(f)
                            .is_some_and(|r| r.starts_with('{') || r.is_empty())
                    })
                })
                .map(|(series, v)| (series.to_owned(), v.parse().unwrap()))
                .collect()
        })
        .collect()
}

/// Values in promtool's expanding notation: runs of a constant step as
/// `a+bxn` (`axn` for a step of 0), n + 1 values each.
fn expanding(values: &[f64]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let a = values[i];
        let step = values.get(i + 1).map_or(0.0, |b| b - a);
        let mut n = 0;
        while values
            .get(i + n + 1)
            .is_some_and(|v| *v == a + step * (n + 1) as f64)
        {
            n += 1;
        }
        out.push(match (n, step) {
            (0, _) => format!("{a}"),
            (_, s) if s == 0.0 => format!("{a}x{n}"),
            (_, s) if s < 0.0 => format!("{a}{s}x{n}"),
            (_, s) => format!("{a}+{s}x{n}"),
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
        // Every series exists from the first scrape: a counter born later
        // would hide its first event from increase().
        let values: Vec<f64> = scrapes
            .iter()
            .map(|sc| {
                *sc.get(series)
                    .unwrap_or_else(|| panic!("{}: {series} missing from a scrape", s.name))
            })
            .collect();
        let labelled = match series.strip_suffix('}') {
            Some(head) => format!("{head},job=\"pptune\",instance=\"{host}\"}}"),
            None => format!("{series}{{job=\"pptune\",instance=\"{host}\"}}"),
        };
        out.push_str(&format!(
            "      - series: '{labelled}'\n        values: '{}'\n",
            expanding(&values)
        ));
    }
}

/// The test file with every scenario's block regenerated.
fn regenerated(text: &str) -> String {
    let mut out = text.to_owned();
    for s in SCENARIOS {
        let begin = format!("      # generated: {} (tests/tests/alert_inputs.rs)\n", s.name);
        let end = format!("      # end generated: {}\n", s.name);
        let at = out
            .find(&begin)
            .unwrap_or_else(|| panic!("{FILE} has no `{}` marker", begin.trim()))
            + begin.len();
        let to = at + out[at..]
            .find(&end)
            .unwrap_or_else(|| panic!("{FILE} has no `{}` marker", end.trim()));
        out.replace_range(at..to, &input_series(s));
    }
    out
}

#[test]
fn alert_test_inputs_are_the_daemons_exposition() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let want = regenerated(&text);
    if std::env::var_os("PPTUNE_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert!(
        text == want,
        "{FILE}: the generated inputs differ from what the daemon exports now; run: PPTUNE_BLESS=1 cargo test -p pptune-tests --test alert_inputs"
    );
}

#[test]
fn expanding_notation_round_trips() {
    assert_eq!(expanding(&[0.0, 0.0, 1.0, 1.0, 1.0]), "0x1 1x2");
    assert_eq!(expanding(&[0.0, 1.0, 2.0, 3.0]), "0+1x3");
    assert_eq!(expanding(&[5.0]), "5");
    assert_eq!(expanding(&[3.0, 1.0, 1.0]), "3-2x1 1");
}
