#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test file
//! Codec tests against real kernel bytes.
//!
//! Fixtures named `host-6.18-veth-*` were captured on Linux 6.18.44 (no
//! `CONFIG_PAGE_POOL_STATS`) by `examples/capture.rs` run inside a throwaway
//! netns holding a veth pair with 4 RX/TX queues and GRO on (so NAPIs exist).
//! Fixtures named `vm-7.3-nsim-*` come from the VM testbed (netdevsim,
//! `CONFIG_PAGE_POOL_STATS=y`). Each `X.bin` holds every message the kernel
//! sent for the request in `X.req.bin`.

use netlink::GenlPayload;
use netlink::client::decode_genl;
use netlink::ctrl::{CtrlMessage, Family};
use netlink::ethtool::{EthtoolBody, EthtoolMessage};
use netlink::events::{self, Event, Source};
use netlink::netdev::{NetdevBody, NetdevMessage, QueueType, cmd};
use netlink::socket::{Exchange, Outcome};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}{name}")).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn load(name: &str) -> Exchange {
    let req = std::fs::read(format!("{DIR}{name}.req.bin")).unwrap_or_default();
    Exchange::from_reply_bytes(req, &bytes(&format!("{name}.bin"))).unwrap()
}

/// Decode every reply payload and check it re-encodes to the same bytes.
fn round_trip<P: GenlPayload + std::fmt::Debug>(ex: &Exchange) -> usize {
    let Outcome::Replies(msgs) = ex.outcome().unwrap() else {
        panic!("expected replies")
    };
    for m in &msgs {
        let p = P::from_genl_bytes(m.payload).unwrap();
        assert_eq!(p.to_genl_bytes(), m.payload, "re-encoding {p:?}");
    }
    msgs.len()
}

fn family(name: &str) -> Family {
    let ex = load(name);
    assert_eq!(round_trip::<CtrlMessage>(&ex), 1);
    let m = decode_genl::<CtrlMessage>(&ex, "getfamily", None).unwrap();
    Family::from_reply(m.into_iter().next().unwrap()).unwrap()
}

#[test]
fn nlctrl_families() {
    let netdev = family("host-6.18-veth-ctrl-getfamily-netdev");
    assert_eq!(netdev.name, "netdev");
    assert!(netdev.group("page-pool").is_some());
    assert!(netdev.group("mgmt").is_some());
    // 6.18 without CONFIG_PAGE_POOL_STATS: page-pool-get yes, stats no.
    assert!(netdev.op(cmd::PAGE_POOL_GET).unwrap().can_dump());
    assert!(netdev.op(cmd::PAGE_POOL_STATS_GET).is_none());
    let qstats = netdev.op(cmd::QSTATS_GET).unwrap();
    assert!(qstats.can_dump() && !qstats.can_do());
    assert!(netdev.op(cmd::NAPI_SET).unwrap().needs_admin());

    let ethtool = family("host-6.18-veth-ctrl-getfamily-ethtool");
    assert!(ethtool.group("monitor").is_some());
    let set = ethtool.op(netlink::ethtool::req::RINGS_SET).unwrap();
    assert!(set.can_do() && set.needs_admin());
}

#[test]
fn queue_get_dump() {
    let ex = load("host-6.18-veth-netdev-queue-get-dump");
    assert_eq!(round_trip::<NetdevMessage>(&ex), 8);
    let qs: Vec<_> = decode_genl::<NetdevMessage>(&ex, "queue-get", None)
        .unwrap()
        .into_iter()
        .map(|m| match m.body {
            NetdevBody::Queue(q) => q,
            b => panic!("{b:?}"),
        })
        .collect();
    let rx = qs
        .iter()
        .filter(|q| q.queue_type == Some(QueueType::Rx))
        .count();
    assert_eq!(rx, 4);
    assert!(qs.iter().all(|q| q.ifindex.is_some() && q.id.is_some()));
}

#[test]
fn napi_get_both_uint_widths() {
    let ex = load("host-6.18-veth-netdev-napi-get-dump");
    assert_eq!(round_trip::<NetdevMessage>(&ex), 4);
    // gro-flush-timeout set to 5 s with napi-set: 5e9 ns does not fit in
    // u32, so the kernel wrote 8 bytes for that NAPI and 4 for the others.
    let ex = load("host-6.18-veth-netdev-napi-get-dump-gro5s");
    assert_eq!(round_trip::<NetdevMessage>(&ex), 4);
    let napis: Vec<_> = decode_genl::<NetdevMessage>(&ex, "napi-get", None)
        .unwrap()
        .into_iter()
        .map(|m| match m.body {
            NetdevBody::Napi(n) => n,
            b => panic!("{b:?}"),
        })
        .collect();
    let timeouts: Vec<_> = napis.iter().map(|n| n.gro_flush_timeout).collect();
    assert!(timeouts.contains(&Some(5_000_000_000)));
    assert!(timeouts.contains(&Some(0)));
    // The 8-byte attribute really is in the captured bytes.
    let raw = bytes("host-6.18-veth-netdev-napi-get-dump-gro5s.bin");
    let eight = 5_000_000_000u64.to_ne_bytes();
    assert!(
        raw.windows(12)
            .any(|w| w[..4] == [12, 0, 6, 0] && w[4..] == eight)
    );
}

#[test]
fn kernel_refusals_carry_errno_extack_and_attribute() {
    // page-pool-stats-get on a kernel without CONFIG_PAGE_POOL_STATS.
    let e = decode_genl::<NetdevMessage>(
        &load("host-6.18-veth-netdev-page-pool-stats-get-dump"),
        "page-pool-stats-get",
        None,
    )
    .unwrap_err();
    assert_eq!(e.errno(), Some(libc::EOPNOTSUPP));

    // qstats dump on veth (no stat_ops): the error arrives in NLMSG_DONE
    // with an extack offset pointing at the ifindex filter.
    let e = decode_genl::<NetdevMessage>(
        &load("host-6.18-veth-netdev-qstats-get-dev-dump"),
        "qstats-get",
        None,
    )
    .unwrap_err();
    let k = e.kernel().unwrap();
    assert_eq!(k.errno, libc::EOPNOTSUPP);
    assert_eq!(k.attr.as_deref(), Some("qstats-get.ifindex"));

    // qstats as a do: dump-only op.
    let e = decode_genl::<NetdevMessage>(
        &load("host-6.18-veth-netdev-qstats-get-do-refused"),
        "qstats-get",
        None,
    )
    .unwrap_err();
    assert_eq!(e.errno(), Some(libc::EOPNOTSUPP));

    // CHANNELS_SET above the maximum.
    let e = decode_genl::<EthtoolMessage>(
        &load("host-6.18-veth-ethtool-channels-set-refused"),
        "channels-set",
        Some("veth0"),
    )
    .unwrap_err();
    let k = e.kernel().unwrap();
    assert_eq!(k.errno, libc::EINVAL);
    assert_eq!(
        k.message.as_deref(),
        Some("requested channel count exceeds maximum")
    );
    assert_eq!(k.attr.as_deref(), Some("channels.rx-count"));
    let text = e.to_string();
    assert!(
        text.contains("veth0") && text.contains("exceeds maximum"),
        "{text}"
    );

    // veth has no ring operations at all.
    for f in [
        "host-6.18-veth-ethtool-rings-get",
        "host-6.18-veth-ethtool-rings-set-refused",
    ] {
        let e = decode_genl::<EthtoolMessage>(&load(f), "rings", None).unwrap_err();
        assert_eq!(e.errno(), Some(libc::EOPNOTSUPP));
    }

    // An accepted SET is a bare ack.
    let ok = decode_genl::<EthtoolMessage>(
        &load("host-6.18-veth-ethtool-channels-set-ack"),
        "channels-set",
        None,
    );
    assert!(ok.unwrap().is_empty());
}

#[test]
fn channels_reply_and_notification() {
    let ex = load("host-6.18-veth-ethtool-channels-get");
    assert_eq!(round_trip::<EthtoolMessage>(&ex), 1);
    let m = decode_genl::<EthtoolMessage>(&ex, "channels-get", None).unwrap();
    let EthtoolBody::Channels(c) = &m[0].body else {
        panic!("{m:?}")
    };
    assert_eq!(
        (c.rx_max, c.rx_count, c.combined_max),
        (Some(4), Some(4), None)
    );
    assert_eq!(
        c.header.as_ref().and_then(|h| h.dev_name.as_deref()),
        Some("veth0")
    );

    // The CHANNELS_NTF from the set that lowered rx 4 -> 3.
    let ntf = bytes("host-6.18-veth-ethtool-channels-ntf.bin");
    let fam = family("host-6.18-veth-ctrl-getfamily-ethtool");
    let Some(Event::Channels(c)) = events::decode(Source::Ethtool(fam.id), &ntf).unwrap() else {
        panic!("not a channels event")
    };
    assert_eq!((c.rx_count, c.tx_count), (Some(3), Some(4)));
}

#[test]
fn rtnl_link_dump() {
    let ex = load("host-6.18-veth-rtnl-getlink-dump");
    let Outcome::Replies(msgs) = ex.outcome().unwrap() else {
        panic!()
    };
    let links: Vec<_> = msgs
        .iter()
        .map(|m| netlink::rtnl::Link::parse(m.payload).unwrap())
        .collect();
    let v0 = links.iter().find(|l| l.name == "veth0").unwrap();
    assert_eq!(v0.kind.as_deref(), Some("veth"));
    assert_eq!(v0.num_rx_queues, Some(4));
    assert!(v0.admin_up);
    assert!(v0.stats64.is_some());
    assert!(links.iter().any(|l| l.name == "lo"));
}

#[test]
fn unknown_attributes_are_kept_not_errors() {
    // Hand-made from a real reply: append attribute 200 (unknown) to a
    // queue-get reply and a nested unknown inside a channels header.
    let ex = load("host-6.18-veth-netdev-queue-get-dump");
    let Outcome::Replies(msgs) = ex.outcome().unwrap() else {
        panic!()
    };
    let mut payload = msgs[0].payload.to_vec();
    payload.extend_from_slice(&[8, 0, 200, 0, 1, 2, 3, 4]);
    let m = NetdevMessage::from_genl_bytes(&payload).unwrap();
    let NetdevBody::Queue(q) = &m.body else {
        panic!()
    };
    assert_eq!(q.other.len(), 1);
    assert_eq!(q.other[0].kind, 200);
    assert_eq!(m.to_genl_bytes(), payload);
}

#[test]
fn truncated_input_is_an_error_never_a_panic() {
    for name in [
        "host-6.18-veth-netdev-queue-get-dump",
        "host-6.18-veth-netdev-napi-get-dump-gro5s",
        "host-6.18-veth-ethtool-channels-get",
        "host-6.18-veth-ctrl-getfamily-ethtool",
        "host-6.18-veth-ethtool-channels-set-refused",
        "host-6.18-veth-rtnl-getlink-dump",
    ] {
        let full = bytes(&format!("{name}.bin"));
        for cut in 0..full.len() {
            // Framing: cut streams fail or yield fewer messages.
            let _ = Exchange::from_reply_bytes(Vec::new(), &full[..cut])
                .map(|ex| ex.outcome().map(|_| ()));
        }
        // Payload-level truncation of each reply: decode must not panic,
        // and cutting inside an attribute must be an error.
        let ex = load(name);
        if let Ok(Outcome::Replies(msgs)) = ex.outcome() {
            for m in msgs {
                for cut in 0..m.payload.len() {
                    let p = &m.payload[..cut];
                    let _ = NetdevMessage::from_genl_bytes(p);
                    let _ = EthtoolMessage::from_genl_bytes(p);
                    let _ = CtrlMessage::from_genl_bytes(p);
                    let _ = netlink::rtnl::Link::parse(p);
                }
            }
        }
    }
    // A concrete case: the queue reply cut in the middle of an attribute.
    let ex = load("host-6.18-veth-netdev-queue-get-dump");
    let Outcome::Replies(msgs) = ex.outcome().unwrap() else {
        panic!()
    };
    let p = msgs[0].payload;
    assert!(NetdevMessage::from_genl_bytes(&p[..p.len() - 2]).is_err());
    assert!(NetdevMessage::from_genl_bytes(&p[..2]).is_err());
}
