#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The recording crate's tests, by subject; here the fixtures they share.

use std::io::Write as _;
use std::time::Duration;

use policy::snapshot::{
    Availability, Capabilities, Device, DeviceId, Pool, PoolStats, Rings, RxQueue, Snapshot,
};

use super::coder::Coder;
use super::format::Pass;
use super::*;

mod damage;
mod formats;
mod full_disk;
mod memory;
mod round_trip;
mod segments;

/// The embedded default policy, the one these tests record under.
fn default_policy() -> policy::Policy {
    config::parse_str("default", config::DEFAULT_POLICY_YAML).unwrap()
}

/// A rolling recorder in `dir` capped at `cap` bytes that does not sync
/// (the tests write thousands of passes).
fn rolling(dir: &Path, cap: u64, policy: &policy::Policy) -> Recorder {
    let mut rec = Recorder::rolling(dir, cap, policy, "test").unwrap();
    rec.sync = false;
    rec
}

/// Deterministic noise: counters that move by varied amounts, as real
/// ones do (a recording of constant steps compresses to nothing).
fn noise(pass: u64, q: u64) -> u64 {
    (pass.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ q.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)) >> 48
}

/// eth0's identity in these tests: a PCI function.
fn pci_id() -> DeviceId {
    DeviceId {
        bus: Some("pci".into()),
        parent: Some("0000:3b:00.0".into()),
        perm_addr: None,
        name_fallback: None,
    }
}

fn snap(pass: u64, pools: u64) -> Snapshot {
    let queue = |q: u64| RxQueue {
        id: u32::try_from(q).unwrap(),
        napi_id: Some(u32::try_from(100 + q).unwrap()),
        provider: None,
        qstats: None,
        pools: vec![Pool {
            id: q + 1,
            ifindex: Some(2),
            napi_id: Some(100 + q),
            inflight: Some(512 + pass),
            inflight_mem: Some((512 + pass) * 4096),
            detach_time: None,
            provider: None,
            stats: Some(PoolStats {
                alloc_fast: 100_000 * pass + q + noise(pass, q),
                recycle_ring: 90_000 * pass + noise(pass, q + 1),
                recycle_ring_full: 7 * pass * (q % 3) + noise(pass, q + 2),
                ..PoolStats::default()
            }),
        }],
    };
    Snapshot {
        taken_at_ms: pass * 10_000,
        capabilities: Capabilities {
            kernel_release: "7.3.0".into(),
            page_pool_stats: true,
            ..Capabilities::default()
        },
        devices: vec![Device {
            ifindex: 2,
            name: "eth0".into(),
            id: pci_id(),
            rings: Availability::Available(Rings {
                rx: Some(if pass < 3 { 256 } else { 1024 }),
                rx_max: Some(8192),
                ..Rings::default()
            }),
            rx_queues: (0..pools).map(queue).collect(),
            ..Device::default()
        }],
        orphan_pools: Vec::new(),
    }
}

fn pass_rec(i: u64) -> impl FnOnce(format::SnapRec) -> Pass {
    move |snapshot| Pass {
        unix_ms: i,
        now_ns: i * 1_000_000_000,
        elapsed_ns: 1_000_000_000,
        local_time: Some((1, 600)),
        snapshot,
        inputs: format::Inputs::default(),
        decisions: Vec::new(),
        changes: Vec::new(),
    }
}

fn passes(r: &mut Recording) -> Vec<Snapshot> {
    let mut v = Vec::new();
    while let Some(it) = r.next_item() {
        if let Item::Pass { snapshot, .. } = it {
            v.push(snapshot);
        }
    }
    v
}

/// A segment of `frames` (each `[len][crc][payload]`) after the header.
fn segment_with(frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let mut b = file::MAGIC.to_vec();
    b.extend_from_slice(&format::FORMAT_VERSION.to_le_bytes());
    for (len, crc, payload) in frames {
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(payload);
    }
    b
}

fn write_pass(rec: &mut Recorder, i: u64) -> Result<(), RecordError> {
    let s = snap(i, 16);
    rec.write(
        || Some(policy::engine::EngineState::default()),
        None,
        &s,
        pass_rec(i),
    )
}

fn bytes_on_disk(dir: &Path) -> u64 {
    file::segments(dir)
        .unwrap()
        .iter()
        .map(|(_, p)| std::fs::metadata(p).unwrap().len())
        .sum()
}
