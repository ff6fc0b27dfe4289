//! Every number written comes back exactly: delta coding, layout changes,
//! the writer's memory of devices.

use super::*;

#[test]
fn delta_coding_round_trips_exactly() {
    let mut w = Coder::writer();
    let mut r = Coder::for_counters(&Coder::counter_names());
    // One buffer for every pass, as replay reuses it: whatever it held is
    // overwritten.
    let mut out = Snapshot::default();
    for i in 0..6 {
        let s = snap(i, 8 + i % 2);
        let enc = w.encode(&s);
        assert_eq!(enc.caps.is_some(), i == 0);
        r.decode_into(&enc, &enc.block, &mut out).unwrap();
        assert_eq!(out, s);
    }
}

/// The writer kept every device's facts until its segment rotated: a host
/// whose devices come and go grew by each one it ever had (RSS 37 -> 62
/// MB over 28,000 lifetimes). Now it holds those of the devices in the
/// pass; the variant: a device that comes back under its ifindex after
/// being gone decodes with its facts (written again).
#[test]
fn the_writer_remembers_only_the_devices_that_exist() {
    let mut w = Coder::writer();
    let mut r = Coder::for_counters(&Coder::counter_names());
    let mut out = Snapshot::default();
    for i in 0..5_000_u32 {
        let mut s = snap(u64::from(i), 1);
        // A new device each pass, and eth0 (ifindex 2) every 7th.
        let d = &mut s.devices[0];
        if i % 7 != 0 {
            d.ifindex = 1_000 + i;
            d.name = format!("veth{i}");
        }
        let enc = w.encode(&s);
        r.decode_into(&enc, &enc.block, &mut out).unwrap();
        assert_eq!(out, s, "pass {i}");
        assert!(
            w.devices_remembered() <= 1,
            "pass {i}: {}",
            w.devices_remembered()
        );
    }
}

/// Pools and queues that come and go, gauges that fall, counters that
/// wrap or reset, options that appear: the layout changes and every number
/// still comes back exactly, into a reused buffer.
#[test]
fn layout_changes_and_odd_numbers_round_trip() {
    let mut w = Coder::writer();
    let mut r = Coder::for_counters(&Coder::counter_names());
    let mut out = snap(99, 3);
    let mut sizes = Vec::new();
    let sizes_q = [4, 4, 6, 2, 2, 5, 5, 5, 1, 4, 4, 4];
    for (i, q) in (0_u64..).zip(sizes_q) {
        let mut s = snap(i, q);
        let d = &mut s.devices[0];
        if i == 1 {
            d.rx_queues.reverse();
        }
        if i == 4 {
            // A counter reset and a wrap.
            let st = d.rx_queues[0].pools[0].stats.as_mut().unwrap();
            st.alloc_fast = 0;
            st.recycle_ring = u64::MAX - 3;
        }
        if i >= 6 {
            d.qstats = Some(policy::snapshot::QueueStats {
                rx_packets: Some(100 * i),
                rx_hw_drops: Some(u64::MAX - i),
                ..Default::default()
            });
            d.link_stats = Some(policy::snapshot::LinkStats {
                rx_packets: 7 * i,
                ..Default::default()
            });
            d.rx_queues[0].provider = Some(policy::snapshot::MemoryProvider::IoUring {
                rx_buf_len: Some(4096),
            });
            d.rx_queues[0].pools[0].stats = None;
            d.rx_queues[0].pools[0].inflight = Some(3);
            s.orphan_pools.push(Pool {
                id: 900,
                detach_time: Some(123),
                inflight: Some(i),
                provider: Some(policy::snapshot::MemoryProvider::Dmabuf { id: 7 }),
                ..Pool::default()
            });
        }
        if i == 9 {
            d.unmapped_pools = d.rx_queues.pop().unwrap().pools;
        }
        let enc = w.encode(&s);
        sizes.push(enc.block.len());
        r.decode_into(&enc, &enc.block, &mut out).unwrap();
        assert_eq!(out, s, "pass {i}");
    }
    // A steady pass writes no layout: pass 7 has pass 6's.
    assert!(sizes[7] < sizes[6], "{sizes:?}");
}
