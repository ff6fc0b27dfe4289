//! The recorder's memory over device churn: a measurement, run by hand.

use super::*;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// The daemon's recorder (64 MiB cap) over 30,000 device lifetimes: each
/// pass a host of 16 devices with 4 pools each, one of them replaced by a
/// new device (a new ifindex and name) every pass. Prints RSS after a
/// warm-up of 1,000 passes and at the end (RELIABILITY.md, class 6):
/// `cargo test --release -p pptune-record device_churn -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement (about a minute in release): run with --ignored"]
#[allow(clippy::cast_precision_loss)]
fn device_churn_keeps_the_recorders_memory_flat() {
    // RSS is the whole process's, and the other tests of this binary run
    // beside this one (CI: 61 -> 94 MiB while they did; alone, +0.0 %):
    // the measurement runs in a process of its own, this test's binary
    // asked for this test alone.
    if std::env::var_os("PPTUNE_RSS_ALONE").is_none() {
        let name = "tests::memory::device_churn_keeps_the_recorders_memory_flat";
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                name,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PPTUNE_RSS_ALONE", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        println!("{text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "the measurement failed");
        assert!(text.contains("1 passed"), "the measurement did not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = config::parse_str("p", "{}").unwrap();
    let mut rec = Recorder::rolling(dir.path(), 64 << 20, &policy, "test").unwrap();
    let template = snap(0, 4).devices.remove(0);
    let mut start = 0;
    for i in 0..31_000_u64 {
        let mut s = snap(i, 4);
        s.devices = (0..16_u32)
            .map(|k| {
                let mut d = template.clone();
                // Device 15 is a new one every pass.
                let n = if k == 15 {
                    1_000 + u32::try_from(i).unwrap()
                } else {
                    k + 2
                };
                d.ifindex = n;
                d.name = format!("dev{n}");
                d.id.parent = Some(format!("0000:{n:08x}.0"));
                d
            })
            .collect();
        rec.write(|| None, None, &s, pass_rec(i)).unwrap();
        if i == 1_000 {
            start = rss_kib();
        }
    }
    let end = rss_kib();
    println!(
        "MEASURE recorder, 30,000 device lifetimes after a 1,000-pass warm-up: RSS {start} -> {end} KiB ({:+.1} %)",
        (end as f64 - start as f64) * 100.0 / start as f64
    );
    assert!(end * 10 <= start * 11, "{start} -> {end} KiB");
}
