//! pptune's netlink client against netdevsim in the test VM
//! (`tests/vm/test.sh`). Outside the VM every test fails (`require_vm`).
//!
//! 7.3 runs everything; 6.12 the same (page-pool netlink with its older
//! attribute sets, stats compiled in by our config); 6.1 has no `netdev`
//! family at all, so there the tests check that the client says so and that
//! rings and channels (ethtool netlink) still work.
// Helpers outside #[test] fns fail the test the same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::Duration;

use netlink::Client;
use netlink::ethtool::{Channels, Header, Rings};
use netlink::netdev::PagePool;
use pptune_tests::vm::{Netdevsim, require_vm, ynl_dump};

/// True when this kernel has page-pool netlink (7.3, 6.12).
fn has_page_pool_netlink(kernel: &str) -> bool {
    kernel != "6.1"
}

/// For the tests that need page-pool netlink: tests/vm/test.sh does not
/// select them on a kernel without it (`skips_for`), so getting here on one
/// is a selection error, and the test fails rather than passing unrun.
fn require_page_pool_netlink(kernel: &str) {
    assert!(
        has_page_pool_netlink(kernel),
        "selected on {kernel}, which has no page-pool netlink: \
         tests/vm/test.sh skips_for must leave this test out there"
    );
}

async fn client() -> Client {
    Client::connect().await.expect("netlink client connects")
}

async fn pools_of(c: &Client, ifindex: u32) -> Vec<PagePool> {
    c.page_pools()
        .await
        .expect("page-pool-get dump")
        .into_iter()
        .filter(|p| p.ifindex == Some(ifindex))
        .collect()
}

async fn pool_by_id(c: &Client, id: u64) -> Option<PagePool> {
    c.page_pools()
        .await
        .expect("page-pool-get dump")
        .into_iter()
        .find(|p| p.id == Some(id))
}

/// Poll `f` for up to `secs` seconds (100 ms steps) until it returns true.
async fn eventually<F, Fut>(secs: u64, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..secs * 10 {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "current_thread")]
async fn pools_appear_on_up_and_vanish_on_down() {
    let k = require_vm("pools_appear_on_up_and_vanish_on_down");
    let c = client().await;
    if !has_page_pool_netlink(&k) {
        // 6.1: no netdev family. The client must say so, not fail obscurely.
        assert!(
            c.netdev_family().is_none(),
            "6.1 should lack the netdev family"
        );
        let err = c.page_pools().await.expect_err("no page-pool-get on 6.1");
        assert!(
            matches!(err, netlink::Error::FamilyMissing(_)),
            "unexpected error on 6.1: {err}"
        );
        println!("6.1: page-pool netlink absent, client reports: {err}");
        return;
    }
    let d = Netdevsim::new(101, 4).expect("netdevsim device");
    let ifx = d.ifindex().expect("ifindex");
    assert!(pools_of(&c, ifx).await.is_empty(), "no pools while down");
    d.set_up(true).expect("link up");
    let pools = pools_of(&c, ifx).await;
    assert_eq!(pools.len(), 4, "one pool per queue: {pools:?}");
    for p in &pools {
        assert!(
            p.id.is_some() && p.napi_id.is_some(),
            "id and napi-id: {p:?}"
        );
        assert_eq!(
            p.inflight,
            Some(0),
            "fresh pool has nothing inflight: {p:?}"
        );
        assert_eq!(p.detach_time, None);
    }
    d.set_up(false).expect("link down");
    assert!(pools_of(&c, ifx).await.is_empty(), "pools vanish on down");
}

#[tokio::test(flavor = "current_thread")]
async fn held_page_gives_inflight_and_detach_time() {
    let k = require_vm("held_page_gives_inflight_and_detach_time");
    require_page_pool_netlink(&k);
    let c = client().await;
    let d = Netdevsim::new(102, 1).expect("netdevsim device");
    let ifx = d.ifindex().expect("ifindex");
    d.set_up(true).expect("up");
    d.pp_hold(true).expect("pp_hold y");
    let pools = pools_of(&c, ifx).await;
    assert_eq!(pools.len(), 1);
    let id = pools[0].id.expect("pool id");
    assert!(
        pools[0].inflight.unwrap_or(0) >= 1,
        "held page is inflight: {pools:?}"
    );

    d.set_up(false).expect("down");
    let p = pool_by_id(&c, id)
        .await
        .expect("held pool still listed after down");
    assert!(
        p.detach_time.is_some(),
        "detached pool has detach-time: {p:?}"
    );
    assert!(p.inflight.unwrap_or(0) >= 1);

    d.pp_hold(false).expect("pp_hold n");
    // The kernel retries the release once a second.
    assert!(
        eventually(5, || async { pool_by_id(&c, id).await.is_none() }).await,
        "released pool disappears"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn deleted_device_orphans_its_pool() {
    let k = require_vm("deleted_device_orphans_its_pool");
    require_page_pool_netlink(&k);
    let c = client().await;
    let d = Netdevsim::new(103, 1).expect("netdevsim device");
    let ifx = d.ifindex().expect("ifindex");
    d.set_up(true).expect("up");
    d.pp_hold(true).expect("pp_hold y");
    let id = pools_of(&c, ifx).await[0].id.expect("pool id");
    d.delete().expect("delete device");
    // netdevsim gives the held page back right after unregistering; the
    // pool stays listed as an orphan until the next release retry (≈ 1 s).
    let p = pool_by_id(&c, id).await.expect("orphan pool listed");
    assert_eq!(p.ifindex, None, "orphan pool has no ifindex: {p:?}");
    assert!(p.detach_time.is_some(), "orphan pool is detached: {p:?}");
    assert!(
        pools_of(&c, ifx).await.is_empty(),
        "nothing under the old ifindex"
    );
    assert!(
        eventually(5, || async { pool_by_id(&c, id).await.is_none() }).await,
        "orphan released"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn ring_and_channel_round_trip() {
    let k = require_vm("ring_and_channel_round_trip");
    let c = client().await;
    let d = Netdevsim::new(104, 4).expect("netdevsim device");
    let ifx = d.ifindex().expect("ifindex");
    let name = Some(d.ifname());
    d.set_up(true).expect("up");

    let r = c.rings(ifx, name).await.expect("rings-get");
    let max = r.rx_max.expect("rx-max");
    assert!(max >= 2048, "netdevsim rx-max {max}");
    c.set_rings(
        Rings {
            header: Some(Header::ifindex(ifx)),
            rx: Some(2048),
            ..Rings::default()
        },
        name,
    )
    .await
    .expect("rings-set 2048");
    assert_eq!(c.rings(ifx, name).await.expect("rings-get").rx, Some(2048));

    let ch = c.channels(ifx, name).await.expect("channels-get");
    println!("{k}: netdevsim channels {ch:?}");
    if ch.combined_max.unwrap_or(0) >= 2 {
        c.set_channels(
            Channels {
                header: Some(Header::ifindex(ifx)),
                combined_count: Some(2),
                ..Channels::default()
            },
            name,
        )
        .await
        .expect("channels-set 2");
        assert_eq!(
            c.channels(ifx, name)
                .await
                .expect("channels-get")
                .combined_count,
            Some(2)
        );
        if has_page_pool_netlink(&k) {
            let rx: Vec<_> = c
                .queues(Some(ifx))
                .await
                .expect("queue-get")
                .into_iter()
                .filter(|q| q.queue_type == Some(netlink::netdev::QueueType::Rx))
                .collect();
            assert_eq!(rx.len(), 2, "queue-get follows channels: {rx:?}");
        }
    } else {
        panic!("{k}: netdevsim reports no settable combined channels: {ch:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn ring_above_max_carries_the_kernel_extack() {
    let _k = require_vm("ring_above_max_carries_the_kernel_extack");
    let c = client().await;
    let d = Netdevsim::new(105, 1).expect("netdevsim device");
    let ifx = d.ifindex().expect("ifindex");
    let name = Some(d.ifname());
    let max = c
        .rings(ifx, name)
        .await
        .expect("rings-get")
        .rx_max
        .expect("rx-max");
    let err = c
        .set_rings(
            Rings {
                header: Some(Header::ifindex(ifx)),
                rx: Some(max + 1),
                ..Rings::default()
            },
            name,
        )
        .await
        .expect_err("ring above rx-max is refused");
    let kerr = err.kernel().expect("a kernel refusal");
    assert_eq!(kerr.errno, 22, "EINVAL: {err}");
    let text = format!("{err} / {}", kerr.describe());
    assert!(
        text.contains("requested ring size exceeds maximum"),
        "the kernel's extack text is in our error: {text}"
    );
    assert!(
        text.contains(d.ifname()),
        "the error names the device: {text}"
    );
}

fn json_u64(v: &serde_json::Value, key: &str) -> Option<u64> {
    v.get(key).and_then(serde_json::Value::as_u64)
}

#[tokio::test(flavor = "current_thread")]
async fn page_pool_stats_agree_with_ynl() {
    let k = require_vm("page_pool_stats_agree_with_ynl");
    require_page_pool_netlink(&k);
    let c = client().await;
    let d = Netdevsim::new(106, 2).expect("netdevsim device");
    let ifx = d.ifindex().expect("ifindex");
    d.set_up(true).expect("up");
    // Move some counters: each hold allocates from queue 0's pool.
    for _ in 0..3 {
        d.pp_hold(true).expect("hold");
        d.pp_hold(false).expect("release");
    }
    d.pp_hold(true).expect("hold");

    // Only this device's pools: they are quiet between the two dumps
    // (other suites may leave pools with traffic behind).
    let ours: Vec<_> = c
        .page_pool_stats()
        .await
        .expect("page-pool-stats-get")
        .into_iter()
        .filter(|s| s.info.as_ref().and_then(|i| i.ifindex) == Some(ifx))
        .collect();
    assert_eq!(ours.len(), 2, "one stats entry per queue's pool");
    let text = ynl_dump("page-pool-stats-get").expect("ynl cli");
    let theirs: serde_json::Value = serde_json::from_str(&text).expect("ynl json");
    let theirs = theirs.as_array().expect("a JSON list");
    assert!(!theirs.is_empty(), "ynl dumped nothing");

    let mut by_id: BTreeMap<u64, &serde_json::Value> = BTreeMap::new();
    for e in theirs {
        let id = e
            .get("info")
            .and_then(|i| json_u64(i, "id"))
            .expect("info.id in ynl output");
        if e.get("info").and_then(|i| json_u64(i, "ifindex")) == Some(u64::from(ifx)) {
            by_id.insert(id, e);
        }
    }
    assert_eq!(ours.len(), by_id.len(), "same number of pools");
    let mut nonzero = 0;
    for s in &ours {
        let info = s.info.as_ref().expect("info nest");
        let id = info.id.expect("info.id");
        let t = by_id
            .get(&id)
            .unwrap_or_else(|| panic!("pool {id} missing in ynl"));
        let ti = t.get("info").expect("info");
        assert_eq!(
            info.ifindex.map(u64::from),
            json_u64(ti, "ifindex"),
            "pool {id} ifindex"
        );
        // Every counter the decoder has, under its name in the kernel's
        // spec (ynl's keys): the field name with `-` for `_`.
        for (field, ours) in s.counters.named() {
            let name = field.replace('_', "-");
            assert_eq!(ours, json_u64(t, &name), "pool {id} {name}");
            nonzero += usize::from(ours.unwrap_or(0) > 0);
        }
    }
    assert!(
        nonzero > 0,
        "some counter moved, so the comparison means something"
    );
    println!(
        "{k}: {} pools, all {} counters equal to the kernel's ynl CLI",
        ours.len(),
        netlink::netdev::PoolCounters::COUNT
    );
    d.pp_hold(false).expect("release");
}
