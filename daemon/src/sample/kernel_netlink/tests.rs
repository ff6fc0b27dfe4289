//! The netlink kernel against a real kernel: veth devices in a throwaway
//! network namespace (root), sampled and set through netlink.

use super::*;
use netlink::netdev::QueueType;
use netlink::netdev::{PagePool, PagePoolStats, Queue};
use netlink::netns::TempNetns;
use policy::snapshot::{Pool, QueueStats, RxQueue};

fn veth_netns(tag: &str) -> TempNetns {
    assert!(
        netlink::netns::is_root(),
        "{tag}: needs root to create a network namespace"
    );
    TempNetns::with_veth(tag, 4).unwrap()
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../netlink/tests/fixtures/");

/// A recorded exchange (request and replies) from the codec fixtures.
fn exchange(name: &str) -> netlink::socket::Exchange {
    let req = std::fs::read(format!("{FIXTURES}{name}.req.bin")).unwrap();
    let bytes = std::fs::read(format!("{FIXTURES}{name}.bin")).unwrap();
    netlink::socket::Exchange::from_reply_bytes(req, &bytes).unwrap()
}

// The recorded dumps, every entry, through the client's own decoders.
fn fixture_pools(name: &str) -> Vec<PagePool> {
    netlink::client::decode_page_pools(&exchange(name)).unwrap()
}

fn fixture_stats(name: &str) -> Vec<PagePoolStats> {
    netlink::client::decode_page_pool_stats(&exchange(name)).unwrap()
}

fn fixture_queues(name: &str) -> Vec<Queue> {
    netlink::client::decode_queues_where(&exchange(name), None, |_| true).unwrap()
}

fn fixture_qstats(name: &str) -> Vec<Qstats> {
    netlink::client::decode_qstats_where(&exchange(name), None, |_| true).unwrap()
}

/// The page_pool counter list is written twice: each counter's attribute
/// id in the netlink decoder, everything else in the policy table.
/// `convert::pool_stats` reads every counter of the table from the decoder
/// (one the decoder lacks does not compile); one the decoder has and the
/// table lacks, or another order, fails here.
#[test]
fn the_decoder_and_the_policy_table_list_the_same_counters() {
    let decoded = netlink::netdev::PoolCounters::default()
        .named()
        .map(|(name, _)| name);
    assert_eq!(decoded.as_slice(), policy::counters::NAMES.as_slice());
}

/// The join on real Linux 7.3 replies (netdevsim, VM testbed): four
/// live pools onto four RX queues by NAPI id, the detached pool (no
/// NAPI id any more) to the device bucket with its stats.
#[test]
fn join_real_netdevsim_dumps() {
    let pools = fixture_pools("vm-7.3-nsim-netdev-page-pool-get-dump");
    let stats = fixture_stats("vm-7.3-nsim-netdev-page-pool-stats-get-dump");
    let queues = fixture_queues("vm-7.3-nsim-netdev-queue-get-dump");
    let dev_q = fixture_qstats("vm-7.3-nsim-netdev-qstats-get-dev-dump");
    let queue_q = fixture_qstats("vm-7.3-nsim-netdev-qstats-get-queue-dump");
    let mut devices = vec![Device {
        ifindex: 3,
        name: "eth0".to_owned(),
        ..Device::default()
    }];
    let dumps = Dumps {
        pools: &pools,
        stats: &stats,
        queues: &queues,
        dev_qstats: &dev_q,
        queue_qstats: &queue_q,
    };
    let orphans = join(&mut devices, &dumps);
    assert!(orphans.is_empty());
    let d = &devices[0];
    assert_eq!(d.rx_queues.len(), 4);
    for q in &d.rx_queues {
        assert_eq!(q.pools.len(), 1, "queue {}", q.id);
        assert_eq!(q.pools.capacity(), 1, "queue {}: no idle pool slots", q.id);
        assert_eq!(q.pools[0].napi_id, q.napi_id.map(u64::from));
        assert!(q.pools[0].stats.is_some());
        assert_eq!(q.qstats.and_then(|s| s.rx_packets), Some(0));
        assert_eq!(q.qstats.and_then(|s| s.rx_alloc_fail), None);
    }
    assert_eq!(d.unmapped_pools.len(), 1);
    let z = &d.unmapped_pools[0];
    assert!(z.detach_time.is_some());
    assert_eq!(z.stats.map(|s| (s.alloc_slow, s.alloc_empty)), Some((1, 1)));
    assert!(d.qstats.is_some());
    assert_eq!(d.pools().count(), 5);

    // The orphaned pool from the later dump: no ifindex, own bucket.
    let orphan = fixture_pools("vm-7.3-nsim-orphan-netdev-page-pool-get-dump");
    let o = join(
        &mut devices,
        &Dumps {
            pools: &orphan,
            ..dumps
        },
    );
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].ifindex, None);
    assert_eq!(devices[0].pools().count(), 0);
}

/// The join finds stats, qstats and a pool's queue wherever the dumps
/// list them. Built from the real 7.3 dumps (four queues, five pools):
/// the stats and qstats dumps reversed or rotated (the walk's guess
/// misses and the index is built, at the first lookup or midway), and
/// the pools reversed (the NAPI lookup walks the other way), join to
/// the same device as the kernel's order.
#[test]
fn join_does_not_depend_on_dump_order() {
    let pools = fixture_pools("vm-7.3-nsim-netdev-page-pool-get-dump");
    let stats = fixture_stats("vm-7.3-nsim-netdev-page-pool-stats-get-dump");
    let queues = fixture_queues("vm-7.3-nsim-netdev-queue-get-dump");
    let queue_q = fixture_qstats("vm-7.3-nsim-netdev-qstats-get-queue-dump");
    let joined = |pools: &[PagePool], stats: &[PagePoolStats], queue_q: &[Qstats]| {
        let mut devices = vec![Device {
            ifindex: 3,
            name: "eth0".to_owned(),
            ..Device::default()
        }];
        let dumps = Dumps {
            pools,
            stats,
            queues: &queues,
            dev_qstats: &[],
            queue_qstats: queue_q,
        };
        assert!(join(&mut devices, &dumps).is_empty());
        devices
    };
    let kernel = joined(&pools, &stats, &queue_q);
    let d = &kernel[0];
    assert_eq!(d.rx_queues.len(), 4);
    assert!(
        d.rx_queues
            .iter()
            .all(|q| q.qstats.is_some() && q.pools.len() == 1)
    );
    assert!(d.pools().all(|p| p.stats.is_some()));
    fn reversed<T: Clone>(v: &[T]) -> Vec<T> {
        v.iter().rev().cloned().collect()
    }
    fn rotated<T: Clone>(v: &[T], by: usize) -> Vec<T> {
        let mut v = v.to_vec();
        v.rotate_left(by);
        v
    }
    for by in 0..stats.len() {
        assert_eq!(
            joined(&pools, &rotated(&stats, by), &queue_q),
            kernel,
            "stats rotated {by}"
        );
    }
    for by in 0..queue_q.len() {
        assert_eq!(
            joined(&pools, &stats, &rotated(&queue_q, by)),
            kernel,
            "qstats rotated {by}"
        );
    }
    assert_eq!(
        joined(&reversed(&pools), &reversed(&stats), &reversed(&queue_q)),
        kernel
    );
}

/// Hand-made from the real queue dump: two RX queues sharing one NAPI
/// (drivers that pair queues on a vector): the pool goes to the lower
/// queue; a pool whose NAPI no queue reports goes to the device bucket.
#[test]
fn handmade_shared_napi_and_unknown_napi() {
    let mut queues = fixture_queues("vm-7.3-nsim-netdev-queue-get-dump");
    for q in &mut queues {
        if q.queue_type == Some(QueueType::Rx) {
            q.napi_id = Some(100);
        }
    }
    let pool = |id, napi| PagePool {
        id: Some(id),
        ifindex: Some(3),
        napi_id: Some(napi),
        ..PagePool::default()
    };
    let pools = vec![pool(1, 100), pool(2, 555)];
    let mut devices = vec![Device {
        ifindex: 3,
        ..Device::default()
    }];
    join(
        &mut devices,
        &Dumps {
            pools: &pools,
            stats: &[],
            queues: &queues,
            dev_qstats: &[],
            queue_qstats: &[],
        },
    );
    let d = &devices[0];
    assert_eq!(
        d.rx_queues[0]
            .pools
            .iter()
            .map(|p| p.id)
            .collect::<Vec<_>>(),
        vec![1]
    );
    assert!(d.rx_queues[1..].iter().all(|q| q.pools.is_empty()));
    assert_eq!(
        d.unmapped_pools.iter().map(|p| p.id).collect::<Vec<_>>(),
        vec![2]
    );
    assert_eq!(d.unmapped_pools[0].stats, None);
}

/// A snapshot nothing like the one a pass will build: other devices,
/// more queues and pools, strings everywhere — what a spent snapshot
/// handed back for reuse may hold.
fn stale_snapshot() -> Snapshot {
    let pool = Pool {
        id: 999,
        ifindex: Some(77),
        napi_id: Some(5),
        inflight: Some(1),
        ..Pool::default()
    };
    let dev = Device {
        ifindex: 77,
        name: "stale-device-name".to_owned(),
        id: policy::snapshot::DeviceId {
            bus: Some("stale-bus".to_owned()),
            parent: Some("stale-parent".to_owned()),
            perm_addr: Some("ff:ff:ff:ff:ff:ff".to_owned()),
            name_fallback: Some("stale".to_owned()),
        },
        driver: Some("stale-driver".to_owned()),
        kind: Some("stale-kind".to_owned()),
        rings: Availability::Unavailable("stale".to_owned()),
        qstats: Some(QueueStats::default()),
        rx_queues: vec![
            RxQueue {
                id: 40,
                napi_id: Some(5),
                pools: vec![pool.clone(); 3],
                ..RxQueue::default()
            };
            9
        ],
        unmapped_pools: vec![pool.clone()],
        ..Device::default()
    };
    Snapshot {
        taken_at_ms: 1,
        capabilities: Capabilities {
            kernel_release: "stale-release".to_owned(),
            ..Capabilities::default()
        },
        devices: vec![dev; 3],
        orphan_pools: vec![pool],
    }
}

/// A pass built on a spent snapshot's allocations equals one built
/// from nothing: the recorded 7.3 netdevsim dumps (links, pools,
/// stats, queues, qstats) through [`PassBuffers`] twice, first with no
/// spare and then over [`stale_snapshot`], and over its own previous
/// result.
#[test]
fn a_pass_on_reused_buffers_equals_a_fresh_one() {
    let ex = exchange;
    let caps = Capabilities {
        kernel_release: "7.3.0".to_owned(),
        page_pool_get: true,
        ..Capabilities::default()
    };
    let build = |b: &mut PassBuffers| {
        use netlink::client as c;
        c::decode_links_into(&ex("vm-7.3-nsim-rtnl-getlink-dump"), &mut b.links).unwrap();
        c::decode_page_pools_into(&ex("vm-7.3-nsim-netdev-page-pool-get-dump"), &mut b.pools)
            .unwrap();
        c::decode_page_pool_stats_into(
            &ex("vm-7.3-nsim-netdev-page-pool-stats-get-dump"),
            &mut b.stats,
        )
        .unwrap();
        decode_pass_queues(&ex("vm-7.3-nsim-netdev-queue-get-dump"), &mut b.queues).unwrap();
        decode_pass_dev_qstats(
            &ex("vm-7.3-nsim-netdev-qstats-get-dev-dump"),
            &mut b.dev_qstats,
        )
        .unwrap();
        decode_pass_queue_qstats(
            &ex("vm-7.3-nsim-netdev-qstats-get-queue-dump"),
            &mut b.queue_qstats,
        )
        .unwrap();
        let mut snap = b.begin(
            &caps,
            |l| l.name != "lo",
            |l, dev| {
                dev.driver = (l.name == "eth0").then(|| "netdevsim".to_owned());
            },
        );
        b.finish(&mut snap, 42);
        snap
    };
    let fresh = build(&mut PassBuffers::default());
    assert!(
        fresh
            .devices
            .iter()
            .map(|d| d.pools().count())
            .sum::<usize>()
            >= 4
    );
    assert!(
        fresh
            .devices
            .iter()
            .any(|d| d.id.perm_addr.is_some() || d.id.bus.is_some())
    );

    let mut b = PassBuffers::default();
    b.recycle(stale_snapshot());
    let over_stale = build(&mut b);
    assert_eq!(over_stale, fresh);
    b.recycle(over_stale);
    assert_eq!(build(&mut b), fresh);

    // One device at a time, each over a stale one.
    let link = b.links.iter().find(|l| l.name != "lo").unwrap();
    let mut dev = stale_snapshot().devices.remove(0);
    fill_device(&mut dev, link);
    let mut want = base_device(link, None);
    (want.rx_queues, want.unmapped_pools) = (dev.rx_queues.clone(), dev.unmapped_pools.clone());
    want.driver.clone_from(&dev.driver);
    assert_eq!(
        dev, want,
        "fill_device leaves only driver and the join's parts"
    );
}

/// Live: the Kernel trait over a veth pair in a throwaway netns.
#[test]
#[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
fn kernel_trait_on_veth() {
    let ns = veth_netns("kern");
    ns.run(|| async {
        let k = NetlinkKernel::connect().await.unwrap();
        let snap = k
            .sample(&SampleScope {
                interfaces: vec!["veth0".to_owned()],
            })
            .await
            .unwrap();
        assert_eq!(snap.devices.len(), 1);
        let d = &snap.devices[0];
        assert_eq!(d.driver.as_deref(), Some("veth"));
        assert_eq!(d.kind.as_deref(), Some("veth"));
        assert_eq!(
            d.rings,
            Availability::Unavailable("not supported by driver veth".to_owned())
        );
        assert_eq!(d.channels.available().and_then(|c| c.rx), Some(4));
        assert_eq!(d.rx_queues.len(), 4);
        assert_eq!(d.num_rx_queues, Some(4));
        assert!(!snap.capabilities.kernel_release.is_empty());

        // The second pass takes the driver and capabilities from the
        // caches, and its snapshot is built on a stale one handed
        // back: the same answers.
        k.recycle(stale_snapshot());
        let again = k
            .sample(&SampleScope {
                interfaces: vec!["veth0".to_owned()],
            })
            .await
            .unwrap();
        assert_eq!(again.capabilities, snap.capabilities);
        assert_eq!(again.devices.len(), 1);
        let counters_cleared = |d: &Device| Device {
            link_stats: None,
            ..d.clone()
        };
        assert_eq!(counters_cleared(&again.devices[0]), counters_cleared(d));
        assert!(again.orphan_pools.is_empty());

        // set_channels: SET with ack, then read back.
        let back = k
            .set_channels(d.ifindex, ChannelField::Rx, 3)
            .await
            .unwrap();
        assert_eq!(back.rx, Some(3));
        let ev = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            loop {
                if let Some(KernelEvent::ChannelsChanged { ifindex, channels }) =
                    k.next_event().await
                {
                    return (ifindex, channels);
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(ev, (d.ifindex, back));

        // veth has no ring operations: refused, naming the driver.
        match k.set_ring(d.ifindex, RingField::Rx, 512).await {
            Err(SetError::Refused { errno, message, .. }) => {
                assert_eq!(errno, 95);
                assert_eq!(message, "not supported by driver veth");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // Above the maximum: EINVAL with the kernel's words and attribute.
        match k.set_channels(d.ifindex, ChannelField::Rx, 64).await {
            Err(SetError::Refused {
                errno,
                message,
                attr,
            }) => {
                assert_eq!(errno, 22);
                assert_eq!(message, "requested channel count exceeds maximum");
                assert_eq!(attr.as_deref(), Some("channels.rx-count"));
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // A device that does not exist.
        assert!(k.sample_device(9999).await.unwrap().is_none());
        assert!(matches!(
            k.set_channels(9999, ChannelField::Rx, 1).await,
            Err(SetError::DeviceGone(9999))
        ));
    })
    .unwrap();
}
