//! Faults: the real `pptune run` in enforce mode against ppsim
//! in the test VM on 7.3, while the world misbehaves under it:
//!
//! - ppsim devices deleted at random points of pptune's changes;
//! - the ppsim module unloaded while its queues hold pages;
//! - a driver that refuses every set (EBUSY with an extack message);
//! - notification sockets overflowed by rounds of queue rebuilds;
//! - the state directory read-only, then full (a small tmpfs);
//! - the wall clock set hours back and forth, and the daemon stopped
//!   (SIGSTOP) for a while, so its monotonic clock jumps when it runs again.
//!
//! Every outcome is read from the kernel (rings over ethtool netlink, pools
//! over `page-pool-get`, ppsim's own count of refused sets) and from the
//! daemon only where the test is about what it says (view, metrics, log).
//! Each test prints one `MEASURE` line. The CI form (`tests/vm/test.sh
//! 7.3`) uses short counts; the campaign form sets them by environment:
//! `PPTUNE_FAULT_DELETES` (device deletions, CI 6), `PPTUNE_FAULT_REFUSE_SECS`
//! (the refusing kernel, CI 30 s), `PPTUNE_FAULT_REBUILD_ROUNDS` (rebuild
//! rounds, CI 3), `PPTUNE_FAULT_STOP_SECS` (the stopped daemon, CI 10 s),
//! `PPTUNE_FAULT_SEED` (replays the deletion points). RELIABILITY.md §6a
//! has the figures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::cast_precision_loss)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use netlink::Client;
use pptune_tests::pools::{attached_pools, rx_ring};
use pptune_tests::ppsim::{CostPreset, Knobs, Ppsim, PpsimDev};
use pptune_tests::vm::{PpsimKernels, require_ppsim};
use pptune_tests::vm_daemon::Daemon;
use tokio::time::{Instant, sleep};

/// ppsim's default RX ring: every device starts there.
const ORIGINAL: u32 = 256;

/// A count from the environment (the campaign form), else the CI default.
fn count(var: &str, ci: u64) -> u64 {
    std::env::var(var)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{var}={v:?} is not a count"))
        })
        .unwrap_or(ci)
}

/// The bursty devmem workload: rings too small for its bursts, so pptune
/// wants to change them.
fn bursty() -> Knobs {
    Knobs {
        burst_pages: 2048,
        ..Knobs::default()
    }
    .with_preset(CostPreset::Devmem)
}

/// A new ppsim device, renamed to `name` if given, up, with the bursty
/// knobs; traffic not started.
fn device(ppsim: &Ppsim, queues: u32, name: Option<&str>) -> PpsimDev {
    let mut d = ppsim.new_device(queues).expect("ppsim device");
    if let Some(n) = name {
        d.rename(n).expect("rename");
    }
    d.set_up(true).expect("up");
    d.set_knobs(&bursty()).expect("knobs");
    d
}

/// One bursty device, its traffic started after `prepare` ran on it, and a
/// ready daemon whose `policy` selects only that device.
async fn daemon_on_one_device(
    policy: &str,
    port: u16,
    prepare: impl FnOnce(&PpsimDev),
) -> (PpsimDev, tempfile::TempDir, Daemon) {
    let ppsim = Ppsim::load().expect("ppsim loads");
    let d = device(&ppsim, 1, None);
    prepare(&d);
    d.start().expect("start");
    let dir = tempfile::tempdir().unwrap();
    let p = Daemon::new(dir.path(), policy, Some(d.name()))
        .metrics_port(port)
        .start_ready()
        .await;
    (d, dir, p)
}

/// Polls until `f` holds (every 200 ms) or `limit` passes; whether it held.
async fn wait_for<F, Fut>(limit: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = Instant::now();
    loop {
        if f().await {
            return true;
        }
        if t0.elapsed() >= limit {
            return false;
        }
        sleep(Duration::from_millis(200)).await;
    }
}

fn sh(cmd: &str) -> std::process::Output {
    Command::new("sh").args(["-c", cmd]).output().unwrap()
}

fn sh_ok(cmd: &str) {
    let out = sh(cmd);
    assert!(
        out.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ------------------------------------------------------------ deletions

/// Devices deleted at random points of pptune's changes: a new bursty
/// device at a time, deleted either 0–4 s after its traffic starts (before
/// the first change, around the state write and SET) or 0–1.5 s after
/// pptune's first change shows in the kernel (read-back, evaluation
/// window, the next step), alternately. A bystander device gets its traffic halfway through and
/// must still be managed. Counted: deletions, those after a change, daemon
/// crashes, stuck states (a deleted device still in the view 5 s later).
/// At the end `pptune restore` must put the bystander back; the records of
/// deleted devices it cannot restore are counted (they stay recorded, and
/// restore says so and exits 1, by design: the device may come back).
#[tokio::test(flavor = "current_thread")]
async fn devices_deleted_at_random_points_of_changes() {
    let k = require_ppsim(
        "devices_deleted_at_random_points_of_changes",
        PpsimKernels::Only73,
    );
    let deletions = count("PPTUNE_FAULT_DELETES", 6);
    let seed = count(
        "PPTUNE_FAULT_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs()),
    );
    println!("device deletions: {deletions}, seed {seed} (PPTUNE_FAULT_SEED replays)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let c = Client::connect().await.expect("client");
    let ppsim = Ppsim::load().expect("ppsim loads");
    let bystander = device(&ppsim, 1, None);
    let dir = tempfile::tempdir().unwrap();
    let mut p = Daemon::new(dir.path(), "faults.yaml", None)
        .metrics_port(19891)
        .start_ready()
        .await;
    let (mut after_change, mut crashes, mut stuck) = (0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    let t0 = Instant::now();
    for i in 0..deletions {
        if i == deletions / 2 {
            bystander.start().expect("bystander traffic");
        }
        // A name of its own: ppsim reuses `ppsimN` names, and a device
        // without a permanent address is known by its name, so a reused
        // name would inherit the deleted device's history (cooldown, "did
        // not work before") and get no change to be deleted in.
        let d = device(&ppsim, 1, Some(&format!("ppsimdel{i}")));
        d.start().expect("start");
        let name = d.name().to_owned();
        if i % 2 == 0 {
            // Anywhere in its first 4 s: before the finding, around the
            // state write and the SET, in the evaluation window.
            sleep(Duration::from_millis(rng.u64(0..4000))).await;
        } else {
            // After pptune's first change is in the kernel: the read-back,
            // the evaluation window, the next step.
            wait_for(Duration::from_secs(5), || async {
                rx_ring(&c, &d).await != ORIGINAL
            })
            .await;
            sleep(Duration::from_millis(rng.u64(0..1500))).await;
        }
        let ring = rx_ring(&c, &d).await;
        after_change += u64::from(ring != ORIGINAL);
        d.delete().expect("delete");
        if !p.alive() {
            crashes += 1;
            failures.push(format!(
                "deletion {i} ({name}, ring {ring:?}): the daemon died"
            ));
            p.spawn();
            p.ready().await;
            continue;
        }
        let gone = wait_for(Duration::from_secs(5), || async {
            p.view()
                .await
                .is_some_and(|v| v.devices.iter().all(|x| x.name != name))
        })
        .await;
        if !gone {
            stuck += 1;
            failures.push(format!(
                "deletion {i} ({name}): still in the view after 5 s"
            ));
        }
    }
    // The bystander is still managed: its traffic (started halfway) gets
    // a change.
    let managed = wait_for(Duration::from_secs(60), || async {
        rx_ring(&c, &bystander).await != ORIGINAL
    })
    .await;
    let s0 = p.metric("pptune_samples_total", &[]);
    sleep(Duration::from_secs(2)).await;
    let s1 = p.metric("pptune_samples_total", &[]);
    let alive = p.alive();
    let term = p.term().await;
    let out = p.cmd(&["restore"]);
    let restored = rx_ring(&c, &bystander).await;
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(p.run_dir().join("state.json")).unwrap_or_else(|_| "{}".into()),
    )
    .expect("the state record parses");
    let stale = state["devices"].as_object().map_or(0, |m| {
        m.values()
            .filter(|r| r["originals"].as_array().is_some_and(|o| !o.is_empty()))
            .count()
    });
    println!(
        "MEASURE suite=faults test=device_deletion kernel={k} seed={seed} deletions={deletions} after_change={after_change} daemon_crashes={crashes} stuck={stuck} bystander_managed={managed} bystander_restored={restored:?} restore_exit={:?} stale_records={stale} seconds={}",
        out.status.code(),
        t0.elapsed().as_secs()
    );
    bystander.stop().ok();
    bystander.delete().ok();
    p.assert_none(&failures);
    assert!(
        alive && term == Some(0),
        "daemon alive {alive}, exit {term:?}:\n{}",
        p.tail(60)
    );
    assert!(s1 > s0, "the daemon stopped sampling ({s0} → {s1})");
    assert!(managed, "the bystander was never changed:\n{}", p.tail(60));
    assert_eq!(
        restored,
        ORIGINAL,
        "restore did not put the bystander back: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A long run must have deleted devices after pptune changed them.
    assert!(
        deletions < 20 || after_change > 0,
        "none of {deletions} deletions came after a change"
    );
}

// ------------------------------------------------------- module unload

/// `rmmod ppsim` while its queues hold pages (2048-page bursts held 200 ms
/// by the consumer, a fifth of returns still referenced by "the stack"):
/// 7.3 lets the module go (ppsim's exit unregisters each device, the
/// kernel moves pools still holding pages to loopback as orphans or keeps
/// destroyed ones listed as detached until the pages come back, then
/// ppsim's consumers give them back). The daemon keeps running, drops the
/// devices, its orphan-pool gauge matches the kernel's pools without an
/// ifindex, and a device of the reloaded module is picked up.
#[tokio::test(flavor = "current_thread")]
async fn module_unloaded_with_pools_held() {
    let k = require_ppsim("module_unloaded_with_pools_held", PpsimKernels::Only73);
    let c = Client::connect().await.expect("client");
    let ppsim = Ppsim::load().expect("ppsim loads");
    let d = device(&ppsim, 2, None);
    d.set_knobs(&Knobs {
        hold_us: 200_000,
        stack_ref_pct: 20,
        ..bursty()
    })
    .expect("knobs");
    d.start().expect("start");
    let name = d.name().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let mut p = Daemon::new(dir.path(), "faults.yaml", None)
        .metrics_port(19892)
        .start_ready()
        .await;
    let held: u64 = d.queues().expect("queues").iter().map(|q| q.held).sum();
    let seen = wait_for(Duration::from_secs(10), || async {
        p.view()
            .await
            .is_some_and(|v| v.devices.iter().any(|x| x.name == name))
    })
    .await;
    assert!(seen, "the daemon never listed {name}:\n{}", p.tail(40));
    let t0 = Instant::now();
    let out = Command::new("rmmod").arg("ppsim").output().unwrap();
    let rmmod_ms = t0.elapsed().as_millis();
    assert!(
        out.status.success(),
        "rmmod ppsim: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dropped = wait_for(Duration::from_secs(10), || async {
        p.view()
            .await
            .is_some_and(|v| v.devices.iter().all(|x| !x.name.starts_with("ppsim")))
    })
    .await;
    // The kernel's orphans (pools without an ifindex) and the daemon's.
    let (mut orphans_kernel, mut orphans_daemon) = (0usize, -1.0);
    let mut agree = false;
    let t1 = Instant::now();
    while !agree && t1.elapsed() < Duration::from_secs(10) {
        sleep(Duration::from_millis(500)).await;
        let pools = c.page_pools().await.expect("page-pool-get");
        orphans_kernel = pools.iter().filter(|x| x.ifindex.is_none()).count();
        orphans_daemon = p.metric("pptune_orphan_pools", &[]);
        agree = orphans_daemon == orphans_kernel as f64;
    }
    let s0 = p.metric("pptune_samples_total", &[]);
    sleep(Duration::from_secs(2)).await;
    let s1 = p.metric("pptune_samples_total", &[]);
    // The module comes back with a new device: picked up.
    let ppsim = Ppsim::load().expect("ppsim reloads");
    let d2 = device(&ppsim, 1, None);
    let name2 = d2.name().to_owned();
    let picked_up = wait_for(Duration::from_secs(15), || async {
        p.view()
            .await
            .is_some_and(|v| v.devices.iter().any(|x| x.name == name2))
    })
    .await;
    let alive = p.alive();
    println!(
        "MEASURE suite=faults test=module_unload kernel={k} held_pages={held} rmmod_ms={rmmod_ms} daemon_alive={alive} devices_dropped={dropped} orphan_pools_kernel={orphans_kernel} orphan_pools_daemon={orphans_daemon} samples_after={} reloaded_device_seen={picked_up}",
        s1 - s0
    );
    d2.delete().ok();
    assert!(
        alive,
        "the daemon died when the module went:\n{}",
        p.tail(60)
    );
    assert!(
        dropped,
        "the unloaded devices stayed in the view:\n{}",
        p.tail(40)
    );
    assert!(
        agree,
        "orphan pools: kernel {orphans_kernel}, daemon {orphans_daemon}"
    );
    assert!(s1 > s0, "the daemon stopped sampling ({s0} → {s1})");
    assert!(
        picked_up,
        "a device of the reloaded module was not picked up:\n{}",
        p.tail(40)
    );
    assert_eq!(p.term().await, Some(0));
}

// --------------------------------------------------- refusing kernel

/// A driver that refuses every ring and channel set (EBUSY, extack
/// "ppsim: refuse_sets is on: …") for `PPTUNE_FAULT_REFUSE_SECS`: the
/// attempts, counted by ppsim in the kernel, stay within the policy's
/// hourly budget (tests/policies/faults-budget.yaml: 1) for every started
/// hour, the device shows as backed off in the metrics, the log carries
/// the kernel's message, and the ring is untouched.
#[tokio::test(flavor = "current_thread")]
async fn a_kernel_that_refuses_every_set() {
    let k = require_ppsim("a_kernel_that_refuses_every_set", PpsimKernels::Only73);
    let secs = count("PPTUNE_FAULT_REFUSE_SECS", 30);
    let budget = 1u64;
    let c = Client::connect().await.expect("client");
    let (d, _dir, mut p) = daemon_on_one_device("faults-budget.yaml", 19893, |d| {
        d.set_refuse_sets(true).expect("refuse_sets");
    })
    .await;
    let name = d.name().to_owned();
    let t0 = Instant::now();
    let mut worst_hour = 0u64;
    let mut hour_start = (Instant::now(), 0u64);
    let mut backoff_seen = false;
    let dev_label = format!("device=\"{name}\"");
    while t0.elapsed() < Duration::from_secs(secs) {
        sleep(Duration::from_secs(1)).await;
        assert!(p.alive(), "the daemon died:\n{}", p.tail(60));
        let refused = u64::from(d.refused_sets().expect("refused"));
        if hour_start.0.elapsed() >= Duration::from_secs(3600) {
            hour_start = (Instant::now(), refused);
        }
        worst_hour = worst_hour.max(refused - hour_start.1);
        backoff_seen |= p.metric("pptune_device_backoff", &[&dev_label]) == 1.0;
    }
    let refused = d.refused_sets().expect("refused");
    let counted = p.metric("pptune_actions_total", &[&dev_label, "result=\"refused\""]);
    let logged = p.log().contains("refuse_sets is on");
    let ring = rx_ring(&c, &d).await;
    println!(
        "MEASURE suite=faults test=refusing_kernel kernel={k} seconds={secs} attempts={refused} worst_hour_attempts={worst_hour} budget_per_hour={budget} refusals_counted={counted} backoff_in_metrics={backoff_seen} extack_logged={logged} ring={ring:?}"
    );
    d.stop().ok();
    d.delete().ok();
    assert!(refused >= 1, "the daemon never tried:\n{}", p.tail(40));
    assert!(
        worst_hour <= budget,
        "{worst_hour} attempts in an hour, the policy allows {budget}:\n{}",
        p.tail(60)
    );
    assert_eq!(counted, f64::from(refused), "every refusal is counted");
    assert!(backoff_seen, "the device never showed as backed off");
    assert!(
        logged,
        "the kernel's message is not in the log:\n{}",
        p.tail(40)
    );
    assert_eq!(ring, ORIGINAL);
    assert_eq!(p.term().await, Some(0));
}

// ---------------------------------------------- notification overflow

/// `net.core.rmem_max`, set for the daemon's start (its notification
/// sockets ask for more and get this) and put back on drop.
struct RmemMaxFor(String);

impl Drop for RmemMaxFor {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/net/core/rmem_max", &self.0);
    }
}

/// Rounds of rapid queue rebuilds on a 16-queue device (20 ring changes
/// and two channel changes by hand, each replacing up to 16 pools) with
/// the daemon's notification sockets at a 4 KiB buffer: they overflow
/// (ENOBUFS). After every round the daemon's ring, channel and pool series
/// must come back to the kernel's; the resyncs are counted
/// (`pptune_resyncs_total`).
#[tokio::test(flavor = "current_thread")]
async fn notification_overflow_at_high_rebuild_rates_resyncs() {
    let k = require_ppsim(
        "notification_overflow_at_high_rebuild_rates_resyncs",
        PpsimKernels::Only73,
    );
    let rounds = count("PPTUNE_FAULT_REBUILD_ROUNDS", 3);
    let c = Client::connect().await.expect("client");
    let ppsim = Ppsim::load().expect("ppsim loads");
    let d = ppsim.new_device(16).expect("device");
    d.set_up(true).expect("up");
    let name = d.name().to_owned();
    let rmem = RmemMaxFor(
        std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap()
            .trim()
            .to_owned(),
    );
    std::fs::write("/proc/sys/net/core/rmem_max", "4096").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut p = Daemon::new(dir.path(), "closed-loop-observe.yaml", Some(&name))
        .metrics_port(19894)
        .start_ready()
        .await;
    drop(rmem);
    let dev_label = format!("device=\"{name}\"");
    let r0 = p.metric("pptune_resyncs_total", &[]);
    let ifx = d.ifindex().unwrap();
    let mut converged = 0u64;
    let mut rebuilds = 0u64;
    let mut worst_s = 0.0f64;
    for r in 0..rounds {
        for i in 0..20 {
            d.ethtool_set_rx_ring(if i % 2 == 0 { 512 } else { 1024 })
                .unwrap();
        }
        d.ethtool_set_channels(8).unwrap();
        d.ethtool_set_channels(16).unwrap();
        let ring = 2048 + 64 * u32::try_from(r).unwrap();
        d.ethtool_set_rx_ring(ring).unwrap();
        rebuilds += 23;
        let t0 = Instant::now();
        let pools = attached_pools(&c, ifx).await.expect("page-pool-get").len() as f64;
        let ok = wait_for(Duration::from_secs(20), || async {
            let m = p.metrics();
            pptune_tests::exposition::sample_sum(&m, "pptune_ring_entries", &[&dev_label, "ring=\"rx\""])
                == f64::from(ring)
                && pptune_tests::exposition::sample_sum(
                    &m,
                    "pptune_channels",
                    &[&dev_label, "channel=\"combined\""],
                ) == 16.0
                // The device's own gauge: per-queue series are bounded
                // (the default exports the 4 worst queues of 16).
                && pptune_tests::exposition::sample_sum(&m, "pptune_device_pools", &[&dev_label])
                    == pools
        })
        .await;
        worst_s = worst_s.max(t0.elapsed().as_secs_f64());
        converged += u64::from(ok);
        assert!(p.alive(), "the daemon died:\n{}", p.tail(60));
    }
    let resyncs = p.metric("pptune_resyncs_total", &[]) - r0;
    let overflow_logged = p.log().contains("ENOBUFS");
    println!(
        "MEASURE suite=faults test=notification_overflow kernel={k} rmem_max=4096 queues=16 rounds={rounds} rebuilds={rebuilds} resyncs={resyncs} overflow_logged={overflow_logged} rounds_converged={converged} worst_converge_s={worst_s:.1}"
    );
    d.delete().ok();
    assert!(
        resyncs > 0.0,
        "no resync although notifications overflowed:\n{}",
        p.tail(40)
    );
    assert_eq!(
        converged,
        rounds,
        "the view did not come back to the kernel's:\n{}",
        p.tail(40)
    );
    assert_eq!(p.term().await, Some(0));
}

// ------------------------------------------------ state directory

/// A small tmpfs for the runtime directory, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        sh_ok(&format!(
            "mount -t tmpfs -o size={size} pptune-faults {}",
            at.display()
        ));
        Self(at.to_owned())
    }

    /// Makes the directory read-only for every new open: a read-only bind
    /// mount over it. (A read-only remount of the file system itself is
    /// refused while the daemon holds its lock file open for writing:
    /// "mount point is busy".)
    fn read_only(&self) {
        let at = self.0.display();
        sh_ok(&format!(
            "mount --bind {at} {at} && mount -o remount,bind,ro {at}"
        ));
    }

    /// Undoes [`Tmpfs::read_only`].
    fn writable(&self) {
        sh_ok(&format!("umount {}", self.0.display()));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = sh(&format!("umount -l {}", self.0.display()));
    }
}

/// The state directory read-only (a read-only bind mount over it), then
/// full (a 512 KiB tmpfs filled by another file): pptune keeps sampling, changes nothing (the
/// original must be on disk first), says why (log line, `state_write`
/// errors), and makes the change once the directory is writable again.
#[tokio::test(flavor = "current_thread")]
async fn state_directory_read_only_or_full_stops_enforcing_until_writable() {
    let k = require_ppsim(
        "state_directory_read_only_or_full_stops_enforcing_until_writable",
        PpsimKernels::Only73,
    );
    let c = Client::connect().await.expect("client");
    let ppsim = Ppsim::load().expect("ppsim loads");
    let d1 = device(&ppsim, 1, None);
    let d2 = device(&ppsim, 1, None);
    let dir = tempfile::tempdir().unwrap();
    let fs = Tmpfs::mount(&dir.path().join("run"), "512k");
    let mut p = Daemon::new(dir.path(), "faults.yaml", None)
        .runtime_dir(&fs.0)
        .metrics_port(19895)
        .start_ready()
        .await;
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for (phase, dev) in [("read_only", &d1), ("full", &d2)] {
        match phase {
            "read_only" => fs.read_only(),
            _ => {
                // Fill it: the write stops at ENOSPC.
                let _ = sh(&format!(
                    "dd if=/dev/zero of={}/filler bs=4k",
                    fs.0.display()
                ));
            }
        }
        let e0 = p.metric("pptune_errors_total", &["kind=\"state_write\""]);
        let s0 = p.metric("pptune_samples_total", &[]);
        dev.start().expect("start");
        // Six seconds of a workload that gets its change within a second
        // when the directory is writable (resume_s in the MEASURE line).
        let mut moved = None;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(6) {
            sleep(Duration::from_millis(250)).await;
            let r = rx_ring(&c, dev).await;
            if r != ORIGINAL {
                moved = Some(r);
                break;
            }
        }
        let errors = p.metric("pptune_errors_total", &["kind=\"state_write\""]) - e0;
        let samples = p.metric("pptune_samples_total", &[]) - s0;
        let ready = p.get("/readyz");
        let said = p.log().contains("writing the state record failed");
        match phase {
            "read_only" => fs.writable(),
            _ => std::fs::remove_file(fs.0.join("filler")).unwrap(),
        }
        let t1 = Instant::now();
        let resumed = wait_for(Duration::from_secs(30), || async {
            rx_ring(&c, dev).await != ORIGINAL
        })
        .await;
        report.push(format!(
            "{phase}: changed_while_unwritable={moved:?} state_write_errors={errors} samples={samples} logged={said} resumed={resumed} resume_s={:.1} readyz={:?}",
            t1.elapsed().as_secs_f64(),
            pptune_tests::http::body(&ready).trim()
        ));
        if moved.is_some() || errors < 1.0 || samples < 10.0 || !said || !resumed {
            failures.push(report.last().unwrap().clone());
        }
        dev.stop().ok();
    }
    let alive = p.alive();
    println!(
        "MEASURE suite=faults test=state_directory kernel={k} {}",
        report.join(" ")
    );
    let restore = {
        let _ = p.term().await;
        p.cmd(&["restore"])
    };
    d1.delete().ok();
    d2.delete().ok();
    assert!(alive, "the daemon died:\n{}", p.tail(60));
    p.assert_none(&failures);
    assert!(
        restore.status.success(),
        "restore after the faults: {}{}",
        String::from_utf8_lossy(&restore.stdout),
        String::from_utf8_lossy(&restore.stderr)
    );
}

// ------------------------------------------------------- clock jumps

/// The VM's wall clock, put back where it would be without the test's
/// jumps (`date -s`) by [`WallClock::reset`] and on drop, so a failing
/// test leaves later suites the right time.
struct WallClock {
    wall0: std::time::SystemTime,
    mono0: Instant,
}

impl WallClock {
    fn new() -> Self {
        Self {
            wall0: std::time::SystemTime::now(),
            mono0: Instant::now(),
        }
    }

    fn reset(&self) {
        let now = self.wall0 + self.mono0.elapsed();
        let secs = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let _ = sh(&format!("date -s @{secs}"));
    }
}

impl Drop for WallClock {
    fn drop(&mut self) {
        self.reset();
    }
}

/// The wall clock set 3 hours forward, then 6 back, then to where it
/// belongs (`date -s`), and the daemon stopped with SIGSTOP for
/// `PPTUNE_FAULT_STOP_SECS` and continued: its monotonic clock jumps by
/// that much between two ticks, as after a VM pause or a long scheduling
/// stall (a QEMU `stop`/`cont` is not used: tests/vm/run.sh exposes no
/// monitor, and a paused guest's monotonic clock need not advance). The
/// policy allows 1 change an hour and the workload's bursts grow before
/// every jump, so it asks for more: the kernel must see exactly that one
/// change, the budget must be what held the others (its decisions are
/// counted), and the daemon must keep sampling without a panic.
#[tokio::test(flavor = "current_thread")]
async fn clock_jumps_keep_the_change_budget() {
    let k = require_ppsim("clock_jumps_keep_the_change_budget", PpsimKernels::Only73);
    let stop_secs = count("PPTUNE_FAULT_STOP_SECS", 10);
    let c = Client::connect().await.expect("client");
    let (d, _dir, mut p) = daemon_on_one_device("faults-budget.yaml", 19896, |_| ()).await;
    let name = d.name().to_owned();
    let clock = WallClock::new();
    let t_start = Instant::now();
    let mut changes: Vec<(f64, u32)> = Vec::new();
    let mut last = rx_ring(&c, &d).await;
    let mut watch = async |p: &mut Daemon, changes: &mut Vec<(f64, u32)>, secs: u64| {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(secs) {
            sleep(Duration::from_millis(200)).await;
            assert!(p.alive(), "the daemon died:\n{}", p.tail(60));
            let r = rx_ring(&c, &d).await;
            if r != last {
                changes.push((t_start.elapsed().as_secs_f64(), r));
                last = r;
            }
        }
    };
    // The first change, at the normal pace; then the bursts grow before
    // each jump, so the workload asks for a change every time and only
    // the budget and the cooldown hold it back.
    watch(&mut p, &mut changes, 8).await;
    let grow = |burst_pages: u32| {
        d.set_knobs(&Knobs {
            burst_pages,
            ..bursty()
        })
        .expect("knobs");
    };
    for (jump, burst) in [("+3 hours", 4096), ("-6 hours", 8192)] {
        grow(burst);
        sh_ok(&format!("date -s '{jump}' >/dev/null"));
        watch(&mut p, &mut changes, 12).await;
    }
    clock.reset();
    grow(16384);
    watch(&mut p, &mut changes, 4).await;
    let s0 = p.metric("pptune_samples_total", &[]);
    p.signal(nix::sys::signal::Signal::SIGSTOP);
    sleep(Duration::from_secs(stop_secs)).await;
    p.signal(nix::sys::signal::Signal::SIGCONT);
    watch(&mut p, &mut changes, 8).await;
    let s1 = p.metric("pptune_samples_total", &[]);
    drop(clock);
    let panicked = p.log().contains("panicked");
    let dev_label = format!("device=\"{name}\"");
    let held_by_budget = p.metric(
        "pptune_decisions_total",
        &[&dev_label, "reason=\"change_budget_exhausted\""],
    );
    println!(
        "MEASURE suite=faults test=clock_jumps kernel={k} wall_jumps=+3h,-6h,reset stopped_s={stop_secs} changes={} budget=1 samples_after_stop={} held_by_budget={held_by_budget} panicked={panicked} trace={changes:?}",
        changes.len(),
        s1 - s0
    );
    d.stop().ok();
    d.delete().ok();
    assert!(!panicked, "{}", p.tail(60));
    assert!(!changes.is_empty(), "no change at all:\n{}", p.tail(40));
    assert!(
        changes.len() <= 1,
        "the budget of 1 broke: {changes:?}\n{}",
        p.tail(60)
    );
    assert!(
        held_by_budget > 0.0,
        "the workload never ran into the budget, so the test shows nothing:\n{}",
        p.tail(40)
    );
    assert!(
        s1 > s0,
        "the daemon stopped sampling after SIGCONT ({s0} → {s1})"
    );
    assert_eq!(p.term().await, Some(0));
}

// ------------------------------------------------------------ soak

/// The workload of soak phase `i` (`None`: traffic stopped): bursts that
/// are not powers of two, under both cost presets, steady, idle,
/// rate-limited, and held pages (the untunable case), in a cycle of eight.
fn soak_phase(i: u64) -> Option<Knobs> {
    let bursty = |pages, preset| {
        Some(
            Knobs {
                burst_pages: pages,
                ..Knobs::default()
            }
            .with_preset(preset),
        )
    };
    match i % 8 {
        0 => bursty(2500, CostPreset::Devmem),
        1 => bursty(300, CostPreset::ZoneLock),
        2 => Some(Knobs::default()),
        3 => None,
        4 => bursty(6000, CostPreset::Devmem),
        5 => Some(Knobs {
            rate_pps: 20_000,
            ..bursty(1500, CostPreset::ZoneLock).unwrap()
        }),
        6 => Some(Knobs {
            stack_ref_pct: 30,
            ..bursty(2048, CostPreset::Devmem).unwrap()
        }),
        _ => bursty(10_000, CostPreset::Devmem),
    }
}

/// Puts `d` on soak phase `i`'s workload.
fn soak_apply(d: &PpsimDev, i: u64) {
    d.stop().ok();
    if let Some(k) = soak_phase(i) {
        d.set_knobs(&k).expect("knobs");
        d.start().expect("start");
    }
}

/// Least-squares slope of `ys` over `xs`, per unit of `xs`.
fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let cov: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let var: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    if var == 0.0 { 0.0 } else { cov / var }
}

/// The watchdog side of systemd: a datagram socket the daemon's
/// `NOTIFY_SOCKET` points at, with the time of every `WATCHDOG=1` ping.
struct WatchdogListener {
    pings: std::sync::Arc<std::sync::Mutex<Vec<Instant>>>,
    ready: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WatchdogListener {
    fn bind(path: &Path) -> Self {
        use std::sync::atomic::Ordering;
        let sock = std::os::unix::net::UnixDatagram::bind(path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let pings: std::sync::Arc<std::sync::Mutex<Vec<Instant>>> = std::sync::Arc::default();
        let ready: std::sync::Arc<std::sync::atomic::AtomicBool> = std::sync::Arc::default();
        let stop: std::sync::Arc<std::sync::atomic::AtomicBool> = std::sync::Arc::default();
        let (p, r, s) = (
            std::sync::Arc::clone(&pings),
            std::sync::Arc::clone(&ready),
            std::sync::Arc::clone(&stop),
        );
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !s.load(Ordering::Relaxed) {
                let Ok(n) = sock.recv(&mut buf) else {
                    continue;
                };
                let msg = String::from_utf8_lossy(&buf[..n]);
                if msg.lines().any(|l| l == "READY=1") {
                    r.store(true, Ordering::Relaxed);
                }
                if msg.lines().any(|l| l == "WATCHDOG=1") {
                    p.lock().unwrap().push(Instant::now());
                }
            }
        });
        Self {
            pings,
            ready,
            stop,
            thread: Some(thread),
        }
    }

    /// Pings so far, and the longest time without one, counted from
    /// `since` (the daemon's start) to `until`.
    fn gaps(&self, since: Instant, until: Instant) -> (usize, Duration) {
        let pings = self.pings.lock().unwrap();
        let mut last = since;
        let mut worst = Duration::ZERO;
        for &t in pings.iter().chain(std::iter::once(&until)) {
            worst = worst.max(t.saturating_duration_since(last));
            last = t;
        }
        (pings.len(), worst)
    }
}

impl Drop for WatchdogListener {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Soak: the daemon in enforce mode (tests/policies/soak.yaml, 1 s
/// interval, rings and channels) under systemd's watchdog protocol
/// (`WATCHDOG_USEC` as the unit's `WatchdogSec=30s`) for
/// `PPTUNE_SOAK_SECS` (CI 80 s; campaign 7200 s), the workload of a
/// 4-queue device changing every `PPTUNE_SOAK_CHANGE_SECS` (CI 10 s;
/// campaign 180 s) through [`soak_phase`], and a 1-queue device on another
/// phase replaced by a new one (renamed `soakbN`) every fourth change.
///
/// Sampled from /proc every few seconds: resident set and descriptors; from
/// the control view: the sample age. **Promise:** the daemon stays up, no
/// watchdog period passes without a ping, descriptors end where they
/// started, the series of every deleted device leave `/metrics`, the
/// change path ran, and — in runs of half an hour or more — the resident
/// set's least-squares slope over the second half is under 1 MiB an hour
/// (a leak of a few hundred bytes a pass would exceed it). The shorter CI
/// form can only bound gross growth (end ≤ twice the post-warm-up RSS).
#[tokio::test(flavor = "current_thread")]
async fn soak_of_changing_workloads_stays_flat() {
    let k = require_ppsim(
        "soak_of_changing_workloads_stays_flat",
        PpsimKernels::Only73,
    );
    let secs = count("PPTUNE_SOAK_SECS", 80);
    let change_secs = count("PPTUNE_SOAK_CHANGE_SECS", 10).max(1);
    let every = Duration::from_secs((secs / 720).clamp(1, 10));
    let watchdog = Duration::from_secs(30);
    let ppsim = Ppsim::load().expect("ppsim loads");
    // The 4-queue device keeps ppsim's name: ppsim names a new device
    // after the lowest free `ppsimN` and keys its debugfs directory by it,
    // so only the replaced device is renamed (its name is free again, with
    // its debugfs directory, once it is deleted).
    let a = ppsim.new_device(4).expect("device");
    a.set_up(true).expect("up");
    let new_b = |n: u64| {
        let mut b = ppsim.new_device(1).expect("device");
        b.rename(&format!("soakb{n}")).expect("rename");
        b.set_up(true).expect("up");
        b
    };
    let mut b = new_b(0);
    let mut replaced: Vec<String> = Vec::new();
    soak_apply(&a, 0);
    soak_apply(&b, 3);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("notify.sock");
    let listener = WatchdogListener::bind(&sock);
    let started = Instant::now();
    let mut p = Daemon::new(dir.path(), "soak.yaml", None)
        .metrics_port(19897)
        .notify(&sock, watchdog)
        .start_ready()
        .await;
    let t0 = Instant::now();
    let (mut ts, mut rss, mut fds) = (Vec::new(), Vec::new(), Vec::new());
    let mut worst_age = 0u64;
    let mut phase = 0u64;
    // Changes applied to devices replaced since (their series went with them).
    let mut applied_gone = 0.0;
    while t0.elapsed() < Duration::from_secs(secs) {
        sleep(every).await;
        assert!(p.alive(), "the daemon died:\n{}", p.tail(60));
        let due = t0.elapsed().as_secs() / change_secs;
        while phase < due {
            phase += 1;
            soak_apply(&a, phase);
            if phase.is_multiple_of(4) {
                // Its counters leave /metrics with it: count them first.
                applied_gone += p.metric(
                    "pptune_actions_total",
                    &[&format!("device=\"{}\"", b.name()), "result=\"applied\""],
                );
                replaced.push(b.name().to_owned());
                b.stop().ok();
                b.delete().expect("delete");
                b = new_b(phase / 4);
            }
            soak_apply(&b, phase + 3);
        }
        let pid = p.pid();
        let (r, f) = (
            pptune_tests::bin::rss_kib(pid),
            pptune_tests::bin::open_fds(pid) as u64,
        );
        ts.push(t0.elapsed().as_secs_f64() / 3600.0);
        rss.push(r as f64);
        fds.push(f);
        if let Some(age) = p.view().await.and_then(|v| v.last_sample_age_s) {
            worst_age = worst_age.max(age);
        }
    }
    let (pings, worst_gap) = listener.gaps(started, Instant::now());
    let ready = listener.ready.load(std::sync::atomic::Ordering::Relaxed);
    let applied = applied_gone + p.metric("pptune_actions_total", &["result=\"applied\""]);
    // Deleted devices' series leave /metrics (within a few passes).
    let t_stale = Instant::now();
    let stale = loop {
        let m = p.get("/metrics");
        let stale: Vec<String> = replaced
            .iter()
            .filter(|n| m.contains(&format!("device=\"{n}\"")))
            .cloned()
            .collect();
        if stale.is_empty() || t_stale.elapsed() > Duration::from_secs(10) {
            break stale;
        }
        sleep(Duration::from_millis(500)).await;
    };
    // Warm-up: the first tenth (at least two samples) is left out.
    let n = ts.len();
    let warm = (n / 10).max(2).min(n.saturating_sub(2));
    let half = n / 2;
    let quarter = ((n - warm) / 4).max(1);
    let fd_start = fds[warm..warm + quarter].iter().min().copied().unwrap_or(0);
    let fd_end = fds[n - quarter..].iter().min().copied().unwrap_or(0);
    let rss_warm = rss[warm];
    let rss_end = rss[n - 1];
    let rss_max = rss.iter().copied().fold(0.0, f64::max);
    let slope_all = slope(&ts[warm..], &rss[warm..]);
    let slope_half = slope(&ts[half..], &rss[half..]);
    let fd_slope = slope(
        &ts[warm..],
        &fds[warm..].iter().map(|&f| f as f64).collect::<Vec<_>>(),
    );
    println!(
        "MEASURE suite=faults test=soak kernel={k} seconds={secs} change_every_s={change_secs} phases={} devices_replaced={} samples={n} sample_every_s={} rss_after_warmup_kib={rss_warm} rss_end_kib={rss_end} rss_max_kib={rss_max} rss_slope_kib_per_h={slope_all:.0} rss_slope_second_half_kib_per_h={slope_half:.0} fds_start={fd_start} fds_end={fd_end} fd_slope_per_h={fd_slope:.2} worst_sample_age_s={worst_age} watchdog_pings={pings} watchdog_worst_gap_s={:.1} watchdog_s={} ready_sent={ready} changes_applied={applied} stale_series_devices={}",
        phase + 1,
        replaced.len(),
        every.as_secs(),
        worst_gap.as_secs_f64(),
        watchdog.as_secs(),
        stale.len(),
    );
    a.stop().ok();
    b.stop().ok();
    let mut failures = Vec::new();
    if !ready {
        failures.push("no READY=1 on the notify socket".to_owned());
    }
    if pings == 0 || worst_gap >= watchdog {
        failures.push(format!(
            "watchdog: {pings} pings, the longest gap {worst_gap:?} (period {watchdog:?})"
        ));
    }
    if fd_end > fd_start + 1 {
        failures.push(format!("descriptors grew: {fd_start} → {fd_end}"));
    }
    if !stale.is_empty() {
        let m = p.get("/metrics");
        let lines: Vec<&str> = m
            .lines()
            .filter(|l| stale.iter().any(|n| l.contains(&format!("device=\"{n}\""))))
            .collect();
        failures.push(format!(
            "deleted devices still in /metrics: {stale:?}:\n{}",
            lines.join("\n")
        ));
    }
    if applied < 1.0 {
        failures.push("no change was applied: the soak never exercised the change path".into());
    }
    if worst_age > 10 {
        failures.push(format!("a sample was {worst_age} s old at a 1 s interval"));
    }
    if secs >= 1800 {
        if slope_half > 1024.0 {
            failures.push(format!(
                "RSS grows {slope_half:.0} KiB/h over the second half (limit 1024)"
            ));
        }
    } else if rss_end > 2.0 * rss_warm {
        failures.push(format!("RSS doubled: {rss_warm} → {rss_end} KiB"));
    }
    p.assert_none(&failures);
    assert_eq!(p.term().await, Some(0));
    a.delete().ok();
    b.delete().ok();
}
