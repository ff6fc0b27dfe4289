//! Other owners of the knobs (systemd `.link`, NetworkManager, TuneD), read
//! from a temporary root:
//! - the loop on the fake kernel: under `coexist: defer` a ring a `.link`
//!   file sets is left alone like an operator override; under `warn` it is
//!   managed;
//! - the real binary in a network namespace: `pptune status` names the
//!   `.link` file and the NetworkManager profile that set ppt0's knobs, and
//!   `pptune run` logs that it defers and leaves the channels as they are.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use policy::{Coexist, Mode};
use pptune::publish::metrics::Metrics;
use pptune::service::{Options, PolicyEngine, run};
use pptune_tests::bin::{DaemonDirs, in_netns, require_root, write_policy};
use pptune_tests::daemon::{self, Fixed};
use pptune_tests::fake::{self, FakeKernel};
use tokio::sync::mpsc;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The fake's bursty eth0 under enforce for a minute of paused time, with
/// a `.link` file that sets its RX ring; returns (sets made, metrics text).
async fn run_with_link_file(coexist: Coexist) -> (Vec<(String, u32)>, String) {
    let root = tempfile::tempdir().unwrap();
    write(
        root.path(),
        "etc/systemd/network/10-storage.link",
        "[Match]\nPermanentMACAddress=0c:42:a1:00:00:01\n[Link]\nRxBufferSize=256\n",
    );
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Enforce);
    p.coexist = coexist;
    let metrics = Arc::new(Metrics::new());
    let (_tx, rx) = mpsc::unbounded_channel();
    let opts = Options {
        coexist: pptune::act::coexist::Roots::at(root.path()),
        ..daemon::options("h", Arc::clone(&metrics), rx)
    };
    run(
        Arc::clone(&k),
        PolicyEngine::default(),
        Box::new(Fixed(p.clone())),
        p,
        opts,
        tokio::time::sleep(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    (k.sets(), metrics.encode().unwrap())
}

#[tokio::test(start_paused = true)]
async fn defer_leaves_a_ring_a_link_file_sets_alone_and_warn_manages_it() {
    let (sets, m) = run_with_link_file(Coexist::Defer).await;
    assert!(sets.is_empty(), "deferred knob changed: {sets:?}");
    assert!(
        m.contains("reason=\"operator_override\""),
        "no override reason exported:\n{m}"
    );
    let (sets, _) = run_with_link_file(Coexist::Warn).await;
    assert!(!sets.is_empty(), "coexist: warn must still manage the ring");
}

#[test]
fn status_names_the_owners_and_run_defers_in_a_netns() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write(
        &root,
        "usr/lib/systemd/network/40-ppt.link",
        "[Match]\nOriginalName=ppt0\n[Link]\nRxChannels=2\n",
    );
    write(
        &root,
        "etc/NetworkManager/system-connections/ppt0.nmconnection",
        "[connection]\nid=ppt0\ninterface-name=ppt0\n[ethtool]\nchannels-combined=1\n",
    );
    let policy = write_policy(
        dir.path(),
        "mode: enforce\nselectors:\n  - names: [\"ppt*\"]\n    require_pools: false\nchannels:\n  enabled: true\ntiming:\n  interval: 1s\n",
    );
    let out = in_netns("ip link add ppt0 numrxqueues 4 numtxqueues 4 type veth peer name ppt1 numrxqueues 4 numtxqueues 4 && ethtool -L ppt0 rx 3 && \
             \"$0\" status -i ppt0 && \"$0\" status --json -i ppt0 > \"$2/status.json\" && \
             timeout --preserve-status -s TERM 4 \"$0\" --config \"$1\" run --metrics-listen 127.0.0.1:0 --log-format json 2> \"$2/log\"; \
             ethtool -l ppt0")
        .arg(&policy)
        .arg(dir.path())
        .env("PPTUNE_COEXIST_ROOT", &root)
        .daemon_dirs(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    assert!(out.status.success(), "{out:?}\n{log}");
    assert!(
        stdout.contains(
            "owner:    channels.rx = 2 set by systemd-link (/usr/lib/systemd/network/40-ppt.link)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "owner:    channels.combined = 1 set by networkmanager (/etc/NetworkManager/system-connections/ppt0.nmconnection)"
        ),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("status.json")).unwrap())
            .unwrap();
    let owners = &v["interfaces"][0]["owners"];
    assert_eq!(owners[1]["knob"], "channels.rx", "{owners}");
    assert_eq!(owners[1]["kind"], "systemd-link", "{owners}");
    assert_eq!(owners[1]["value"], 2, "{owners}");
    // run: says it defers, once per owned knob, and changes nothing.
    assert!(
        log.contains("channels.rx of ppt0 is set by systemd-link (/usr/lib/systemd/network/40-ppt.link): pptune leaves it to that owner (coexist: defer)"),
        "{log}"
    );
    let tail = &stdout[stdout.rfind("Current hardware settings").unwrap()..];
    assert!(
        tail.contains("RX:\t\t3") || tail.contains("RX: 3"),
        "{tail}"
    );
}

/// `pptune export` in each format, installed into a temporary root (the
/// NetworkManager fragment added to ppt0's profile), is found again by the detection with the values pptune set (the `.link`
/// side checked against systemd's documented `[Match]`/`[Link]` keys).
#[test]
fn export_installed_back_reproduces_the_values() {
    require_root("a throwaway network namespace");
    let dir = tempfile::tempdir().unwrap();
    pptune_tests::bin::write_channels_record(dir.path(), "ppt0", 1, 2);
    let root = dir.path().join("root");
    let out = in_netns("ip link add ppt0 numrxqueues 4 numtxqueues 4 type veth peer name ppt1 numrxqueues 4 numtxqueues 4 && ethtool -L ppt0 rx 2 && \
             mkdir -p \"$1/etc/systemd/network\" \"$1/etc/NetworkManager/system-connections\" \"$1/etc/tuned/pptune\" && \
             \"$0\" export --format systemd-link > \"$1/etc/systemd/network/10-pptune-ppt0.link\" && \
             { printf '[connection]\\nid=ppt0\\ninterface-name=ppt0\\n'; \"$0\" export --format networkmanager -i ppt0; } > \"$1/etc/NetworkManager/system-connections/ppt0.nmconnection\" && \
             \"$0\" export --format tuned > \"$1/etc/tuned/pptune/tuned.conf\" && echo pptune > \"$1/etc/tuned/active_profile\" && \
             for f in systemd-link networkmanager tuned; do \"$0\" export --format $f; done; \
             \"$0\" status --json -i ppt0 > \"$1/status.json\"")
        .arg(&root)
        .daemon_dirs(dir.path())
        .env("PPTUNE_COEXIST_ROOT", &root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("[Match]\nOriginalName=ppt0\n"), "{stdout}");
    assert!(stdout.contains("\nRxChannels=2\n"), "{stdout}");
    assert!(stdout.contains("\nchannels-rx=2\n"), "{stdout}");
    assert!(stdout.contains("ethtool.channels-rx 2"), "{stdout}");
    assert!(
        stdout.contains("\ntype=net\ndevices=ppt0\nchannels=rx 2\n"),
        "{stdout}"
    );
    // Each installed file is found for ppt0 with pptune's value, by the same
    // rules `status` and `run` use; the .link file wins (systemd's order).
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("status.json")).unwrap()).unwrap();
    let owners = v["interfaces"][0]["owners"].as_array().unwrap().clone();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0]["knob"], "channels.rx");
    assert_eq!(owners[0]["kind"], "systemd-link");
    assert_eq!(owners[0]["value"], 2);
    for (rm, kind) in [
        ("etc/systemd/network/10-pptune-ppt0.link", "networkmanager"),
        (
            "etc/NetworkManager/system-connections/ppt0.nmconnection",
            "tuned",
        ),
    ] {
        std::fs::remove_file(root.join(rm)).unwrap();
        let out = in_netns("ip link add ppt0 numrxqueues 4 numtxqueues 4 type veth peer name ppt1 numrxqueues 4 numtxqueues 4 && \"$0\" status --json -i ppt0")
            .env("PPTUNE_COEXIST_ROOT", &root)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let o = &v["interfaces"][0]["owners"][0];
        assert_eq!(o["kind"], kind, "{v}");
        assert_eq!(o["value"], 2, "{v}");
    }
}

/// `export` wrote interface names as they are into places that read them
/// as syntax: a `.link` `OriginalName=` glob (`e*`
/// matched every `e…` device), a TuneD `devices=` list (`a,eth0` named
/// eth0 too) and the `nmcli` command an operator pastes (`x$(id)` ran
/// `id`). Now a device is matched by name only where the name means
/// itself, else the export is refused as a whole, naming the device; the
/// shell command quotes the name.
#[test]
fn export_refuses_or_quotes_names_that_read_as_syntax() {
    require_root("a throwaway network namespace");
    for name in ["e*", "a,eth0", "x$(id)", "it's"] {
        let dir = tempfile::tempdir().unwrap();
        pptune_tests::bin::write_channels_record(dir.path(), name, 1, 2);
        let out = in_netns(
            "ip link add \"$1\" numrxqueues 4 numtxqueues 4 type veth peer name ppt1 numrxqueues 4 numtxqueues 4 && \
             ethtool -L \"$1\" rx 2 && \
             for f in systemd-link networkmanager tuned; do echo \"== $f\"; \"$0\" export --format $f; echo \"rc=$?\"; done 2>&1",
        )
        .arg(name)
        .daemon_dirs(dir.path())
        .output()
        .unwrap();
        assert!(out.status.success(), "{name}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let part = |f: &str| {
            let start = text.find(&format!("== {f}\n")).unwrap() + f.len() + 4;
            let end = text[start..].find("rc=").unwrap() + start;
            let rc = text[end + 3..].lines().next().unwrap().to_owned();
            (text[start..end].to_owned(), rc)
        };
        for (f, why) in [
            (
                "systemd-link",
                "OriginalName= would read its name as a glob list",
            ),
            (
                "tuned",
                "devices= would read this name as a pattern or a list",
            ),
        ] {
            let (body, rc) = part(f);
            assert_eq!(rc, "1", "{name} {f}: {body}");
            assert!(
                body.contains("nothing exported: one device cannot be written in this format")
                    && body.contains(&format!("{name}: "))
                    && body.contains(why),
                "{name} {f}: {body}"
            );
            assert!(
                !body.contains("[Match]") && !body.contains("[net_"),
                "{body}"
            );
        }
        let (body, rc) = part("networkmanager");
        assert_eq!(rc, "0", "{name}: {body}");
        assert!(body.contains("\nchannels-rx=2\n"), "{body}");
        // The pasted command: the name is one quoted word, and the shell
        // reads it back as the name.
        let line = body
            .lines()
            .find(|l| l.contains("nmcli connection modify"))
            .unwrap();
        let word = line
            .split("device show ")
            .nth(1)
            .and_then(|r| r.split(")\"").next())
            .unwrap();
        assert!(word.starts_with('\''), "{line}");
        let echoed = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {word}"))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&echoed.stdout), name, "{line}");
        // Comments carry the ifindex, not the name.
        assert!(body.starts_with("# ifindex"), "{body}");
    }
}
