//! Record and replay on the service loop (fake kernel, paused time): the
//! recording the live loop writes replays to the very decisions it made;
//! a counterfactual replay predicts what enforcing would have done; the
//! change journal survives a restart.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use policy::plan::Action;
use policy::{Mode, Policy};
use pptune::cmd::record::{Recorded, record_with};
use pptune::cmd::replay::plot::{self, Area};
use pptune::cmd::replay::{ReplayArgs, SeriesFormat, replay_cmd, series};
use pptune::publish::metrics::Metrics;
use pptune::record::{journal, recording_dir};
use pptune::replay::{Basis, Point, Selection, replay, replay_selected};
use pptune::service::{Options, PolicyEngine, run};
use pptune_tests::daemon::{self, Fixed};
use pptune_tests::fake::{self, FakeKernel};
use tokio::sync::mpsc;

async fn run_for(k: &Arc<FakeKernel>, p: &Policy, state_dir: &Path, secs: u64) -> Arc<Metrics> {
    let metrics = Arc::new(Metrics::new());
    let (_tx, rx) = mpsc::unbounded_channel();
    let opts = Options {
        recording: Some(state_dir.to_owned()),
        ..daemon::options("host-1", Arc::clone(&metrics), rx)
    };
    run(
        Arc::clone(k),
        PolicyEngine::default(),
        Box::new(Fixed(p.clone())),
        p.clone(),
        opts,
        tokio::time::sleep(Duration::from_secs(secs)),
    )
    .await
    .unwrap();
    metrics
}

fn metric(m: &Metrics, name: &str) -> f64 {
    m.encode()
        .unwrap()
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

#[tokio::test(start_paused = true)]
async fn replaying_the_live_recording_under_its_policy_decides_exactly_as_the_daemon_did() {
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let p = fake::test_policy(Mode::Enforce);
    let m = run_for(&k, &p, dir.path(), 60).await;
    assert!(!k.sets().is_empty(), "the live loop changed nothing");
    assert!(metric(&m, "pptune_recording_bytes") > 0.0);
    assert!(metric(&m, "pptune_recording_oldest_timestamp_seconds") > 1.0e9);

    let r = replay(&recording_dir(dir.path()), &p).unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert!(r.passes >= 10, "{}", r.passes);
    assert_eq!(r.faithful_passes, r.passes);
    assert_eq!(
        r.identical_passes, r.passes,
        "decisions differ from the live loop's"
    );
    let changes: Vec<_> = r
        .decisions
        .iter()
        .filter(|d| d.decision.mode == Mode::Enforce)
        .collect();
    assert_eq!(changes.len(), k.sets().len(), "{:?}", k.sets());
    for c in &changes {
        assert_eq!(c.basis, Basis::Observed);
        let rec = c.recorded.as_ref().unwrap();
        assert_eq!(rec.id, c.decision.id.0);
        assert_eq!(rec.action, c.decision.action);
    }
}

#[tokio::test(start_paused = true)]
async fn an_observe_recording_replayed_with_enforce_predicts_the_enforced_ring() {
    // The live enforce run: where the ring ends and why it first moved.
    let live_dir = tempfile::tempdir().unwrap();
    let live = Arc::new(FakeKernel::bursty());
    let enforce = fake::test_policy(Mode::Enforce);
    run_for(&live, &enforce, live_dir.path(), 120).await;
    let live_ring = live.ring();
    let live_first = replay(&recording_dir(live_dir.path()), &enforce)
        .unwrap()
        .decisions
        .first()
        .map(|d| d.decision.id.clone())
        .unwrap();

    // The same workload observed, then replayed with the enforce policy.
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let observe = fake::test_policy(Mode::Observe);
    run_for(&k, &observe, dir.path(), 120).await;
    assert!(k.sets().is_empty());
    let r = replay(&recording_dir(dir.path()), &enforce).unwrap();
    assert_eq!(
        r.faithful_passes, 0,
        "another policy: nothing replayed as recorded"
    );
    let first = r.decisions.first().unwrap();
    assert_eq!(first.decision.id, live_first);
    assert_eq!(first.basis, Basis::Observed);
    assert!(matches!(first.decision.action, Action::SetRing { .. }));
    // Everything after the first change rests on the model, and says so.
    assert!(
        r.decisions
            .iter()
            .skip(1)
            .all(|d| d.basis == Basis::Modelled),
        "{:#?}",
        r.decisions
    );
    let dev = r.devices.get("eth0").unwrap();
    assert!(dev.modelled);
    let predicted = dev.final_ring.unwrap();
    let (lo, hi) = (live_ring / 2, live_ring.saturating_mul(2));
    assert!(
        (lo..=hi).contains(&predicted),
        "predicted ring {predicted}, live enforce reached {live_ring}"
    );
    // Against the observe policy: the difference is the enforced change.
    let o = replay(&recording_dir(dir.path()), &observe).unwrap();
    assert_eq!(o.faithful_passes, o.passes, "the recording's own policy");
    assert_eq!(o.identical_passes, o.passes);
    assert_eq!(o.devices.get("eth0").unwrap().final_ring, Some(256));
}

#[tokio::test(start_paused = true)]
async fn history_after_a_restart_shows_the_changes_from_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let p = fake::test_policy(Mode::Enforce);
    run_for(&k, &p, dir.path(), 60).await;
    let made = k.sets().len();
    assert!(made > 0);
    // A second run of the daemon on the same state directory.
    run_for(&k, &p, dir.path(), 20).await;
    let (rows, warnings) = journal::read(dir.path()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(rows.len() >= made, "{rows:#?}");
    let first = &rows[0].change;
    assert_eq!(first.device, "eth0");
    assert_eq!(first.from, 256);
    assert!(first.id.is_some() && first.evidence.is_some());
    assert_eq!(first.reason.as_deref(), Some("recycle_miss_high"));
    // The run it was made in is over: it is no longer pending.
    assert_ne!(first.outcome, policy::Outcome::Pending, "{rows:#?}");
}

/// A daemon stopping under `on_stop: restore` journals what it put back:
/// every change of the run reads as undone by the daemon's stop, not as
/// an effective change still in place.
#[tokio::test(start_paused = true)]
async fn a_restore_at_stop_is_journaled_as_undoing_the_changes() {
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let mut p = fake::test_policy(Mode::Enforce);
    p.on_stop = policy::OnStop::Restore;
    run_for(&k, &p, dir.path(), 60).await;
    assert!(!k.sets().is_empty());
    assert_eq!(k.ring(), 256, "restored at stop");
    let (rows, warnings) = journal::read(dir.path()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(!rows.is_empty());
    for r in &rows {
        let u = r.restored.as_ref().unwrap_or_else(|| panic!("{rows:#?}"));
        assert_eq!(u.by, journal::RestoredBy::DaemonStop);
        assert_eq!((u.device.as_str(), u.to), ("eth0", 256));
        assert!(u.unix_ms >= r.change.unix_ms);
    }
    // A run that keeps its changes journals no restore.
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    p.on_stop = policy::OnStop::Keep;
    run_for(&k, &p, dir.path(), 60).await;
    let (rows, _) = journal::read(dir.path()).unwrap();
    assert!(!rows.is_empty() && rows.iter().all(|r| r.restored.is_none()));
}

/// One non-UTF-8 byte in the journal made `history` fail whole; a
/// journal larger than the journal ever grows was read whole (1.5 GiB:
/// 3.15 GB). The bad line is skipped with a warning naming its file and
/// line, the rest is shown; the oversized file is refused from its length.
#[tokio::test(start_paused = true)]
async fn history_skips_a_non_utf8_line_and_refuses_an_oversized_journal() {
    let dir = tempfile::tempdir().unwrap();
    let k = Arc::new(FakeKernel::bursty());
    let p = fake::test_policy(Mode::Enforce);
    run_for(&k, &p, dir.path(), 60).await;
    let (clean, _) = journal::read(dir.path()).unwrap();
    assert!(!clean.is_empty());
    let path = dir.path().join(journal::FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let first_line_end = bytes.iter().position(|&b| b == b'\n').unwrap();
    bytes.splice(first_line_end..first_line_end, *b"\n{\"type\":\"run\xff\"}");
    std::fs::write(&path, &bytes).unwrap();
    let (rows, warnings) = journal::read(dir.path()).unwrap();
    assert_eq!(rows.len(), clean.len(), "{warnings:?}");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!("{}: line 2 skipped: not UTF-8", path.display())),
        "{warnings:?}"
    );
    let f = std::fs::File::create(dir.path().join("changes.jsonl.1")).unwrap();
    f.set_len(3 << 29).unwrap();
    let e = journal::read(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("changes.jsonl.1") && e.contains("bytes, more than"),
        "{e}"
    );
}

/// `pptune record` over the fake kernel: returns the recording's path.
async fn record_fake(dir: &Path, p: &Policy, secs: u64) -> (std::path::PathBuf, Recorded) {
    let out = dir.join("r.pptrec");
    let k = FakeKernel::bursty();
    let done = record_with(&k, p, Some(Duration::from_secs(secs)), &out, false)
        .await
        .unwrap();
    (out, done)
}

/// `record --duration 25s` at a 10 s interval ended at 20 s: the deadline
/// was checked an interval early. The last pass is now taken at the
/// deadline, and the recording spans the requested time to the millisecond.
#[tokio::test(start_paused = true)]
async fn record_stops_at_the_requested_duration_not_an_interval_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = fake::test_policy(Mode::Observe);
    p.timing.interval = Duration::from_secs(10);
    let start = tokio::time::Instant::now();
    let (out, done) = record_fake(dir.path(), &p, 25).await;
    assert_eq!(start.elapsed(), Duration::from_secs(25));
    assert_eq!(done.elapsed, Duration::from_secs(25));
    assert_eq!(done.passes, 4, "passes at 0, 10, 20 and 25 s");
    assert_eq!(done.bytes, std::fs::metadata(&out).unwrap().len());
    let r = replay(&out, &p).unwrap();
    assert_eq!(r.passes, 4);
    assert_eq!(
        r.last_unix_ms.unwrap() - r.first_unix_ms.unwrap(),
        25_000,
        "the recording spans the requested duration"
    );
}

/// The per-pass series, and `--since`/`--until`/`-i` applied alike to the
/// series and the totals.
#[tokio::test(start_paused = true)]
async fn the_series_has_a_row_per_pass_and_the_filters_select_series_and_totals_alike() {
    let dir = tempfile::tempdir().unwrap();
    let observe = fake::test_policy(Mode::Observe);
    let enforce = fake::test_policy(Mode::Enforce);
    let (out, done) = record_fake(dir.path(), &observe, 120).await;
    let all = Selection {
        series: true,
        ..Selection::default()
    };
    let a = replay_selected(&out, &observe, &all).unwrap();
    let b = replay_selected(&out, &enforce, &all).unwrap();
    assert_eq!(a.passes, done.passes);
    assert_eq!(a.series.len() as u64, a.passes, "one device, a row a pass");
    // The ring B's replay grows is in its series, where its changes are.
    let changes: Vec<&Point> = b.series.iter().filter(|p| p.action.is_some()).collect();
    assert_eq!(changes.len(), b.decisions.len());
    assert!(!changes.is_empty());
    assert!(b.series.last().unwrap().ring_rx > a.series.last().unwrap().ring_rx);
    assert!(
        a.series
            .iter()
            .skip(1)
            .any(|p| p.recycle_miss_share > Some(0.0))
    );

    let mut csv = Vec::new();
    series::write(&mut csv, SeriesFormat::Csv, &a, Some(&b)).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(head[..3], ["time", "unix_ms", "interface"]);
    assert!(head.contains(&"recycle_miss_share") && head.contains(&"b_ring_rx"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), a.series.len());
    assert!(rows.iter().all(|r| r.len() == head.len() && r[2] == "eth0"));
    let first = &rows[0];
    assert!(
        first[0].ends_with('Z') && first[0].contains('T'),
        "{first:?}"
    );
    let mut jsonl = Vec::new();
    series::write(&mut jsonl, SeriesFormat::Jsonl, &a, Some(&b)).unwrap();
    let last: serde_json::Value =
        serde_json::from_str(String::from_utf8(jsonl).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(last["interface"], "eth0");
    assert_eq!(
        last["b"]["ring_rx"],
        b.series.last().unwrap().ring_rx.unwrap()
    );

    // A window: the summary, the decisions and the series cover it only.
    let t0 = a.first_unix_ms.unwrap();
    let window = Selection {
        since_ms: Some(t0 + 30_000),
        until_ms: Some(t0 + 60_000),
        interfaces: vec!["eth0".into()],
        series: true,
    };
    let w = replay_selected(&out, &enforce, &window).unwrap();
    assert_eq!(w.passes, 31, "30 s to 60 s inclusive at 1 s");
    assert_eq!(w.series.len(), 31);
    assert_eq!(w.first_unix_ms, Some(t0 + 30_000));
    assert_eq!(w.last_unix_ms, Some(t0 + 60_000));
    assert!(
        w.decisions
            .iter()
            .all(|d| (t0 + 30_000..=t0 + 60_000).contains(&d.unix_ms))
    );
    // The engine ran over what came before: the window's points are B's.
    let same: Vec<&Point> = b
        .series
        .iter()
        .filter(|p| (t0 + 30_000..=t0 + 60_000).contains(&p.unix_ms))
        .collect();
    assert!(
        w.series
            .iter()
            .zip(&same)
            .all(|(x, y)| x.ring_rx == y.ring_rx)
    );
    assert_eq!(
        w.devices["eth0"].changes as usize,
        same.iter().filter(|p| p.action.is_some()).count()
    );
    let other = Selection {
        interfaces: vec!["eth9".into()],
        series: true,
        ..Selection::default()
    };
    let none = replay_selected(&out, &enforce, &other).unwrap();
    assert!(none.devices.is_empty() && none.series.is_empty() && none.decisions.is_empty());

    // The command says so when the filters leave nothing.
    let f = out.to_str().unwrap();
    let refused = |args: ReplayArgs| {
        let err = replay_cmd(&out, &observe, None, &args, &args.selection().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(f), "{err}");
        err
    };
    let err = refused(ReplayArgs {
        interfaces: vec!["eth9".into()],
        ..ReplayArgs::default()
    });
    assert!(err.contains("no device named eth9"), "{err}");
    let err = refused(ReplayArgs {
        since: Some("2999-01-01T00:00:00Z".into()),
        ..ReplayArgs::default()
    });
    assert!(
        err.contains(&format!(
            "none of the {} pass(es) read is at or after 2999-01-01",
            done.passes
        )),
        "{err}"
    );

    // A policy that decides on no device: no series to print or plot, and
    // no plot file left behind.
    let mut none_selected = observe.clone();
    none_selected.selectors[0].names = vec!["eth9".into()];
    let svg = dir.path().join("none.svg");
    for (series, plot, what) in [
        (Some(SeriesFormat::Csv), None, "print"),
        (None, Some(svg.clone()), "plot"),
    ] {
        let args = ReplayArgs {
            series,
            plot,
            ..ReplayArgs::default()
        };
        let err = replay_cmd(
            &out,
            &none_selected,
            None,
            &args,
            &args.selection().unwrap(),
        )
        .unwrap_err()
        .to_string();
        let want = format!(
            "decides on no device in the {} pass(es) selected: no series to {what}",
            done.passes
        );
        assert!(err.contains(&want), "{err}");
    }
    assert!(!svg.exists());
}

/// Pixels of `colour` (within a small distance, for anti-aliasing) inside
/// `area` of the rendered image, and the rows they are on.
fn pixels_of(pix: &resvg::tiny_skia::Pixmap, colour: plot::RGBColor, area: Area) -> (usize, usize) {
    let plot::RGBColor(r, g, b) = colour;
    let mut count = 0;
    let mut rows = std::collections::BTreeSet::new();
    for y in area.y0..area.y1 {
        for x in area.x0..area.x1 {
            let c = pix.pixel(x, y).unwrap().demultiply();
            let d = u16::from(c.red().abs_diff(r))
                + u16::from(c.green().abs_diff(g))
                + u16::from(c.blue().abs_diff(b));
            if d < 30 {
                count += 1;
                rows.insert(y);
            }
        }
    }
    (count, rows.len())
}

/// `replay --plot` output checked as an image. The SVG the command writes is rendered (resvg) and has the size
/// of one device panel, and each of the four series (ring and miss share,
/// A and B) is drawn inside the plot area; B's ring, which the enforce
/// policy grows, climbs over several rows.
#[tokio::test(start_paused = true)]
async fn replay_plot_renders_every_series_of_both_policies_inside_the_plot_area() {
    let dir = tempfile::tempdir().unwrap();
    let observe = fake::test_policy(Mode::Observe);
    let enforce = fake::test_policy(Mode::Enforce);
    let (out, _) = record_fake(dir.path(), &observe, 300).await;
    let svg_path = dir.path().join("week.svg");
    let args = ReplayArgs {
        plot: Some(svg_path.clone()),
        ..ReplayArgs::default()
    };
    let code = replay_cmd(
        &out,
        &observe,
        Some(&enforce),
        &args,
        &args.selection().unwrap(),
    )
    .unwrap();
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    let data = std::fs::read(&svg_path).unwrap();
    let tree = resvg::usvg::Tree::from_data(&data, &resvg::usvg::Options::default()).unwrap();
    let layout = plot::Layout { devices: 1 };
    let (w, h) = layout.size();
    let size = tree.size().to_int_size();
    assert_eq!((size.width(), size.height()), (w, h));
    let mut pix = resvg::tiny_skia::Pixmap::new(w, h).unwrap();
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pix.as_mut(),
    );
    let area = layout.area(0);
    for (colour, what) in [
        (plot::RING_A, "ring A"),
        (plot::MISS_A, "miss share A"),
        (plot::RING_B, "ring B"),
        (plot::MISS_B, "miss share B"),
    ] {
        let (n, _) = pixels_of(&pix, colour, area);
        assert!(n >= 50, "{what}: {n} pixels of {colour:?} in the plot area");
    }
    let (_, rows) = pixels_of(&pix, plot::RING_B, area);
    assert!(rows >= 10, "ring B is flat: {rows} rows");
    // Outside any plot area (the title bar) no series is drawn.
    let title = Area {
        x0: 0,
        y0: 0,
        x1: w,
        y1: 30,
    };
    assert_eq!(pixels_of(&pix, plot::RING_B, title).0, 0);
}
