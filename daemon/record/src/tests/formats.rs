//! The formats this build reads: a device's rings and channels by field
//! name (format 3) and by position (format 2, from a segment the format-2
//! writer made).

use policy::fixtures::every_field;
use policy::snapshot::Channels;

use super::*;
use crate::format::{ChannelsRec, FORMAT2_CHANNELS, FORMAT2_RINGS, RingsRec, channels, rings};

/// A segment written by the format-2 writer (`Recorder::single`, pptune
/// 0.1.0 before rings and channels were recorded by name): two passes of
/// [`format2_snapshot`], `rx` 1 then 12.
const FORMAT2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/tests/format2.pptrec");

/// What [`FORMAT2`] holds: eth0 with every ring field its own number (in
/// format 2's order from 1, `tcp_data_split` 2) and the channels from 21;
/// eth1 with no rings to report and channels not sampled. Written out
/// field by field, not from [`FORMAT2_RINGS`], which the reader uses; a
/// field added to a block since format 2 reads as not reported.
#[allow(clippy::needless_update)]
fn format2_snapshot(rx: u32) -> Snapshot {
    let eth0 = Device {
        ifindex: 2,
        name: "eth0".into(),
        id: pci_id(),
        rings: Availability::Available(Rings {
            rx: Some(rx),
            rx_max: Some(2),
            rx_mini: Some(3),
            rx_mini_max: Some(4),
            rx_jumbo: Some(5),
            rx_jumbo_max: Some(6),
            tx: Some(7),
            tx_max: Some(8),
            rx_buf_len: Some(9),
            tcp_data_split: Some(2),
            hds_thresh: Some(10),
            hds_thresh_max: Some(11),
            ..Rings::default()
        }),
        channels: Availability::Available(Channels {
            rx: Some(21),
            rx_max: Some(22),
            tx: Some(23),
            tx_max: Some(24),
            other: Some(25),
            other_max: Some(26),
            combined: Some(27),
            combined_max: Some(28),
            ..Channels::default()
        }),
        ..Device::default()
    };
    let eth1 = Device {
        ifindex: 3,
        name: "eth1".into(),
        rings: Availability::Unavailable("no ethtool".into()),
        channels: Availability::NotSampled,
        ..Device::default()
    };
    Snapshot {
        taken_at_ms: u64::from(rx),
        devices: vec![eth0, eth1],
        ..Snapshot::default()
    }
}

#[test]
fn a_format_2_recording_reads_every_ring_and_channel_field() {
    let mut r = Recording::open(Path::new(FORMAT2)).unwrap();
    assert_eq!(passes(&mut r), [format2_snapshot(1), format2_snapshot(12)]);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// Format 2's positions are read by name: a field renamed since would
/// silently read as unreported in every format-2 recording.
#[test]
fn format_2_names_are_fields_of_today() {
    for n in FORMAT2_RINGS.iter().chain(&["tcp_data_split"]) {
        assert!(Rings::FIELDS.iter().any(|f| f.name == *n), "rings.{n}");
    }
    for n in FORMAT2_CHANNELS {
        assert!(Channels::FIELDS.iter().any(|f| f.name == n), "channels.{n}");
    }
}

/// Every field of a block is written under its name and read back; a
/// name this build does not know is skipped, one the record lacks is not
/// reported.
#[test]
fn blocks_are_recorded_by_field_name() {
    let r: Rings = every_field(Rings::FIELDS, 1);
    let c: Channels = every_field(Channels::FIELDS, 100);
    let meta = format::dev_meta(&Device {
        rings: Availability::Available(r),
        channels: Availability::Available(c),
        ..Device::default()
    });
    let (Ok(RingsRec::ByName(rn)), Ok(ChannelsRec::ByName(cn))) = (&meta.rings, &meta.channels)
    else {
        panic!("not written by name: {meta:?}");
    };
    assert_eq!(rn.len(), Rings::FIELDS.len());
    assert_eq!(cn.len(), Channels::FIELDS.len());
    assert_eq!(
        rn.get("tcp_data_split"),
        r.tcp_data_split.map(u32::from).as_ref()
    );
    assert_eq!(rings(&RingsRec::ByName(rn.clone())), r);
    assert_eq!(channels(&ChannelsRec::ByName(cn.clone())), c);

    // Through CBOR, as a recording holds it.
    let mut bytes = Vec::new();
    ciborium::into_writer(&meta, &mut bytes).unwrap();
    let back: format::DevMeta = ciborium::from_reader(bytes.as_slice()).unwrap();
    assert_eq!(back, meta);

    let mut future = rn.clone();
    future.insert("rx_ring_future".into(), 7);
    future.remove("tx");
    let read = rings(&RingsRec::ByName(future));
    assert_eq!(read, Rings { tx: None, ..r });
}
