//! Fleet mode through a real Prometheus (`/usr/bin/prometheus`): daemons
//! on the fake kernel, drawn into the two arms of one rollout (enforce and
//! holdout), one with a shadow policy, each with its own `/metrics`
//! endpoint, scraped by one Prometheus that evaluates the shipped
//! recording rules (`packaging/prometheus/pptune-rules.yaml`). The arm
//! comparison and the shadow totals are read back from the rules' series.
//!
//! Each host is a network namespace of its own, its endpoint on its
//! `eth0`, a veth to the namespace Prometheus runs in: Prometheus scrapes
//! four addresses on four links, as it scrapes a fleet, and nothing is
//! added to this machine's own namespace. The daemons' loops run in this
//! process, on fake kernels.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use netlink::netns::TempNetns;
use policy::Mode;
use policy::policy::{Rollout, Shadow};
use pptune::act::rollout;
use pptune_tests::daemon::{self, Running};
use pptune_tests::fake::{self, FakeKernel};
use pptune_tests::http::Prometheus;

/// One host of the fleet.
struct Host {
    name: String,
    arm: &'static str,
    kernel: Arc<FakeKernel>,
    running: Running,
}

/// `n` host names per arm under `r` (enforce: in the fraction; holdout).
fn hosts_by_arm(r: &Rollout, n: usize) -> Vec<(String, &'static str)> {
    let (mut enforce, mut holdout) = (Vec::new(), Vec::new());
    for i in 0.. {
        let name = format!("host-{i}");
        let d = rollout::draw(Some(r), &name);
        if d.host_selected && enforce.len() < n {
            enforce.push((name, "enforce"));
        } else if d.holdout && holdout.len() < n {
            holdout.push((name, "holdout"));
        }
        if enforce.len() == n && holdout.len() == n {
            break;
        }
    }
    enforce.into_iter().chain(holdout).collect()
}

/// The fleet's network: Prometheus' namespace, and per host a namespace
/// whose `eth0` (10.78.i.2/30) is a veth to Prometheus' `fl<i>`
/// (10.78.i.1/30). Deleted, links and all, when dropped.
struct Fleet {
    prometheus: TempNetns,
    hosts: Vec<TempNetns>,
}

impl Fleet {
    fn build(n: usize) -> Self {
        let prometheus = TempNetns::create("fleet-prom").unwrap();
        prometheus.ip(&["link", "set", "lo", "up"]).unwrap();
        let hosts = (0..n)
            .map(|i| {
                let h = TempNetns::create(&format!("fleet-h{i}")).unwrap();
                let (p_if, p_addr, h_addr) = (
                    format!("fl{i}"),
                    format!("10.78.{i}.1/30"),
                    format!("10.78.{i}.2/30"),
                );
                let link = [
                    "link", "add", &p_if, "type", "veth", "peer", "name", "eth0", "netns",
                ];
                let mut args = link.to_vec();
                args.push(h.name());
                prometheus.ip(&args).unwrap();
                prometheus
                    .ip(&["addr", "add", &p_addr, "dev", &p_if])
                    .unwrap();
                prometheus.ip(&["link", "set", &p_if, "up"]).unwrap();
                h.ip(&["addr", "add", &h_addr, "dev", "eth0"]).unwrap();
                h.ip(&["link", "set", "eth0", "up"]).unwrap();
                h
            })
            .collect();
        Self { prometheus, hosts }
    }
}

/// The shipped recording rules, evaluated every second instead of every
/// minute (the expressions as shipped).
fn shipped_rules() -> String {
    let path = pptune_tests::repo_root().join("packaging/prometheus/pptune-rules.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("interval: 1m"));
    text.replace("interval: 1m", "interval: 1s")
}

/// An instant query's vector: (labels, value) per series.
async fn query(prom: &Arc<Prometheus>, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let (p, q) = (Arc::clone(prom), q.to_owned());
    let body = tokio::task::spawn_blocking(move || p.query(&q))
        .await
        .unwrap()
        .unwrap_or_default();
    let json = pptune_tests::http::body(&body);
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    v["data"]["result"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| {
                    let labels = s["metric"]
                        .as_object()?
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                        .collect();
                    let value = s["value"][1].as_str()?.parse().ok()?;
                    Some((labels, value))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn by_arm(rows: &[(BTreeMap<String, String>, f64)]) -> BTreeMap<String, f64> {
    rows.iter()
        .map(|(l, v)| (l.get("arm").cloned().unwrap_or_default(), *v))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs /usr/bin/prometheus (Debian package `prometheus`); run with --include-ignored"]
async fn a_real_prometheus_compares_the_arms_sums_the_shadow_and_suggests_priors() {
    let r = Rollout {
        fraction: 0.5,
        salt: "fleet-test".into(),
        holdout: 0.5,
    };
    // Every host's endpoint first, scraped before its loop starts, so
    // Prometheus sees each counter from its first value.
    let net = Fleet::build(4);
    let mut endpoints = Vec::new();
    for (i, ns) in net.hosts.iter().enumerate() {
        let addr = format!("10.78.{i}.2:9100");
        endpoints.push((pptune_tests::http::serve_in(ns, addr.clone()), addr));
    }
    let targets: Vec<String> = endpoints.iter().map(|(_, a)| format!("'{a}'")).collect();
    let rules = shipped_rules();
    let prom = Arc::new(Prometheus::with_rules_in(
        net.prometheus.name(),
        &format!(
            "  - job_name: pptune\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
        &[("pptune-rules.yaml", &rules)],
    ));
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let up = query(&prom, "up == 1").await;
        if up.len() == 4 {
            break;
        }
    }
    let mut hosts = Vec::new();
    for (i, ((name, arm), (metrics, _))) in
        hosts_by_arm(&r, 2).into_iter().zip(endpoints).enumerate()
    {
        let kernel = Arc::new(FakeKernel::bursty());
        let mut p = fake::test_policy(Mode::Enforce);
        p.rollout = Some(r.clone());
        if i == 0 {
            // The first enforce host also runs a shadow with a lower cap.
            let mut s = fake::test_policy(Mode::Enforce);
            s.rings.max = 1024;
            p.shadow = Some(Shadow {
                path: "/etc/pptune/shadow.yaml".into(),
                policy: Some(Box::new(s)),
            });
        }
        let running = daemon::start_on_host(&kernel, p, (None, None), &name, metrics);
        hosts.push(Host {
            name,
            arm,
            kernel,
            running,
        });
    }

    // Until every enforce host has grown its ring and the rules have the
    // comparison of both arms, with the shadow's changes counted.
    let mut shares = BTreeMap::new();
    let mut counts = BTreeMap::new();
    let mut shadow_changes = Vec::new();
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let grown = hosts
            .iter()
            .filter(|h| h.arm == "enforce")
            .all(|h| !h.kernel.sets().is_empty());
        shares = by_arm(
            &query(
                &prom,
                "job_driver_speed_arm:pptune_recycle_miss:ratio_rate5m",
            )
            .await,
        );
        counts = by_arm(&query(&prom, "job_driver_speed_arm:pptune_hosts:count").await);
        shadow_changes = query(&prom, "job:pptune_shadow_changes:increase1h").await;
        // Both enforce hosts' changes judged, and scraped: what `fleet
        // suggest` reads.
        let judged = query(
            &prom,
            r#"max by (instance) (pptune_actions_total{knob="ring.rx", result="effective"}) > 0"#,
        )
        .await;
        if grown
            && judged.len() == 2
            && shares.len() == 2
            && counts.len() == 2
            && shadow_changes.first().is_some_and(|(_, v)| *v > 0.0)
            && shares["enforce"] < shares["holdout"]
        {
            break;
        }
    }
    let log = prom.log_tail();
    assert_eq!(
        counts,
        BTreeMap::from([("enforce".into(), 2.0), ("holdout".into(), 2.0)]),
        "hosts per arm\n{log}"
    );
    // The tuner's value on this traffic: the enforce arm grew its rings
    // past the bursts, the holdout kept 256 and keeps freeing.
    assert!(
        shares.get("enforce") < shares.get("holdout"),
        "recycle-miss share by arm: {shares:?}\n{log}"
    );
    assert!(shares["holdout"] > 0.25, "{shares:?}");
    // The comparison's class is the driver and the link speed.
    let classes = query(&prom, "job_driver_speed_arm:pptune_hosts:count").await;
    assert!(
        !classes.is_empty()
            && classes.iter().all(|(l, _)| {
                l.get("driver").map(String::as_str) == Some("ice")
                    && l.get("speed").map(String::as_str) == Some("25000")
            }),
        "{classes:?}"
    );
    let spread = query(
        &prom,
        "job_driver_speed_arm:pptune_recycle_miss:quantile_rate5m",
    )
    .await;
    assert!(
        spread
            .iter()
            .any(|(l, _)| l.get("quantile").map(String::as_str) == Some("0.9")),
        "{spread:?}"
    );
    let hosts_with_shadow = query(&prom, "job:pptune_shadow_hosts:count").await;
    assert_eq!(hosts_with_shadow.first().map(|(_, v)| *v), Some(1.0));
    // The shadow's fleet total is its host's counter (the rule's increase
    // sees the counter from its first sample: at most that much).
    let own = pptune_tests::exposition::prefix_sum(
        &hosts[0].running.metrics.encode().unwrap(),
        "pptune_shadow_changes_total{",
    );
    let total = shadow_changes.first().map_or(0.0, |(_, v)| *v);
    assert!(
        total > 0.0 && total <= own + 1.0,
        "shadow changes: fleet {total}, host {own}"
    );
    for h in &hosts {
        let sets = h.kernel.sets();
        match h.arm {
            "holdout" => assert!(sets.is_empty(), "holdout {} changed {sets:?}", h.name),
            _ => assert!(!sets.is_empty(), "enforce {} changed nothing", h.name),
        }
    }
    let converged = hosts[1].kernel.ring();
    suggest_from(&prom, converged).await;
    for h in hosts {
        h.running.stop().await.unwrap();
    }
}

/// `pptune fleet suggest` with `args`, in network namespace `netns` or in
/// this process's: (exit code, stderr).
fn suggest(netns: Option<&str>, args: &[&str]) -> (Option<i32>, String) {
    let bin = pptune_tests::bin::pptune_bin();
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = std::process::Command::new("ip");
            c.args(["netns", "exec", ns]).arg(bin);
            c
        }
        None => std::process::Command::new(bin),
    };
    let out = cmd.args(["fleet", "suggest"]).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `fleet suggest` against the fleet's Prometheus: a drop-in `check`
/// accepts, whose prior starts a recorded device at the fleet's ring in a
/// replay; against a closed port, a 500 and an empty answer, a clear
/// error and no file.
async fn suggest_from(prom: &Arc<Prometheus>, converged: u32) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("50-fleet-priors.yaml");
    let url = format!("http://{}", prom.addr);
    let f = file.to_str().unwrap().to_owned();
    let (code, err) = tokio::task::spawn_blocking({
        let (url, f, ns) = (url.clone(), f.clone(), prom.netns.clone());
        move || {
            suggest(
                ns.as_deref(),
                &["--prometheus", &url, "--min-hosts", "2", "-o", &f],
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    let text = std::fs::read_to_string(&file).unwrap();
    // The class as the hosts' pptune_device_info gives it: the fake NIC's
    // model, firmware, MTU and link speed.
    assert!(
        text.contains(&format!(
            "- {{driver: ice, model: \"{}\", firmware: \"{}\", mtu: 1500, speed: 25000, ring_rx: {converged}}}",
            fake::FAKE_MODEL,
            fake::FAKE_FIRMWARE
        )),
        "the enforce hosts converged to {converged}:\n{text}"
    );
    assert!(text.contains("2 hosts, 2 devices"), "{text}");
    let check = std::process::Command::new(pptune_tests::bin::pptune_bin())
        .args(["check", &f])
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");

    // A recording of a fresh host (ring 256), replayed with the drop-in
    // over the loop policy: its first decision starts it at the prior.
    let rec = dir.path().join("fresh.pptrec");
    let plain = fake::test_policy(Mode::Enforce);
    pptune::cmd::record::record_with(
        &FakeKernel::bursty(),
        &plain,
        Some(Duration::from_secs(3)),
        &rec,
        false,
    )
    .await
    .unwrap();
    let mut with = plain.clone();
    with.priors = config::load_with_config_dir(Some(&file), None)
        .unwrap()
        .policy
        .priors;
    let first = |p: &policy::Policy| {
        pptune::replay::replay(&rec, p)
            .unwrap()
            .decisions
            .first()
            .map(|r| (r.decision.reason, r.decision.action))
    };
    assert_eq!(
        first(&with),
        Some((
            policy::plan::ReasonCode::FleetPrior,
            policy::plan::Action::SetRing {
                field: policy::plan::RingField::Rx,
                from: 256,
                to: converged
            }
        ))
    );
    assert_ne!(
        first(&plain).map(|(r, _)| r),
        Some(policy::plan::ReasonCode::FleetPrior)
    );

    // Errors change nothing.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let broken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let broken_addr = broken.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        use std::io::{Read as _, Write as _};
        for mut c in broken.incoming().flatten().take(1) {
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ = c.write_all(
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 14\r\nConnection: close\r\n\r\nupstream broke",
            );
        }
    });
    let missing = dir.path().join("not-written.yaml");
    let m = missing.to_str().unwrap().to_owned();
    // The two broken servers are in this process's namespace; the fleet's
    // Prometheus in its own.
    for (ns, args, want) in [
        (
            None,
            vec![format!("http://{closed}")],
            format!("cannot reach Prometheus at http://{closed}"),
        ),
        (
            None,
            vec![format!("http://{broken_addr}")],
            "HTTP 500, not a query answer".to_owned(),
        ),
        (
            prom.netns.clone(),
            vec![url.clone(), "--selector".into(), r#"job="nobody""#.into()],
            "has no tuned device".to_owned(),
        ),
    ] {
        let mut a: Vec<String> = vec!["--prometheus".into()];
        a.extend(args);
        a.extend(["-o".into(), m.clone()]);
        let (code, err) = tokio::task::spawn_blocking(move || {
            suggest(
                ns.as_deref(),
                &a.iter().map(String::as_str).collect::<Vec<_>>(),
            )
        })
        .await
        .unwrap();
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains(&want), "want {want:?} in {err}");
        assert!(!missing.exists());
    }
}
