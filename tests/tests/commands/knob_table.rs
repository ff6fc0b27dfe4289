//! Every row of the knob table (`policy::knobs`) reaches everything that
//! shows a device's knobs: `pptune status`'s text, the ring and channel
//! gauges of `/metrics` (and their label values on docs/metrics.md) and a
//! recording read back. A knob added to the table whose field one of them
//! does not show fails here, naming it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use policy::accounting::PassDeltas;
use policy::fixtures::every_field;
use policy::knobs::{self, Block, KnobDesc};
use policy::snapshot::{Availability, Channels, Device, Rings, Snapshot};
use pptune::record::format::{Inputs, Pass};
use pptune::record::{Item, Recorder, Recording};

/// One device whose every ring and channel field holds a number of its
/// own (rings from 101, channels from 201), so a number seen is its
/// field's.
fn snapshot() -> Snapshot {
    Snapshot {
        devices: vec![Device {
            ifindex: 2,
            name: "eth0".into(),
            rings: Availability::Available(every_field(Rings::FIELDS, 101)),
            channels: Availability::Available(every_field(Channels::FIELDS, 201)),
            ..Device::default()
        }],
        ..Snapshot::default()
    }
}

/// The knob's value and maximum in `snap`: both must be there for the
/// checks below to mean something.
fn pair(k: &KnobDesc, snap: &Snapshot) -> (u32, u32) {
    match k.read(&snap.devices[0]) {
        (Some(v), Some(m)) => (v, m),
        other => panic!("{}: the row reads {other:?} from a full block", k.name),
    }
}

/// The knob's name within its block (`ring.rx-mini` → `rx-mini`).
fn short(k: &KnobDesc) -> &'static str {
    k.name.split_once('.').map_or(k.name, |(_, s)| s)
}

#[test]
fn status_shows_every_knob_of_the_table() {
    let snap = snapshot();
    let text = pptune::cmd::status::Report::build(&snap, None, Vec::new()).render_text();
    for k in knobs::all() {
        let (v, m) = pair(k, &snap);
        let line = match k.block {
            Block::Rings => "  rings: ",
            Block::Channels => "  channels: ",
        };
        let want = format!("{} {v}/{m}", short(k));
        assert!(
            text.lines()
                .any(|l| l.starts_with(line) && l.contains(&want)),
            "{}: `pptune status` (daemon/src/cmd/status/render.rs) shows no `{want}` \
             on its{line}line:\n{text}",
            k.name
        );
    }
}

#[test]
fn metrics_export_every_knob_of_the_table() {
    let snap = snapshot();
    let m = pptune::publish::metrics::Metrics::new();
    m.observe(&snap, &PassDeltas::of(None, &snap));
    let text = m.encode().expect("encode");
    let docs = std::fs::read_to_string(pptune_tests::repo_root().join("docs/metrics.md"))
        .expect("docs/metrics.md");
    for k in knobs::all() {
        let (v, max) = pair(k, &snap);
        let (value, maximum, label) = match k.block {
            Block::Rings => ("pptune_ring_entries", "pptune_ring_max_entries", "ring"),
            Block::Channels => ("pptune_channels", "pptune_channels_max", "channel"),
        };
        let label_value = short(k).replace('-', "_");
        let labels = format!("{{device=\"eth0\",{label}=\"{label_value}\"}}");
        for want in [
            format!("{value}{labels} {v}"),
            format!("{maximum}{labels} {max}"),
        ] {
            assert!(
                text.lines().any(|l| l == want),
                "{}: /metrics (daemon/src/publish/metrics.rs, series.rs) has no `{want}`:\n{text}",
                k.name
            );
        }
        // The page lists the label's values on the family's row.
        let row = docs
            .lines()
            .find(|l| l.starts_with(&format!("| `{value}` |")))
            .unwrap_or_else(|| panic!("docs/metrics.md has no row for {value}"));
        assert!(
            row.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == label_value),
            "{}: docs/metrics.md's {value} row does not list {label}={label_value}: {row}",
            k.name
        );
    }
}

#[test]
fn a_recording_gives_back_every_knob_of_the_table() {
    let snap = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("knobs.pptrec");
    let mut rec = Recorder::single(&path, "test");
    rec.write(
        || None,
        None,
        &snap,
        |snapshot| Pass {
            unix_ms: 0,
            now_ns: 0,
            elapsed_ns: 0,
            local_time: None,
            snapshot,
            inputs: Inputs::default(),
            decisions: Vec::new(),
            changes: Vec::new(),
        },
    )
    .unwrap();
    drop(rec);
    let mut reading = Recording::open(&path).unwrap();
    let back = std::iter::from_fn(|| reading.next_item())
        .find_map(|i| match i {
            Item::Pass { snapshot, .. } => Some(snapshot),
            Item::Start { .. } => None,
        })
        .expect("the pass");
    for k in knobs::all() {
        assert_eq!(
            k.read(&back.devices[0]),
            k.read(&snap.devices[0]),
            "{}: the recording (daemon/record/src/format.rs) gives back another value",
            k.name
        );
    }
    assert_eq!(
        back, snap,
        "every ring and channel field, not only the knobs'"
    );
}
