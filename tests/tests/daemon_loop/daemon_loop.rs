//! The daemon's loop logic against the hand-written fake kernel, with the
//! real policy engine, in paused tokio time (a minute of daemon life runs
//! in milliseconds, deterministically).

// Test helpers may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use policy::{Mode, OnStop, Policy};
use pptune::act::state::StateStore;
use pptune::publish::metrics::Metrics;
use pptune::publish::notify::Notifier;
use pptune::sample::KernelEvent;
use pptune::service::{Options, PolicyEngine, PolicyNotLoaded, PolicySource, run};
use pptune_tests::bin::notify_socket;
use pptune_tests::daemon;
use pptune_tests::fake::{self, FakeKernel};
use tokio::sync::mpsc;

/// Scripted policy loads: each reload takes the next entry; the last one
/// repeats.
struct Scripted(Mutex<Vec<Result<Policy, PolicyNotLoaded>>>);

impl PolicySource for Scripted {
    fn load(&self) -> Result<Policy, PolicyNotLoaded> {
        let mut v = self.0.lock().unwrap();
        if v.len() > 1 {
            v.remove(0)
        } else {
            v[0].clone()
        }
    }
}

struct Harness {
    metrics: Arc<Metrics>,
    reload: mpsc::UnboundedSender<()>,
}

fn options(store: Option<StateStore>, notifier: Notifier) -> (Options, Harness) {
    let metrics = Arc::new(Metrics::new());
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Options {
            notifier,
            store,
            ..daemon::options("host-1", Arc::clone(&metrics), rx)
        },
        Harness {
            metrics,
            reload: tx,
        },
    )
}

fn store(dir: &Path) -> StateStore {
    StateStore::open(dir, "boot-1".into()).unwrap()
}

fn source(p: &Policy) -> Box<dyn PolicySource> {
    Box::new(Scripted(Mutex::new(vec![Ok(p.clone())])))
}

/// Runs the daemon for `secs` seconds of (paused) time.
async fn run_for(
    k: &Arc<FakeKernel>,
    p: &Policy,
    src: Box<dyn PolicySource>,
    opts: Options,
    secs: u64,
) {
    run(
        Arc::clone(k),
        PolicyEngine::default(),
        src,
        p.clone(),
        opts,
        tokio::time::sleep(Duration::from_secs(secs)),
    )
    .await
    .unwrap();
}

/// The bursty fake kernel, the test policy in `mode` and the loop's
/// options: its state record kept in `dir` when there is one, no service
/// manager.
fn bursty(mode: Mode, dir: Option<&Path>) -> (Arc<FakeKernel>, Policy, Options, Harness) {
    let (opts, h) = options(dir.map(store), Notifier::off());
    (
        Arc::new(FakeKernel::bursty()),
        fake::test_policy(mode),
        opts,
        h,
    )
}

/// [`bursty`] after `secs` of the loop.
async fn bursty_for(mode: Mode, dir: Option<&Path>, secs: u64) -> (Arc<FakeKernel>, Harness) {
    let (k, p, opts, h) = bursty(mode, dir);
    run_for(&k, &p, source(&p), opts, secs).await;
    (k, h)
}

/// The notifications waiting on `sock`, in order.
fn notifications(sock: &UnixDatagram) -> Vec<String> {
    sock.set_nonblocking(true).unwrap();
    let mut msgs = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = sock.recv(&mut buf) {
        msgs.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    msgs
}

fn metric(m: &Metrics, prefix: &str) -> f64 {
    pptune_tests::exposition::prefix_sum(&m.encode().unwrap(), prefix)
}

#[tokio::test(start_paused = true)]
async fn observe_mode_changes_nothing_but_recommends() {
    let (k, h) = bursty_for(Mode::Observe, None, 30).await;
    assert!(k.sets().is_empty(), "observe mode set {:?}", k.sets());
    assert_eq!(k.ring(), 256);
    let recs = metric(
        &h.metrics,
        "pptune_decisions_total{device=\"eth0\",action=\"set_ring\",reason=\"recycle_miss_high\",mode=\"observe\"}",
    );
    assert!(
        recs >= 1.0,
        "no recommendation exported:\n{}",
        h.metrics.encode().unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn enforce_grows_the_ring_on_bursts_and_records_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let (k, h) = bursty_for(Mode::Enforce, Some(dir.path()), 60).await;
    let sets = k.sets();
    assert!(!sets.is_empty(), "no change made");
    assert!(k.ring() >= 2048, "ring {} after {sets:?}", k.ring());
    // Few disruptive steps, not a doubling ladder.
    assert!(sets.len() <= 2, "{sets:?}");
    let state = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert_eq!(v["boot_id"], "boot-1");
    assert_eq!(v["schema_version"], 1);
    let rec = &v["devices"]["pci/0000:3b:00.0/0c:42:a1:00:00:01"];
    assert_eq!(rec["originals"][0]["value"], 256, "{state}");
    assert!(
        metric(
            &h.metrics,
            "pptune_actions_total{device=\"eth0\",knob=\"ring.rx\",direction=\"grow\",result=\"applied\"}"
        ) >= 1.0
    );
    // The evaluation window closed with a verdict: the misses stopped.
    assert!(
        metric(
            &h.metrics,
            "pptune_actions_total{device=\"eth0\",knob=\"ring.rx\",direction=\"grow\",result=\"effective\"}"
        ) >= 1.0,
        "{}",
        h.metrics.encode().unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn kernel_refusal_is_an_answer_not_a_retry_storm() {
    let (k, p, opts, h) = bursty(Mode::Enforce, None);
    k.state.lock().unwrap().refuse = Some((95, "operation not supported by driver".into()));
    // Five minutes at one sample per second: the engine keeps asking.
    run_for(&k, &p, source(&p), opts, 300).await;
    let sets = k.sets();
    // The refusal teaches the engine that the ring is not settable
    // (policy/src/drivers/learn.rs `learn_from_refusal`): one ask, never another.
    assert_eq!(sets.len(), 1, "retry storm: {sets:?}");
    assert_eq!(k.ring(), 256);
    assert!(
        metric(
            &h.metrics,
            "pptune_actions_total{device=\"eth0\",knob=\"ring.rx\",direction=\"grow\",result=\"refused\"}"
        ) >= 1.0
    );
}

#[tokio::test(start_paused = true)]
async fn operator_override_stops_management_until_reload() {
    let (k, p, opts, h) = bursty(Mode::Enforce, None);
    let k2 = Arc::clone(&k);
    let reload = h.reload.clone();
    let op = tokio::spawn(async move {
        // Wait for pptune's first change, then an admin sets the ring back.
        while k2.sets().is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        k2.operator_set_ring(512);
        // 60 s later, still 512; then a reload hands the knob back.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let at_reload = (k2.ring(), k2.sets().len());
        reload.send(()).unwrap();
        at_reload
    });
    run_for(&k, &p, source(&p), opts, 120).await;
    let (ring_at_reload, sets_at_reload) = op.await.unwrap();
    assert_eq!(ring_at_reload, 512, "pptune fought the operator");
    assert_eq!(sets_at_reload, 1, "{:?}", k.sets());
    assert_eq!(
        metric(
            &h.metrics,
            "pptune_operator_overrides_total{device=\"eth0\",knob=\"ring.rx\"}"
        ),
        1.0
    );
    // pptune's own notifications were not taken for an operator's.
    assert!(
        k.sets().len() >= 2,
        "after reload pptune manages again: {:?}",
        k.sets()
    );
}

#[tokio::test(start_paused = true)]
async fn state_survives_restart_and_restore_on_stop_puts_originals_back() {
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Enforce);
    // First run: keep on stop. The change stays, the original is recorded.
    let (opts, _h) = options(Some(store(dir.path())), Notifier::off());
    run_for(&k, &p, source(&p), opts, 30).await;
    assert!(k.ring() > 256);
    // Second run (a restart, same boot), restore on stop: the original
    // comes from the record written by the first run.
    p.on_stop = OnStop::Restore;
    let (opts, _h) = options(Some(store(dir.path())), Notifier::off());
    run_for(&k, &p, source(&p), opts, 5).await;
    assert_eq!(
        k.ring(),
        256,
        "SIGTERM with restore did not put the original back"
    );
    let state = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert!(
        v["devices"].as_object().unwrap().is_empty(),
        "record not cleared: {state}"
    );
}

#[tokio::test(start_paused = true)]
async fn restore_command_uses_the_record_of_a_killed_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let (k, _h) = bursty_for(Mode::Enforce, Some(dir.path()), 30).await;
    assert!(k.ring() > 256);
    // `pptune restore` after the daemon is gone.
    let st = store(dir.path());
    let (mut rec, _) = st.load().unwrap();
    let snap = pptune::sample::Kernel::sample(&*k, &Default::default())
        .await
        .unwrap();
    let (lines, ok, _) =
        pptune::act::set::restore_originals(&*k, &mut rec, &snap.devices, &[]).await;
    assert!(ok, "{lines:?}");
    assert_eq!(k.ring(), 256);
    assert!(rec.devices.is_empty());
}

#[tokio::test(start_paused = true)]
async fn invalid_reload_keeps_the_last_good_policy() {
    let k = Arc::new(FakeKernel::bursty());
    let p = fake::test_policy(Mode::Observe);
    let src = Box::new(Scripted(Mutex::new(vec![Err(PolicyNotLoaded(
        "policy.yaml:3:7: unknown key `rx_rign`".to_owned(),
    ))])));
    let (opts, h) = options(None, Notifier::off());
    let reload = h.reload.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        reload.send(()).unwrap();
    });
    run_for(&k, &p, src, opts, 20).await;
    assert_eq!(
        metric(
            &h.metrics,
            "pptune_policy_reloads_total{result=\"invalid\"}"
        ),
        1.0
    );
    assert_eq!(metric(&h.metrics, "pptune_policy_valid "), 0.0);
    // Still sampling and deciding with the old policy after the reload.
    assert!(metric(&h.metrics, "pptune_samples_total") >= 15.0);
    assert!(k.sets().is_empty());
}

#[tokio::test(start_paused = true)]
async fn overflow_triggers_a_resync() {
    let (k, p, opts, h) = bursty(Mode::Observe, None);
    let k2 = Arc::clone(&k);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        k2.emit(KernelEvent::Overflow { source: "netdev" });
    });
    run_for(&k, &p, source(&p), opts, 5).await;
    assert_eq!(
        metric(&h.metrics, "pptune_resyncs_total{kind=\"netdev\"}"),
        1.0
    );
    // 5 ticks + 1 resync sample.
    assert!(k.state.lock().unwrap().samples >= 6);
}

#[tokio::test(start_paused = true)]
async fn sd_notify_ready_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let (sock_path, sock) = notify_socket(dir.path());
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Observe);
    // A long interval: the watchdog (4 s) must still be pinged every ≤ 2 s.
    p.timing.interval = Duration::from_secs(60);
    let notifier = Notifier::to_path(sock_path, Some(Duration::from_secs(4)));
    let (opts, h) = options(None, notifier);
    let reload = h.reload.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        reload.send(()).unwrap();
    });
    run_for(&k, &p, source(&p), opts, 10).await;
    let msgs = notifications(&sock);
    assert!(msgs[0].starts_with("READY=1\nSTATUS="), "{msgs:?}");
    let pings = msgs.iter().filter(|m| m.contains("WATCHDOG=1")).count();
    assert!(
        pings >= 5,
        "{pings} pings in 10 s with a 4 s watchdog: {msgs:?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("RELOADING=1\nMONOTONIC_USEC=")),
        "{msgs:?}"
    );
    assert!(
        msgs.last().unwrap().contains("STOPPING=1")
            || msgs.iter().any(|m| m.contains("STOPPING=1"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_device_deleted_mid_change_leaves_the_daemon_running_and_state_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let (k, p, opts, h) = bursty(Mode::Enforce, Some(dir.path()));
    k.state.lock().unwrap().vanish_on_set = true;
    let k2 = Arc::clone(&k);
    tokio::spawn(async move {
        while k2.sets().is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        k2.emit(KernelEvent::LinkRemoved {
            ifindex: fake::IFINDEX,
        });
    });
    run_for(&k, &p, source(&p), opts, 30).await;
    assert_eq!(k.sets().len(), 1, "{:?}", k.sets());
    // Still sampling after the device went away.
    assert!(metric(&h.metrics, "pptune_samples_total") >= 25.0);
    // The record keeps the original (the device may come back under its
    // identity) and the failed action, and parses.
    let state = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&state).unwrap();
    let rec = &v["devices"]["pci/0000:3b:00.0/0c:42:a1:00:00:01"];
    assert_eq!(rec["originals"][0]["value"], 256, "{state}");
    assert_eq!(rec["actions"][0]["outcome"]["result"], "failed", "{state}");
    // Its series are gone from the exposition, the failed action's counter
    // with them (a vanished device takes its counters along; the failure
    // stays in the record, above).
    let text = h.metrics.encode().unwrap();
    assert!(!text.contains("device=\"eth0\""), "{text}");
}

/// The fake's bursts set to 400 pages (a first step can size them:
/// bursts it frees half of or more send a step to the limit, leaving
/// nothing to grow); `secs` after pptune's first change the device leaves
/// the samples for 2 s, and comes back as `back` leaves it.
fn vanish_after_the_first_change(
    k: &Arc<FakeKernel>,
    secs: u64,
    back: impl FnOnce(&mut fake::FakeState) + Send + 'static,
) {
    k.state.lock().unwrap().burst = 400;
    let k = Arc::clone(k);
    tokio::spawn(async move {
        while k.sets().is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(secs)).await;
        k.state.lock().unwrap().gone = true;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut s = k.state.lock().unwrap();
        s.gone = false;
        back(&mut s);
    });
}

/// A device that vanishes while its change is judged and comes back under
/// its identity (a driver reset, a module reload): the window ends
/// unjudged, the change's record closes `inconclusive`, and the device is
/// tuned again once its cooldown is over. Failed before: the record stayed
/// `pending`, which holds a device until its verdict, and no window was
/// left to give one (the daemon had to restart).
#[tokio::test(start_paused = true)]
async fn a_device_back_from_vanishing_mid_evaluation_is_tuned_again() {
    let dir = tempfile::tempdir().unwrap();
    let (k, p, opts, _h) = bursty(Mode::Enforce, Some(dir.path()));
    // Gone for two samples of the 3 s evaluation, then back with bursts
    // the grown ring does not hold either.
    vanish_after_the_first_change(&k, 0, |s| s.burst = 4000);
    run_for(&k, &p, source(&p), opts, 40).await;
    let state = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&state).unwrap();
    let rec = &v["devices"]["pci/0000:3b:00.0/0c:42:a1:00:00:01"];
    assert_eq!(
        rec["actions"][0]["outcome"]["result"], "inconclusive",
        "{state}"
    );
    let sets = k.sets();
    assert!(
        sets.len() >= 2 && sets.iter().all(|(knob, _)| knob.starts_with("ring.")),
        "grown again after the cooldown: {sets:?}\n{state}"
    );
}

/// A device back from a driver reset comes back at the driver's default
/// ring, not the one pptune set: that is no operator's override. Failed
/// before: pptune compared it with what it had set before the device
/// vanished, declared an override ("someone else changed ring.rx"),
/// stopped managing the ring until the next reload and forgot its
/// original.
#[tokio::test(start_paused = true)]
async fn a_device_back_from_a_reset_at_its_default_ring_is_no_override() {
    let dir = tempfile::tempdir().unwrap();
    let (k, p, opts, h) = bursty(Mode::Enforce, Some(dir.path()));
    // Past the change's evaluation and cooldown, the device goes and comes
    // back with the driver's ring and new pools.
    vanish_after_the_first_change(&k, 12, |s| {
        s.ring = 256;
        fake::rebuild(s);
    });
    run_for(&k, &p, source(&p), opts, 40).await;
    let text = h.metrics.encode().unwrap();
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("pptune_operator_overrides") && !l.ends_with(" 0")),
        "no override:\n{text}"
    );
    let sets = k.sets();
    assert!(
        sets.len() >= 2,
        "the ring is pptune's again and grown back: {sets:?}"
    );
    let state = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&state).unwrap();
    let rec = &v["devices"]["pci/0000:3b:00.0/0c:42:a1:00:00:01"];
    assert_eq!(rec["originals"][0]["value"], 256, "{state}");
}

#[tokio::test(start_paused = true)]
async fn a_notification_flood_starves_neither_samples_nor_the_watchdog() {
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("notify.sock");
    let sock = tokio::net::UnixDatagram::bind(&sock_path).unwrap();
    // Read while the daemon runs, as systemd does.
    let reader = tokio::spawn(async move {
        let mut pings = 0;
        let mut buf = [0u8; 4096];
        while let Ok(n) = sock.recv(&mut buf).await {
            if String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1") {
                break;
            }
            if String::from_utf8_lossy(&buf[..n]).contains("WATCHDOG=1") {
                pings += 1;
            }
        }
        pings
    });
    let k = Arc::new(FakeKernel::bursty());
    let p = fake::test_policy(Mode::Observe);
    let notifier = Notifier::to_path(sock_path, Some(Duration::from_secs(4)));
    let (opts, h) = options(None, notifier);
    let k2 = Arc::clone(&k);
    tokio::spawn(async move {
        loop {
            // Several events at once, faster than any timer.
            for _ in 0..10 {
                k2.emit(KernelEvent::PoolsChanged {
                    ifindex: Some(fake::IFINDEX),
                });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    run_for(&k, &p, source(&p), opts, 10).await;
    let pings = reader.await.unwrap();
    assert!(pings >= 5, "{pings} watchdog pings in 10 s");
    assert!(metric(&h.metrics, "pptune_samples_total") >= 9.0);
}

/// A device that vanishes leaves the daemon's last decisions: the status
/// line (systemd's STATUS=, `systemctl status`) counts the devices selected
/// now, not every device ever selected. Failed before: the last decision
/// per device was never dropped, so "1 selected" stayed after the device
/// was gone, and a host whose devices come and go under new names grew the
/// map (and the count) for the daemon's life.
#[tokio::test(start_paused = true)]
async fn a_vanished_device_leaves_the_status_line() {
    let dir = tempfile::tempdir().unwrap();
    let (sock_path, sock) = notify_socket(dir.path());
    let k = Arc::new(FakeKernel::bursty());
    let p = fake::test_policy(Mode::Observe);
    let notifier = Notifier::to_path(sock_path, None);
    let (opts, _h) = options(None, notifier);
    let gone = Arc::clone(&k);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        gone.state.lock().unwrap().gone = true;
    });
    run_for(&k, &p, source(&p), opts, 10).await;
    let msgs = notifications(&sock);
    let statuses: Vec<&str> = msgs
        .iter()
        .flat_map(|m| m.lines())
        .filter_map(|l| l.strip_prefix("STATUS="))
        .collect();
    assert!(
        statuses
            .iter()
            .any(|s| s.starts_with("1 devices, 1 selected")),
        "{statuses:?}"
    );
    let last = statuses
        .iter()
        .rev()
        .find(|s| s.as_bytes()[0].is_ascii_digit())
        .unwrap();
    assert!(last.starts_with("0 devices, 0 selected"), "{statuses:?}");
}

/// ppsim's `queues-held` curve (tests/ppsim/README.md "Queue count"): the
/// modelled pages per second at n queues when every page is held and the
/// allocator's lock is contended, n / (1 + 0.09375 (1 + 0.44 (n − 1))²),
/// ×10⁵ per 1 s sample: 16 → 2.49, 14 → 2.68, 12 → 2.86, 10 → 3.03,
/// 8 → 3.12 (the peak), 6 → 3.06.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn held_curve(n: u32) -> u64 {
    let n = f64::from(n);
    let f = 1.0 + 0.44 * (n - 1.0);
    (n / (1.0 + 0.093_75 * f * f) * 1e5) as u64
}

fn shedding_policy(trial_gain: f64) -> Policy {
    let mut p = fake::test_policy(Mode::Enforce);
    p.channels.enabled = true;
    p.channels.shrink_when_contended = true;
    p.channels.step = 2;
    p.channels.trial_gain = trial_gain;
    p
}

/// Held pages on a contended slow path: the ring cannot help, so the
/// daemon cuts queues as trials, each judged on the delivered rate (qstats
/// rx-packets) over equal windows: kept while it rises, and the first cut
/// that does not raise it (8 → 6, −2 %) is put back, after which nothing
/// changes any more (no flapping). The ring never moves.
#[tokio::test(start_paused = true)]
async fn held_pages_shed_queues_while_the_rate_rises_then_revert_and_stop() {
    let k = Arc::new(FakeKernel::held(16, held_curve));
    let p = shedding_policy(0.02);
    let (opts, h) = options(None, Notifier::off());
    run_for(&k, &p, source(&p), opts, 400).await;
    let sets: Vec<u32> = k.sets().iter().map(|(_, v)| *v).collect();
    assert!(
        k.sets()
            .iter()
            .all(|(knob, _)| knob.starts_with("channels")),
        "{:?}",
        k.sets()
    );
    // Four kept cuts, the fifth put back.
    assert_eq!(sets, [14, 12, 10, 8, 6, 8], "{:?}", k.sets());
    assert_eq!((k.channels(), k.ring()), (8, 256));
    let m = |result: &str| {
        metric(
            &h.metrics,
            &format!(
                "pptune_actions_total{{device=\"eth0\",knob=\"channels.combined\",direction=\"shrink\",result=\"{result}\"}}"
            ),
        )
    };
    assert_eq!(
        (m("effective"), m("reverted")),
        (4.0, 1.0),
        "{}",
        h.metrics.encode().unwrap()
    );
    assert!(
        metric(
            &h.metrics,
            "pptune_decisions_total{device=\"eth0\",action=\"set_channels\",reason=\"channels_shrink_trial\",mode=\"enforce\"}"
        ) >= 5.0,
        "{}",
        h.metrics.encode().unwrap()
    );
}

/// The state record is written ahead of every change: at the instant the
/// trial cut goes to the kernel the record on disk already holds the
/// channel count's original and the cut, pending; at the instant the
/// revert goes, the cut's `reverted` verdict (which holds the next cut).
/// A daemon killed at either instant leaves a record `restore` and the
/// next run act on; before, the record followed each change.
#[tokio::test(start_paused = true)]
async fn the_record_is_on_disk_before_each_change() {
    use policy::Outcome;
    use pptune::act::state::StateFile;
    let dir = tempfile::tempdir().unwrap();
    let st = store(dir.path());
    let k = Arc::new(FakeKernel::held(16, |_| 250_000));
    k.state.lock().unwrap().watched = Some(st.path());
    let p = shedding_policy(0.05);
    let (opts, _h) = options(Some(st), Notifier::off());
    run_for(&k, &p, source(&p), opts, 400).await;
    let (sets, at_set) = {
        let s = k.state.lock().unwrap();
        (s.sets.clone(), s.watched_at_set.clone())
    };
    assert_eq!(sets.iter().map(|(_, v)| *v).collect::<Vec<_>>(), [14, 16]);
    let record = |i: usize| -> StateFile {
        serde_json::from_str(at_set[i].as_deref().expect("a record on disk")).unwrap()
    };
    let knob = policy::Knob::Channels(policy::ChannelField::Combined);
    let cut = record(0);
    let dev = &cut.devices[&fake::device_id().key()];
    assert_eq!(cut.original(&fake::device_id(), knob), Some(16));
    let last = dev.actions.last().expect("the cut, written ahead");
    assert_eq!(
        (last.knob, last.from, last.to, &last.outcome),
        (knob, 16, 14, &Outcome::Pending)
    );
    let revert = record(1);
    let last = revert.devices[&fake::device_id().key()]
        .actions
        .last()
        .unwrap();
    assert_eq!(
        (last.from, last.to, &last.outcome),
        (16, 14, &Outcome::Reverted)
    );
}

/// Where fewer queues do not deliver more (the rate does not depend on the
/// count), the first trial cut is put back and the device is left alone:
/// one cut, one revert, in 400 s.
#[tokio::test(start_paused = true)]
async fn a_trial_cut_that_does_not_raise_the_rate_is_put_back_once() {
    let k = Arc::new(FakeKernel::held(16, |_| 250_000));
    let p = shedding_policy(0.05);
    let (opts, _h) = options(None, Notifier::off());
    run_for(&k, &p, source(&p), opts, 400).await;
    assert_eq!(
        k.sets(),
        [
            ("channels.Combined".to_owned(), 14),
            ("channels.Combined".to_owned(), 16)
        ]
    );
    assert_eq!(k.channels(), 16);
}
