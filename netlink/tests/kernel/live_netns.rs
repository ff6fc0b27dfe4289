#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test file
//! Live tests against this machine's kernel, each in a throwaway network
//! namespace (never the host's interfaces). Root only: `#[ignore]`d for a
//! plain `cargo test`; run with `--include-ignored` they fail without root.

use std::time::Duration;

use netlink::ethtool::{Channels, Header, req};
use netlink::netdev::{NetdevMessage, cmd};
use netlink::netns::TempNetns;
use netlink::socket::{NETLINK_ROUTE, NotifySocket, Received};
use netlink::{Client, Event};

fn netns_with_veth(tag: &str) -> Option<TempNetns> {
    assert!(
        netlink::netns::is_root(),
        "{tag}: needs root to create a network namespace"
    );
    Some(TempNetns::with_veth(tag, 4).unwrap())
}

async fn ifindex(c: &Client, name: &str) -> u32 {
    c.links()
        .await
        .unwrap()
        .into_iter()
        .find(|l| l.name == name)
        .unwrap()
        .ifindex
}

#[test]
#[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
fn channels_round_trip_and_notification() {
    let Some(ns) = netns_with_veth("chan") else {
        return;
    };
    ns.run(|| async {
        let c = Client::connect().await.unwrap();
        let idx = ifindex(&c, "veth0").await;
        let mut events = c.subscribe().unwrap();
        let before = c.channels(idx, Some("veth0")).await.unwrap();
        assert_eq!((before.rx_count, before.rx_max), (Some(4), Some(4)));
        assert_eq!(before.combined_max, None, "veth has no combined channels");
        // Lower rx 4 -> 2 (a no-op set would emit no notification).
        c.set_channels(
            Channels {
                header: Some(Header::ifindex(idx)),
                rx_count: Some(2),
                ..Channels::default()
            },
            Some("veth0"),
        )
        .await
        .unwrap();
        let after = c.channels(idx, Some("veth0")).await.unwrap();
        assert_eq!(after.rx_count, Some(2));
        assert_eq!(after.tx_count, before.tx_count);
        // The queue list follows.
        let rx = c
            .queues(Some(idx))
            .await
            .unwrap()
            .into_iter()
            .filter(|q| q.queue_type == Some(netlink::netdev::QueueType::Rx))
            .count();
        assert_eq!(rx, 2);
        // The CHANNELS_NTF carries the full new state.
        let ntf = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(Event::Channels(ch)) = events.next().await {
                    return ch;
                }
            }
        })
        .await
        .expect("no CHANNELS_NTF within 5 s");
        assert_eq!(ntf.header.as_ref().and_then(|h| h.dev_index), Some(idx));
        assert_eq!(
            (ntf.rx_count, ntf.tx_count, ntf.rx_max),
            (Some(2), before.tx_count, Some(4))
        );
    })
    .unwrap();
}

#[test]
#[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
fn rings_on_veth_are_refused_as_not_supported() {
    let Some(ns) = netns_with_veth("rings") else {
        return;
    };
    ns.run(|| async {
        let c = Client::connect().await.unwrap();
        let idx = ifindex(&c, "veth0").await;
        let e = c.rings(idx, Some("veth0")).await.unwrap_err();
        assert!(e.kernel().unwrap().is_not_supported(), "{e}");
        assert!(e.to_string().contains("veth0"), "{e}");
        let e = c
            .set_rings(
                netlink::ethtool::Rings {
                    header: Some(Header::ifindex(idx)),
                    rx: Some(512),
                    ..Default::default()
                },
                Some("veth0"),
            )
            .await
            .unwrap_err();
        assert!(e.kernel().unwrap().is_not_supported(), "{e}");
        assert_eq!(c.driver_name("veth0").as_deref(), Some("veth"));
    })
    .unwrap();
}

/// The link's speed as LINKMODES_GET gives it is what `ethtool` prints
/// (veth: 10000 Mb/s); a device that has no link settings (the loopback)
/// refuses, by name.
#[test]
#[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
fn link_speed_is_what_ethtool_says() {
    let Some(ns) = netns_with_veth("speed") else {
        return;
    };
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns.name(), "ethtool", "veth0"])
        .output()
        .expect("ethtool (Debian package `ethtool`)");
    let text = String::from_utf8_lossy(&out.stdout);
    let said: u32 = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Speed: ")?
                .strip_suffix("Mb/s")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no speed in `ethtool veth0`:\n{text}"));
    ns.run(move || async move {
        let c = Client::connect().await.unwrap();
        let idx = ifindex(&c, "veth0").await;
        let l = c.linkmodes(idx, Some("veth0")).await.unwrap();
        assert_eq!(l.speed_mbps(), Some(said), "{l:?}");
        let lo = ifindex(&c, "lo").await;
        let e = c.linkmodes(lo, Some("lo")).await.unwrap_err();
        assert!(e.kernel().unwrap().is_not_supported(), "{e}");
        assert!(e.to_string().contains("lo"), "{e}");
    })
    .unwrap();
}

#[test]
#[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
fn extack_names_the_offending_attribute() {
    let Some(ns) = netns_with_veth("extack") else {
        return;
    };
    ns.run(|| async {
        let c = Client::connect().await.unwrap();
        let idx = ifindex(&c, "veth0").await;
        let e = c
            .set_channels(
                Channels {
                    header: Some(Header::ifindex(idx)),
                    rx_count: Some(99),
                    ..Channels::default()
                },
                Some("veth0"),
            )
            .await
            .unwrap_err();
        let k = e.kernel().unwrap();
        assert_eq!(k.errno, libc::EINVAL);
        assert_eq!(
            k.message.as_deref(),
            Some("requested channel count exceeds maximum")
        );
        assert_eq!(k.attr.as_deref(), Some("channels.rx-count"));
    })
    .unwrap();
}

/// Whatever this kernel has: an op the probe lists answers, an op it does
/// not list is refused with EOPNOTSUPP.
#[test]
#[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
fn capability_probe_agrees_with_the_kernel() {
    let Some(ns) = netns_with_veth("caps") else {
        return;
    };
    ns.run(|| async {
        let c = Client::connect().await.unwrap();
        let caps = c.capabilities().unwrap();
        assert!(!caps.kernel_release.is_empty());
        assert!(caps.cap_net_admin, "root has CAP_NET_ADMIN");
        let dumps = [
            (cmd::DEV_GET, NetdevMessage::dev_get()),
            (cmd::PAGE_POOL_GET, NetdevMessage::page_pool_get(None)),
            (
                cmd::PAGE_POOL_STATS_GET,
                NetdevMessage::page_pool_stats_get(None),
            ),
            (cmd::QUEUE_GET, NetdevMessage::queue_get(None)),
            (cmd::NAPI_GET, NetdevMessage::napi_get(None, None)),
            (cmd::QSTATS_GET, NetdevMessage::qstats_get(None, 0)),
        ];
        let mut checked = (0, 0);
        for (op, msg) in dumps {
            let listed = caps.netdev_op(op).is_some_and(|o| o.can_dump());
            let ex = c.netdev_exchange(&msg, true).await.unwrap();
            let r = netlink::client::decode_genl::<NetdevMessage>(&ex, cmd::name(op), None);
            if listed {
                assert!(
                    r.is_ok(),
                    "{} listed but refused: {:?}",
                    cmd::name(op),
                    r.err()
                );
                checked.0 += 1;
            } else {
                let e = r.expect_err("op missing from the probe but answered");
                assert_eq!(e.errno(), Some(libc::EOPNOTSUPP), "{}: {e}", cmd::name(op));
                checked.1 += 1;
            }
        }
        println!(
            "netdev dumps: {} present and answered, {} missing and refused",
            checked.0, checked.1
        );
        // qstats-get has no do handler on any kernel: flags say so, and the
        // kernel refuses.
        if let Some(op) = caps.netdev_op(cmd::QSTATS_GET) {
            assert!(!op.can_do());
            let ex = c
                .netdev_exchange(&NetdevMessage::qstats_get(None, 0), false)
                .await
                .unwrap();
            let e =
                netlink::client::decode_genl::<NetdevMessage>(&ex, "qstats-get", None).unwrap_err();
            assert_eq!(e.errno(), Some(libc::EOPNOTSUPP));
        }
        // ethtool: rings/channels get are always registered when the family is.
        if caps.ethtool_ops.is_some() {
            for op in [
                req::RINGS_GET,
                req::RINGS_SET,
                req::CHANNELS_GET,
                req::CHANNELS_SET,
            ] {
                assert!(caps.ethtool_op(op).is_some(), "ethtool op {op}");
            }
            let idx = ifindex(&c, "veth0").await;
            c.channels(idx, None).await.unwrap();
        }
    })
    .unwrap();
}

#[test]
#[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
fn link_events_and_overflow_is_reported_without_losing_dumps() {
    let Some(ns) = netns_with_veth("events") else {
        return;
    };
    ns.run(|| async {
        let c = Client::connect().await.unwrap();
        let mut events = c.subscribe().unwrap();
        // A deliberately tiny buffer on a separate link-notification socket.
        let mut small =
            NotifySocket::open(NETLINK_ROUTE, "tiny", &[netlink::rtnl::RTNLGRP_LINK]).unwrap();
        small.set_rx_buf(1).unwrap();
        for i in 0..40 {
            let state = if i % 2 == 0 { "down" } else { "up" };
            let out = std::process::Command::new("ip")
                .args(["link", "set", "veth1", state])
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        // Dumps on the request socket are unaffected.
        let links = c.links().await.unwrap();
        assert!(links.iter().any(|l| l.name == "veth0"));
        assert!(matches!(small.recv().await.unwrap(), Received::Overflow));
        // The normal stream saw the link changes.
        let got = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(Event::LinkNew(l)) = events.next().await
                    && l.name == "veth1"
                {
                    return l;
                }
            }
        })
        .await
        .expect("no RTM_NEWLINK for veth1");
        assert_eq!(got.kind.as_deref(), Some("veth"));
    })
    .unwrap();
}
