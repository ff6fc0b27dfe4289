#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test file
//! Codec tests against real kernel bytes.
//!
//! Fixtures named `host-6.18-veth-*` were captured on Linux 6.18.44 (no
//! `CONFIG_PAGE_POOL_STATS`) by `examples/capture.rs` run inside a throwaway
//! netns holding a veth pair with 4 RX/TX queues and GRO on (so NAPIs exist).
//! Fixtures named `vm-7.3-nsim-*` come from the VM testbed (netdevsim,
//! `CONFIG_PAGE_POOL_STATS=y`) via `examples/capture-vm.sh`. Each `X.bin`
//! holds every message the kernel sent for the request in `X.req.bin`;
//! `N-netdev-page-pool-ntf.bin` are single notifications in arrival order.
//! Inputs built by hand are built in the test code and say so.

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

/// veth's link modes (`ethtool veth0`: "Speed: 10000Mb/s, Duplex: Full"),
/// asked with compact bitsets: the speed pptune groups a fleet by, and the
/// bitsets and rate matching kept verbatim, so the reply re-encodes to the
/// kernel's bytes; the request is the encoder's.
#[test]
fn linkmodes_reply() {
    let ex = load("host-6.18-veth-ethtool-linkmodes-get");
    assert_eq!(round_trip::<EthtoolMessage>(&ex), 1);
    assert_eq!(
        ex.request[16..],
        netlink::GenlPayload::to_genl_bytes(&EthtoolMessage::linkmodes_get(
            netlink::ethtool::Header::ifindex(u32::from_ne_bytes(
                ex.request[28..32].try_into().unwrap()
            ))
        ))[..],
        "the recorded request is the encoder's"
    );
    let l = netlink::client::decode_linkmodes(&ex, Some("veth0")).unwrap();
    assert_eq!(
        (l.speed, l.speed_mbps(), l.duplex, l.autoneg),
        (Some(10_000), Some(10_000), Some(1), Some(0))
    );
    assert_eq!(
        l.other.iter().map(|a| a.kind & 0x3fff).collect::<Vec<_>>(),
        [3, 10],
        "ours and rate-matching kept"
    );
    assert_eq!(
        l.header.as_ref().and_then(|h| h.dev_name.as_deref()),
        Some("veth0")
    );
    let unknown = netlink::ethtool::Linkmodes {
        speed: Some(netlink::ethtool::SPEED_UNKNOWN),
        ..l
    };
    assert_eq!(unknown.speed_mbps(), None, "no link: no speed");
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

/// The link as `netlink-packet-route` (the decoder `Link::parse` replaced)
/// reads it: the reference for the hand-written decoder.
fn reference_link(payload: &[u8]) -> netlink::rtnl::Link {
    use netlink::rtnl::{Link, LinkStats64, OperState};
    use netlink_packet_core::Parseable;
    use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkInfo, LinkMessage, State};
    let msg = LinkMessage::parse(payload).unwrap();
    let mut l = Link {
        ifindex: msg.header.index,
        admin_up: msg.header.flags.contains(LinkFlags::Up),
        ..Link::default()
    };
    for a in &msg.attributes {
        match a {
            LinkAttribute::IfName(n) => l.name.clone_from(n),
            LinkAttribute::OperState(s) => {
                l.oper_state = match s {
                    State::NotPresent => OperState::NotPresent,
                    State::Down => OperState::Down,
                    State::LowerLayerDown => OperState::LowerLayerDown,
                    State::Testing => OperState::Testing,
                    State::Dormant => OperState::Dormant,
                    State::Up => OperState::Up,
                    _ => OperState::Unknown,
                }
            }
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    if let LinkInfo::Kind(k) = i {
                        l.kind = Some(k.to_string());
                    }
                }
            }
            LinkAttribute::Controller(m) => l.master = Some(*m),
            LinkAttribute::Mtu(m) => l.mtu = Some(*m),
            LinkAttribute::ParentDevName(p) => l.parent_dev = Some(p.clone()),
            LinkAttribute::ParentDevBusName(b) => l.parent_bus = Some(b.clone()),
            LinkAttribute::PermAddress(a) => l.perm_addr = Some(a.clone()),
            LinkAttribute::NumRxQueues(n) => l.num_rx_queues = Some(*n),
            LinkAttribute::NumTxQueues(n) => l.num_tx_queues = Some(*n),
            LinkAttribute::Stats64(s) => {
                l.stats64 = Some(LinkStats64 {
                    rx_packets: s.rx_packets,
                    rx_bytes: s.rx_bytes,
                    rx_dropped: s.rx_dropped,
                    rx_missed_errors: s.rx_missed_errors,
                    rx_fifo_errors: s.rx_fifo_errors,
                });
            }
            _ => {}
        }
    }
    l
}

/// Every link of every recorded dump (host veth, 6.12 and 7.3 netdevsim)
/// decodes by hand exactly as `netlink-packet-route` decodes it.
#[test]
fn rtnl_link_decoder_matches_the_reference() {
    let mut seen = 0;
    for name in [
        "host-6.18-veth-rtnl-getlink-dump",
        "vm-6.12-nsim-rtnl-getlink-dump",
        "vm-7.3-nsim-rtnl-getlink-dump",
    ] {
        let ex = load(name);
        let Outcome::Replies(msgs) = ex.outcome().unwrap() else {
            panic!("{name}: refused")
        };
        for m in &msgs {
            let ours = netlink::rtnl::Link::parse(m.payload).unwrap();
            assert_eq!(ours, reference_link(m.payload), "{name}: {}", ours.name);
            seen += 1;
        }
    }
    assert!(seen >= 6, "only {seen} links in the fixtures");
}

/// Decoding into links left from another dump (every link decoded over
/// every other, and a dump decoded into a longer and a shorter vector)
/// gives exactly what a fresh decode gives: nothing of the old link stays.
#[test]
fn rtnl_links_decoded_in_place_keep_nothing_stale() {
    let names = [
        "host-6.18-veth-rtnl-getlink-dump",
        "vm-6.12-nsim-rtnl-getlink-dump",
        "vm-7.3-nsim-rtnl-getlink-dump",
    ];
    let mut payloads = Vec::new();
    for name in names {
        let ex = load(name);
        let Outcome::Replies(msgs) = ex.outcome().unwrap() else {
            panic!("{name}: refused")
        };
        payloads.extend(msgs.iter().map(|m| m.payload.to_vec()));
    }
    for old in &payloads {
        for new in &payloads {
            let mut l = netlink::rtnl::Link::parse(old).unwrap();
            l.parse_into(new).unwrap();
            assert_eq!(l, netlink::rtnl::Link::parse(new).unwrap());
        }
    }
    let fresh = |name| netlink::client::decode_links(&load(name)).unwrap();
    for (into, from) in [(names[0], names[2]), (names[2], names[0])] {
        let mut links = fresh(into);
        netlink::client::decode_links_into(&load(from), &mut links).unwrap();
        assert_eq!(links, fresh(from), "{from} decoded over {into}");
    }
}

/// A kept link attribute of the wrong size, or an attribute header pointing
/// past the message, fails the decode with the attribute named; a string
/// attribute that is not UTF-8 decodes, its odd bytes escaped; an attribute
/// the decoder does not keep is skipped.
#[test]
fn rtnl_link_malformed_attributes_fail_clearly() {
    use netlink::error::CodecError;
    let ex = load("host-6.18-veth-rtnl-getlink-dump");
    let Outcome::Replies(msgs) = ex.outcome().unwrap() else {
        panic!()
    };
    let base = msgs[0].payload.to_vec();
    let with = |extra: &[u8]| {
        let mut p = base.clone();
        p.extend_from_slice(extra);
        netlink::rtnl::Link::parse(&p)
    };
    // IFLA_MTU (4) with 2 bytes.
    assert!(matches!(
        with(&[6, 0, 4, 0, 1, 2, 0, 0]),
        Err(CodecError::BadLength {
            attr: "IFLA_MTU",
            len: 2,
            ..
        })
    ));
    // IFLA_IFNAME (3), not UTF-8: a name, its bytes escaped; every other
    // string attribute the same (IFLA_INFO_KIND in IFLA_LINKINFO, 18/1;
    // IFLA_PARENT_DEV_NAME, 56; IFLA_PARENT_DEV_BUS_NAME, 57).
    let odd = with(&[6, 0, 3, 0, 0xff, 0xfe, 0, 0]).unwrap();
    assert_eq!(odd.name, r"\xff\xfe");
    let odd = with(&[
        12, 0, 18, 0, 8, 0, 1, 0, b'v', 0x80, b'\\', 0, // kind
        8, 0, 56, 0, 0xc3, b'(', 0, 0, // parent dev
        5, 0, 57, 0, 0xed, 0, 0, 0, // parent bus
    ])
    .unwrap();
    assert_eq!(odd.kind.as_deref(), Some(r"v\x80\x5c"));
    assert_eq!(odd.parent_dev.as_deref(), Some(r"\xc3("));
    assert_eq!(odd.parent_bus.as_deref(), Some(r"\xed"));
    // IFLA_OPERSTATE (16) with 4 bytes.
    assert!(matches!(
        with(&[8, 0, 16, 0, 6, 0, 0, 0]),
        Err(CodecError::BadLength {
            attr: "IFLA_OPERSTATE",
            ..
        })
    ));
    // IFLA_LINKINFO (18) holding a cut attribute header.
    assert!(matches!(
        with(&[8, 0, 18, 0x80, 9, 0, 1, 0]),
        Err(CodecError::BadFrame {
            what: "attribute",
            ..
        })
    ));
    // An attribute claiming more bytes than remain.
    assert!(matches!(
        with(&[40, 0, 200, 0]),
        Err(CodecError::BadFrame {
            what: "attribute",
            len: 40,
            have: 4
        })
    ));
    // A short ifinfomsg.
    assert!(matches!(
        netlink::rtnl::Link::parse(&base[..10]),
        Err(CodecError::Truncated {
            what: "ifinfomsg",
            need: 16,
            have: 10
        })
    ));
    // An unknown attribute is skipped.
    assert_eq!(
        with(&[8, 0, 200, 0, 1, 2, 3, 4]).unwrap(),
        netlink::rtnl::Link::parse(&base).unwrap()
    );
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
        "vm-7.3-nsim-netdev-page-pool-get-dump",
        "vm-7.3-nsim-netdev-page-pool-stats-get-dump",
        "vm-7.3-nsim-ethtool-rings-get",
        "vm-7.3-nsim-ethtool-rings-set-refused",
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

// ---- Linux 7.3 in the VM testbed: netdevsim, CONFIG_PAGE_POOL_STATS=y ----
// Captured by `examples/capture-vm.sh`: netdevsim device with 4 queues,
// brought up, a page held through debugfs `pp_hold`, down and up again (so
// one detached pool with detach-time sits next to four live ones), then the
// device deleted with the page still held (an orphaned pool).

fn pools(name: &str) -> Vec<netlink::netdev::PagePool> {
    let ex = load(name);
    round_trip::<NetdevMessage>(&ex);
    decode_genl::<NetdevMessage>(&ex, "page-pool-get", None)
        .unwrap()
        .into_iter()
        .map(|m| match m.body {
            NetdevBody::PagePool(p) => p,
            b => panic!("{b:?}"),
        })
        .collect()
}

#[test]
fn vm_page_pool_dump_live_and_detached() {
    let ps = pools("vm-7.3-nsim-netdev-page-pool-get-dump");
    assert_eq!(ps.len(), 5);
    // Newest first within a device (pools are added at the list head).
    let ids: Vec<_> = ps.iter().map(|p| p.id.unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    let detached: Vec<_> = ps.iter().filter(|p| p.detach_time.is_some()).collect();
    assert_eq!(detached.len(), 1);
    let d = detached[0];
    assert_eq!(
        (d.inflight, d.inflight_mem, d.napi_id),
        (Some(1), Some(4096), None)
    );
    assert!(
        d.ifindex.is_some(),
        "detached but not orphaned: still under its device"
    );
    // Live pools carry a NAPI id that queue-get also reports: the join key.
    let ex = load("vm-7.3-nsim-netdev-queue-get-dump");
    let queue_napis: Vec<u64> = decode_genl::<NetdevMessage>(&ex, "queue-get", None)
        .unwrap()
        .into_iter()
        .filter_map(|m| match m.body {
            NetdevBody::Queue(q) if q.queue_type == Some(QueueType::Rx) => q.napi_id.map(u64::from),
            _ => None,
        })
        .collect();
    assert_eq!(queue_napis.len(), 4);
    for p in ps.iter().filter(|p| p.detach_time.is_none()) {
        assert!(queue_napis.contains(&p.napi_id.unwrap()), "{p:?}");
        assert_eq!((p.inflight, p.inflight_mem), (Some(0), Some(0)));
    }
    // do by id gives the same pool.
    let one = pools("vm-7.3-nsim-netdev-page-pool-get-do");
    assert_eq!(one.len(), 1);
    assert!(ps.contains(&one[0]));
}

#[test]
fn vm_orphaned_pool_has_no_ifindex() {
    let ps = pools("vm-7.3-nsim-orphan-netdev-page-pool-get-dump");
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0].ifindex, None);
    assert!(ps[0].detach_time.is_some());
    assert_eq!(ps[0].inflight, Some(1));
    // The stats dump walks devices: the orphan is not in it.
    let ex = load("vm-7.3-nsim-orphan-netdev-page-pool-stats-get-dump");
    assert!(
        decode_genl::<NetdevMessage>(&ex, "page-pool-stats-get", None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn vm_page_pool_stats_dump() {
    let ex = load("vm-7.3-nsim-netdev-page-pool-stats-get-dump");
    assert_eq!(round_trip::<NetdevMessage>(&ex), 5);
    let stats: Vec<_> = decode_genl::<NetdevMessage>(&ex, "page-pool-stats-get", None)
        .unwrap()
        .into_iter()
        .map(|m| match m.body {
            NetdevBody::PagePoolStats(s) => s,
            b => panic!("{b:?}"),
        })
        .collect();
    for s in &stats {
        let c = s.counters;
        // Every counter Linux 7.3 has is present with CONFIG_PAGE_POOL_STATS.
        for v in [
            c.alloc_fast,
            c.alloc_slow,
            c.alloc_slow_high_order,
            c.alloc_empty,
            c.alloc_refill,
            c.alloc_waive,
            c.recycle_cached,
            c.recycle_cache_full,
            c.recycle_ring,
            c.recycle_ring_full,
            c.recycle_released_refcnt,
        ] {
            assert!(v.is_some(), "{s:?}");
        }
        assert!(s.info.as_ref().unwrap().ifindex.is_some());
    }
    // The held page came from one slow bulk allocation on an empty ring.
    let held = pools("vm-7.3-nsim-netdev-page-pool-get-dump")
        .into_iter()
        .find(|p| p.detach_time.is_some())
        .unwrap();
    let s = stats
        .iter()
        .find(|s| s.info.as_ref().unwrap().id == held.id)
        .unwrap();
    assert_eq!(
        (s.counters.alloc_slow, s.counters.alloc_empty),
        (Some(1), Some(1))
    );
    let fam = family("vm-7.3-nsim-ctrl-getfamily-netdev");
    assert!(fam.op(cmd::PAGE_POOL_STATS_GET).unwrap().can_dump());
}

#[test]
fn vm_page_pool_notifications() {
    let fam = family("vm-7.3-nsim-ctrl-getfamily-netdev");
    let mut seen = Vec::new();
    for i in 1..=12 {
        let b = bytes(&format!("vm-7.3-nsim-{i}-netdev-page-pool-ntf.bin"));
        let Some(Event::PagePool { change, pool }) =
            events::decode(Source::Netdev(fam.id), &b).unwrap()
        else {
            panic!("notification {i} is not a page-pool event")
        };
        seen.push((change, pool));
    }
    use netlink::PoolChange::{Added, Changed, Deleted};
    let count = |c| seen.iter().filter(|(x, _)| *x == c).count();
    // up: 4 added; down with a held page: 1 changed (detached) + 3 deleted;
    // up again: 4 added.
    assert_eq!((count(Added), count(Changed), count(Deleted)), (8, 1, 3));
    let (_, changed) = seen.iter().find(|(c, _)| *c == Changed).unwrap();
    assert!(changed.detach_time.is_some());
    assert_eq!(changed.inflight, Some(1));
}

#[test]
fn vm_rings_on_netdevsim() {
    let ex = load("vm-7.3-nsim-ethtool-rings-get");
    assert_eq!(round_trip::<EthtoolMessage>(&ex), 1);
    let m = decode_genl::<EthtoolMessage>(&ex, "rings-get", None).unwrap();
    let EthtoolBody::Rings(r) = &m[0].body else {
        panic!()
    };
    assert_eq!(
        (r.rx, r.rx_max, r.tx, r.tx_max),
        (Some(512), Some(4096), Some(512), Some(4096))
    );
    assert_eq!(r.tcp_data_split, Some(2));
    assert_eq!(r.hds_thresh_max, Some(1024));
    // RINGS_SET rx = max + 1: the kernel's own validation and words.
    let e = decode_genl::<EthtoolMessage>(
        &load("vm-7.3-nsim-ethtool-rings-set-refused"),
        "rings-set",
        Some("eth0"),
    )
    .unwrap_err();
    let k = e.kernel().unwrap();
    assert_eq!(k.errno, libc::EINVAL);
    assert_eq!(
        k.message.as_deref(),
        Some("requested ring size exceeds maximum")
    );
    assert_eq!(k.attr.as_deref(), Some("rings.rx"));
}

#[test]
fn vm_channels_and_qstats_on_netdevsim() {
    let ex = load("vm-7.3-nsim-ethtool-channels-get");
    assert_eq!(round_trip::<EthtoolMessage>(&ex), 1);
    let ex = load("vm-7.3-nsim-netdev-qstats-get-queue-dump");
    assert_eq!(round_trip::<NetdevMessage>(&ex), 8);
    let qs: Vec<_> = decode_genl::<NetdevMessage>(&ex, "qstats-get", None)
        .unwrap()
        .into_iter()
        .map(|m| match m.body {
            NetdevBody::Qstats(q) => q,
            b => panic!("{b:?}"),
        })
        .collect();
    let rx: Vec<_> = qs.iter().filter(|q| q.queue_type == Some(0)).collect();
    assert_eq!(rx.len(), 4);
    // netdevsim fills packets/bytes but not rx-alloc-fail: absent, not 0.
    assert!(
        rx.iter()
            .all(|q| q.counters.rx_packets.is_some() && q.counters.rx_alloc_fail.is_none())
    );
    let ex = load("vm-7.3-nsim-netdev-qstats-get-dev-dump");
    assert_eq!(round_trip::<NetdevMessage>(&ex), 1);
}

#[test]
fn extack_missing_attribute_and_nested_offsets() {
    // page-pool-get as a do without its required id: MISS_TYPE names it.
    for f in [
        "host-6.18-veth-netdev-page-pool-get-do-missing-id",
        "vm-7.3-nsim-netdev-page-pool-get-do-missing-id",
    ] {
        let e = decode_genl::<NetdevMessage>(&load(f), "page-pool-get", None).unwrap_err();
        let k = e.kernel().unwrap();
        assert_eq!(k.errno, libc::EINVAL, "{f}");
        assert_eq!(k.missing_type, Some(1), "{f}: page-pool id is attribute 1");
    }
    // A stats dump filtered by info.id: the offset points inside the nest.
    let e = decode_genl::<NetdevMessage>(
        &load("vm-7.3-nsim-netdev-page-pool-stats-get-dump-by-id-refused"),
        "page-pool-stats-get",
        None,
    )
    .unwrap_err();
    let k = e.kernel().unwrap();
    assert_eq!(k.errno, libc::EINVAL);
    assert_eq!(k.attr.as_deref(), Some("page-pool-stats-get.info.id"));
    // A stats do selecting by ifindex: 7.3 first finds info.id missing
    // (MISS_TYPE 1 with MISS_NEST pointing at the info nest), before its
    // "selecting by ifindex not supported" check is reached.
    let e = decode_genl::<NetdevMessage>(
        &load("vm-7.3-nsim-netdev-page-pool-stats-get-do-by-ifindex-refused"),
        "page-pool-stats-get",
        None,
    )
    .unwrap_err();
    let k = e.kernel().unwrap();
    assert_eq!(k.errno, libc::EINVAL);
    assert_eq!(k.missing_type, Some(1));
    assert_eq!(k.attr.as_deref(), Some("page-pool-stats-get.info"));
    assert!(
        e.to_string()
            .contains("missing attribute type 1 in page-pool-stats-get.info"),
        "{e}"
    );
}

#[test]
fn dump_intr_flag_is_seen() {
    let ex = load("host-6.18-veth-rtnl-getlink-dump");
    assert!(!ex.interrupted());
    // Hand-made from the real dump: set NLM_F_DUMP_INTR on its first message.
    let mut bytes = ex.reply_bytes();
    let flags = u16::from_ne_bytes([bytes[6], bytes[7]]) | netlink::frame::NLM_F_DUMP_INTR;
    bytes[6..8].copy_from_slice(&flags.to_ne_bytes());
    let ex = Exchange::from_reply_bytes(ex.request.clone(), &bytes).unwrap();
    assert!(ex.interrupted());
}

// ---- Linux 6.12 in the VM testbed (netdevsim, CONFIG_PAGE_POOL_STATS=y) ----

/// Every 6.12 fixture decodes, and every reply re-encodes byte for byte.
#[test]
fn vm_6_12_fixtures_round_trip() {
    let mut n = 0;
    for entry in std::fs::read_dir(DIR).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(stem) = name
            .strip_prefix("vm-6.12-nsim-")
            .and_then(|s| s.strip_suffix(".bin"))
        else {
            continue;
        };
        if stem.ends_with(".req") || stem.ends_with("-ntf") || stem.contains("rtnl") {
            continue;
        }
        let ex = load(&format!("vm-6.12-nsim-{stem}"));
        match ex.outcome().unwrap() {
            Outcome::Refused(_) => {}
            Outcome::Replies(_) if stem.starts_with("ctrl") => {
                round_trip::<CtrlMessage>(&ex);
            }
            Outcome::Replies(_) if stem.starts_with("ethtool") => {
                round_trip::<EthtoolMessage>(&ex);
            }
            Outcome::Replies(_) => {
                round_trip::<NetdevMessage>(&ex);
            }
        }
        n += 1;
    }
    assert!(n >= 15, "only {n} 6.12 fixtures");
    // 6.12 predates napi-set (6.13): the op list says so.
    let fam = family("vm-6.12-nsim-ctrl-getfamily-netdev");
    assert!(fam.op(cmd::NAPI_SET).is_none());
    assert!(fam.op(cmd::PAGE_POOL_STATS_GET).is_some());
    let ps = pools("vm-6.12-nsim-netdev-page-pool-get-dump");
    assert!(ps.iter().any(|p| p.detach_time.is_some()));
    // 6.12 ignores an info.id filter on the stats dump (7.3 refuses it).
    let ex = load("vm-6.12-nsim-netdev-page-pool-stats-get-dump-by-id-ignored");
    assert!(
        decode_genl::<NetdevMessage>(&ex, "page-pool-stats-get", None)
            .unwrap()
            .len()
            > 1
    );
    let orphans = pools("vm-6.12-nsim-orphan-netdev-page-pool-get-dump");
    assert!(orphans.iter().all(|p| p.ifindex.is_none()));
}

/// A dump decoded into the entries a previous dump left (another dump of
/// the same kind, another filter, a refused exchange) equals a fresh
/// decode: slots are overwritten whole, rejected ones reused, the rest cut.
#[test]
fn netdev_dumps_decoded_in_place_keep_nothing_stale() {
    use netlink::client as c;
    use netlink::netdev::QueueType;
    let pools = [
        "vm-7.3-nsim-netdev-page-pool-get-dump",
        "vm-7.3-nsim-orphan-netdev-page-pool-get-dump",
    ];
    for (a, b) in [(pools[0], pools[1]), (pools[1], pools[0])] {
        let mut out = c::decode_page_pools(&load(a)).unwrap();
        c::decode_page_pools_into(&load(b), &mut out).unwrap();
        assert_eq!(out, c::decode_page_pools(&load(b)).unwrap(), "{b} over {a}");
    }
    let qs = load("vm-7.3-nsim-netdev-qstats-get-queue-dump");
    let rx = |q: &netlink::netdev::Qstats| q.queue_type == Some(0);
    let all = c::decode_qstats_where(&qs, None, |_| true).unwrap();
    let only_rx = c::decode_qstats_where(&qs, None, rx).unwrap();
    assert!(only_rx.len() < all.len() && !only_rx.is_empty());
    let mut out = all.clone();
    c::decode_qstats_into(&qs, None, rx, &mut out).unwrap();
    assert_eq!(out, only_rx);
    c::decode_qstats_into(&qs, None, |_| true, &mut out).unwrap();
    assert_eq!(out, all);
    // From empty, a rejected reply takes no slot: the vector grows with
    // the kept entries only (as a pushed copy of them would).
    let mut fresh = Vec::new();
    c::decode_qstats_into(&qs, None, rx, &mut fresh).unwrap();
    assert_eq!(fresh, only_rx);
    let mut pushed = Vec::new();
    only_rx.iter().for_each(|q| pushed.push(q.clone()));
    assert_eq!(fresh.capacity(), pushed.capacity());
    let queues = load("vm-7.3-nsim-netdev-queue-get-dump");
    let tx = |q: &netlink::netdev::Queue| q.queue_type == Some(QueueType::Tx);
    let mut out = c::decode_queues_where(&queues, None, |_| true).unwrap();
    c::decode_queues_into(&queues, None, tx, &mut out).unwrap();
    assert_eq!(out, c::decode_queues_where(&queues, None, tx).unwrap());
    // A refused exchange leaves nothing behind.
    let refused = load("vm-7.3-nsim-netdev-qstats-get-do-refused");
    let mut left = all.clone();
    assert!(c::decode_qstats_into(&refused, None, |_| true, &mut left).is_err());
    assert!(left.is_empty());
}

/// The decoders' queue-type filter keeps what decoding everything and
/// keeping that type keeps, on real dumps (both types present).
#[test]
fn queue_type_filter_equals_decoding_all_and_keeping_the_type() {
    use netlink::client as c;
    let qs = load("vm-7.3-nsim-netdev-qstats-get-queue-dump");
    let queues = load("vm-7.3-nsim-netdev-queue-get-dump");
    for t in [QueueType::Rx, QueueType::Tx] {
        let raw = u32::from(t);
        let by_filter = c::decode_qstats_where(&qs, Some(t), |_| true).unwrap();
        let by_keep = c::decode_qstats_where(&qs, None, |q| q.queue_type == Some(raw)).unwrap();
        assert!(!by_filter.is_empty(), "{t:?}");
        assert_eq!(by_filter, by_keep, "{t:?}");
        let by_filter = c::decode_queues_where(&queues, Some(t), |_| true).unwrap();
        let by_keep = c::decode_queues_where(&queues, None, |q| q.queue_type == Some(t)).unwrap();
        assert!(!by_filter.is_empty(), "{t:?}");
        assert_eq!(by_filter, by_keep, "{t:?}");
        // Into a vector a previous dump filled: only the filtered entries.
        let mut out = c::decode_queues_where(&queues, None, |_| true).unwrap();
        c::decode_queues_into(&queues, Some(t), |_| true, &mut out).unwrap();
        assert_eq!(out, by_filter, "{t:?}");
    }
}

/// Where the type filter reads and where it stops, on replies built by hand
/// (framed like the recorded qstats dump: its family id, NLM_F_MULTI, DONE):
/// a reply without the type attribute is dropped; the attributes before
/// the type are framing-checked and the type's own length is; a dropped
/// reply is not read past its type (a broken attribute there fails only
/// the unfiltered decode).
#[test]
fn queue_type_filter_reads_up_to_the_type_attribute() {
    use netlink::attr::Writer;
    use netlink::client as c;
    use netlink::frame;
    let recorded = load("vm-7.3-nsim-netdev-qstats-get-queue-dump");
    let family = u16::from_ne_bytes([recorded.messages[0][4], recorded.messages[0][5]]);
    let dump = |replies: &[Vec<u8>]| {
        let mut bytes = Vec::new();
        for attrs in replies {
            let payload = frame::genl_payload(cmd::QSTATS_GET, 1, attrs);
            bytes.extend(frame::request(family, frame::NLM_F_MULTI, 1, &payload));
        }
        bytes.extend(frame::request(
            frame::NLMSG_DONE,
            frame::NLM_F_MULTI,
            1,
            &0i32.to_ne_bytes(),
        ));
        Exchange::from_reply_bytes(Vec::new(), &bytes).unwrap()
    };
    let entry = |typ: Option<u32>, id: u32| {
        let mut w = Writer::new();
        w.u32(1, 2);
        w.opt_u32(2, typ);
        w.u32(3, id);
        w.uint(8, 5);
        w.into_bytes()
    };
    // 1 is kept under Some(Rx); 2 has no type; 3 is TX with a broken
    // attribute after its type.
    let mut broken_tail = entry(Some(1), 3);
    broken_tail.extend([0xff, 0x00, 0x08, 0x00]);
    let ex = dump(&[entry(Some(0), 1), entry(None, 2), broken_tail]);
    let rx = c::decode_qstats_where(&ex, Some(QueueType::Rx), |_| true).unwrap();
    assert_eq!(rx.len(), 1);
    assert_eq!((rx[0].queue_id, rx[0].queue_type), (Some(1), Some(0)));
    assert_eq!(rx[0].counters.rx_packets, Some(5));
    let e = c::decode_qstats_where(&ex, None, |_| true).unwrap_err();
    assert!(e.to_string().contains("qstats-get"), "{e}");
    let e = c::decode_qstats_where(&ex, Some(QueueType::Tx), |_| true).unwrap_err();
    assert!(e.to_string().contains("qstats-get"), "{e}");
    // Without the broken reply, the untyped one is kept unfiltered only.
    let ex = dump(&[entry(Some(0), 1), entry(None, 2)]);
    assert_eq!(
        c::decode_qstats_where(&ex, None, |_| true).unwrap().len(),
        2
    );
    assert!(
        c::decode_qstats_where(&ex, Some(QueueType::Tx), |_| true)
            .unwrap()
            .is_empty()
    );
    // A type of the wrong size fails by its name, whatever the filter.
    let mut w = Writer::new();
    w.u32(1, 2);
    w.put(2, &[0, 0]);
    let ex = dump(&[w.into_bytes()]);
    for only in [None, Some(QueueType::Rx)] {
        let e = c::decode_qstats_where(&ex, only, |_| true).unwrap_err();
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        assert!(
            cause
                .as_deref()
                .is_some_and(|c| c.contains("qstats.queue-type")),
            "{only:?}: {e}: {cause:?}"
        );
    }
    // A broken attribute before the type fails, whatever the filter.
    let mut bytes = vec![0xff, 0x00, 0x01, 0x00];
    bytes.extend(entry(Some(1), 4));
    let ex = dump(&[bytes]);
    for only in [None, Some(QueueType::Rx)] {
        assert!(
            c::decode_qstats_where(&ex, only, |_| true).is_err(),
            "{only:?}"
        );
    }
}
