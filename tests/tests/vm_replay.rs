//! Record and replay against the real kernel and ppsim (test VM, 7.3; see
//! tests/tests/vm_closed_loop.rs for the workload and policies): a bursty
//! run in **observe** mode is recorded by the daemon; `pptune replay` of
//! that recording with the **enforce** policy predicts the ring a live
//! enforce run of the same workload reaches (within one power of two), and
//! its first decision has the live run's recommendation id (read from the
//! live daemon's change journal with `pptune history`). The live run says
//! at exit what it leaves in place, and a `pptune restore` after it shows
//! in `history` as the changes undone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use netlink::Client;
use pptune_tests::pools::rx_ring;
use pptune_tests::ppsim::{CostPreset, Knobs, Ppsim, PpsimDev};
use pptune_tests::vm::{PpsimKernels, require_ppsim};
use pptune_tests::vm_daemon::Daemon;
use tokio::time::{Instant, sleep};

/// Runs `p` for `secs` (or until the ring has not moved for 15 s after a
/// change), stops it with SIGTERM; the kernel's ring at the end.
async fn run_daemon(c: &Client, d: &PpsimDev, p: &mut Daemon, secs: u64) -> u32 {
    p.spawn();
    let t0 = Instant::now();
    let mut ring = rx_ring(c, d).await;
    let mut last_change: Option<Instant> = None;
    while t0.elapsed() < Duration::from_secs(secs) {
        sleep(Duration::from_millis(250)).await;
        assert!(p.alive(), "pptune exited:\n{}", p.log());
        let r = rx_ring(c, d).await;
        if r != ring {
            ring = r;
            last_change = Some(Instant::now());
        }
        if last_change.is_some_and(|t| t.elapsed() >= Duration::from_secs(15)) {
            break;
        }
    }
    assert_eq!(p.term().await, Some(0), "{}", p.log());
    rx_ring(c, d).await
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn an_observe_recording_replayed_with_enforce_predicts_the_live_enforce_run() {
    let k = require_ppsim(
        "an_observe_recording_replayed_with_enforce_predicts_the_live_enforce_run",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.unwrap();
    let ppsim = Ppsim::load().expect("ppsim loads");
    let d = ppsim.new_device(1).expect("ppsim device");
    d.set_up(true).unwrap();
    d.set_knobs(
        &Knobs {
            burst_pages: 2048,
            ..Knobs::default()
        }
        .with_preset(CostPreset::Devmem),
    )
    .unwrap();
    assert_eq!(rx_ring(&c, &d).await, 256);
    d.start().unwrap();
    sleep(Duration::from_secs(1)).await;

    // Observe, recorded.
    let obs = tempfile::tempdir().unwrap();
    let mut observe = Daemon::new(obs.path(), "closed-loop-observe.yaml", Some(d.name()))
        .metrics_listen("127.0.0.1:0");
    assert_eq!(run_daemon(&c, &d, &mut observe, 60).await, 256);

    // The same workload, enforced live.
    let live = tempfile::tempdir().unwrap();
    let mut enforce = Daemon::new(live.path(), "closed-loop-enforce.yaml", Some(d.name()))
        .metrics_listen("127.0.0.1:0");
    let live_ring = run_daemon(&c, &d, &mut enforce, 150).await;
    assert!(live_ring > 256, "the live enforce run changed nothing");
    let hist = json(&enforce.cmd(&["history", "--json"]));
    let live_first = hist["changes"][0]["id"].as_str().unwrap().to_owned();
    // The daemon said at exit what it leaves in place (on_stop: keep).
    let log = enforce.log();
    assert!(
        log.lines().any(|l| l.contains("changes left in place")
            && l.contains(&format!("{} ring.rx {live_ring} (original 256)", d.name()))),
        "{log}"
    );
    // `pptune restore` with the daemon stopped is journaled: `history`
    // shows every change of the ring undone, by whom.
    let out = enforce.cmd(&["restore"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(rx_ring(&c, &d).await, 256);
    let hist = json(&enforce.cmd(&["history", "--json"]));
    for ch in hist["changes"].as_array().unwrap() {
        assert_eq!(ch["restored"]["by"], "command", "{hist:#}");
        assert_eq!(ch["restored"]["to"], 256, "{hist:#}");
    }
    let text = enforce.cmd(&["history"]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("undone: ring.rx restored to 256") && text.contains("by pptune restore"),
        "{text}"
    );
    let name = d.name().to_owned();
    d.stop().unwrap();
    d.delete().unwrap();

    // The observe recording replayed with the enforce policy.
    let rec = observe.state_dir().join("recording");
    let out = observe
        .command()
        .arg("--config")
        .arg(enforce.config())
        .args(["replay", rec.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v = json(&out);
    let r = &v["replay"];
    let first = &r["decisions"][0];
    let dev = &r["devices"][name.as_str()];
    let predicted = u32::try_from(dev["final_ring"].as_u64().unwrap()).unwrap();
    println!(
        "MEASURE scenario=replay kernel={k} passes={} live_ring={live_ring} predicted_ring={predicted} live_first={live_first} replay_first={} replay_changes={} basis_first={}",
        r["passes"], first["id"], dev["changes"], first["basis"]
    );
    assert_eq!(first["id"], live_first.as_str(), "{v:#}");
    assert_eq!(first["basis"], "observed");
    assert!(
        (live_ring / 2..=live_ring * 2).contains(&predicted),
        "predicted {predicted}, live {live_ring}: {v:#}"
    );
}
