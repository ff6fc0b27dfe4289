//! The floor for one observe pass: the same netlink requests pptune's pass
//! makes (link dump, page-pool-get dump, page-pool-stats-get dump,
//! queue-get dump, qstats-get device and queue dumps, then rings-get and
//! channels-get per device), made with nothing but `netlink-sys` sockets
//! and hand-built messages, one reused receive buffer, and a walk over every
//! attribute that reads each value (no structs, no maps). The kernel's share
//! of the work is the same as pptune's; what is left is the least a
//! userspace reader can spend.
//!
//! Not a criterion bench: `benches/observe-cost.sh` runs the built binary
//! inside the VM (it needs a kernel with page pools):
//!
//! ```text
//! raw_floor-<hash> --passes 200      # prints one JSON line
//! ```
//!
//! It does not make pptune's per-device `ETHTOOL_GDRVINFO` ioctl (not
//! netlink) nor read /proc for the capability probe.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench binary
#![allow(clippy::cast_possible_truncation)]

use benchkit::meter;
use benchkit::walk::{attrs, touch};
use std::alloc::System;

use netlink_sys::{Socket, SocketAddr};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const NETLINK_ROUTE: isize = 0;
const NETLINK_GENERIC: isize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const GENL_ID_CTRL: u16 = 0x10;
const NLA_F_NESTED: u16 = 1 << 15;

struct Sock {
    s: Socket,
    seq: u32,
    buf: Vec<u8>,
    req: Vec<u8>,
}

fn put_attr(out: &mut Vec<u8>, kind: u16, val: &[u8]) {
    let len = 4 + val.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(val);
    out.resize(out.len() + (len.next_multiple_of(4) - len), 0);
}

impl Sock {
    fn open(proto: isize) -> Self {
        let mut s = Socket::new(proto).unwrap();
        s.bind_auto().unwrap();
        s.set_ext_ack(true).unwrap();
        s.set_cap_ack(true).unwrap();
        s.connect(&SocketAddr::new(0, 0)).unwrap();
        Self {
            s,
            seq: 0,
            buf: Vec::with_capacity(64 * 1024),
            req: Vec::with_capacity(256),
        }
    }

    /// Send `payload` (family header + attributes) and call `each` with
    /// every reply message (type, payload) until DONE or the ack.
    fn exchange(
        &mut self,
        kind: u16,
        flags: u16,
        payload: &[u8],
        mut each: impl FnMut(u16, &[u8]),
    ) {
        self.seq += 1;
        let len = 16 + payload.len();
        self.req.clear();
        self.req.extend_from_slice(&(len as u32).to_ne_bytes());
        self.req.extend_from_slice(&kind.to_ne_bytes());
        self.req
            .extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
        self.req.extend_from_slice(&self.seq.to_ne_bytes());
        self.req.extend_from_slice(&0u32.to_ne_bytes());
        self.req.extend_from_slice(payload);
        self.s.send(&self.req, 0).unwrap();
        loop {
            self.buf.clear();
            let n = self.s.recv(&mut self.buf, 0).unwrap();
            let mut b = &self.buf[..n];
            while b.len() >= 16 {
                let mlen = u32::from_ne_bytes(b[0..4].try_into().unwrap()) as usize;
                let mkind = u16::from_ne_bytes([b[4], b[5]]);
                let seq = u32::from_ne_bytes(b[8..12].try_into().unwrap());
                assert!(mlen >= 16 && mlen <= b.len(), "bad frame");
                if seq == self.seq {
                    match mkind {
                        NLMSG_DONE => return,
                        // An ack, or a refusal: pptune's pass tolerates
                        // refused qstats dumps (netdevsim answers
                        // EOPNOTSUPP), so the floor does too.
                        NLMSG_ERROR => return,
                        _ => each(mkind, &b[16..mlen]),
                    }
                }
                b = &b[mlen.next_multiple_of(4).min(b.len())..];
            }
        }
    }

    fn genl(
        &mut self,
        family: u16,
        cmd: u8,
        version: u8,
        flags: u16,
        attrs: &[u8],
        acc: &mut u64,
    ) -> usize {
        let mut p = Vec::with_capacity(4 + attrs.len());
        p.extend_from_slice(&[cmd, version, 0, 0]);
        p.extend_from_slice(attrs);
        let mut n = 0;
        self.exchange(family, flags, &p, |_, m| {
            n += 1;
            *acc = acc.wrapping_add(touch(&m[4..], 0));
        });
        n
    }

    fn family_id(&mut self, name: &str) -> u16 {
        let mut a = Vec::new();
        let mut z = name.as_bytes().to_vec();
        z.push(0);
        put_attr(&mut a, 2, &z); // CTRL_ATTR_FAMILY_NAME
        let mut p = vec![3u8, 2, 0, 0]; // CTRL_CMD_GETFAMILY
        p.extend_from_slice(&a);
        let mut id = 0;
        self.exchange(GENL_ID_CTRL, NLM_F_ACK, &p, |_, m| {
            for (k, v) in attrs(&m[4..]) {
                if k == 1 {
                    id = u16::from_ne_bytes([v[0], v[1]]); // CTRL_ATTR_FAMILY_ID
                }
            }
        });
        assert_ne!(id, 0, "family {name} missing");
        id
    }
}

struct Floor {
    route: Sock,
    ctrl_ids: (u16, u16),
    netdev: Sock,
    ethtool: Sock,
}

impl Floor {
    fn new() -> Self {
        let mut ctrl = Sock::open(NETLINK_GENERIC);
        let ctrl_ids = (ctrl.family_id("netdev"), ctrl.family_id("ethtool"));
        Self {
            route: Sock::open(NETLINK_ROUTE),
            ctrl_ids,
            netdev: Sock::open(NETLINK_GENERIC),
            ethtool: Sock::open(NETLINK_GENERIC),
        }
    }

    /// One pass; returns (pools seen, checksum).
    fn pass(&mut self) -> (usize, u64) {
        let mut acc = 0u64;
        let mut ifindexes: Vec<u32> = Vec::with_capacity(64);
        let ifi = [0u8; 16];
        self.route
            .exchange(RTM_GETLINK, NLM_F_DUMP, &ifi, |kind, m| {
                if kind != RTM_NEWLINK || m.len() < 16 {
                    return;
                }
                let index = u32::from_ne_bytes(m[4..8].try_into().unwrap());
                let mut lo = false;
                for (k, v) in attrs(&m[16..]) {
                    acc = acc.wrapping_add(v.len() as u64);
                    if k == 3 && v.starts_with(b"lo\0") {
                        lo = true; // IFLA_IFNAME
                    }
                }
                if !lo {
                    ifindexes.push(index);
                }
            });
        let (nd, et) = self.ctrl_ids;
        let pools = self.netdev.genl(nd, 5, 1, NLM_F_DUMP, &[], &mut acc); // page-pool-get
        self.netdev.genl(nd, 9, 1, NLM_F_DUMP, &[], &mut acc); // page-pool-stats-get
        self.netdev.genl(nd, 10, 1, NLM_F_DUMP, &[], &mut acc); // queue-get
        self.netdev.genl(nd, 12, 1, NLM_F_DUMP, &[], &mut acc); // qstats-get, device
        let mut scope = Vec::new();
        put_attr(&mut scope, 4, &1u32.to_ne_bytes()); // NETDEV_A_QSTATS_SCOPE = queue
        self.netdev.genl(nd, 12, 1, NLM_F_DUMP, &scope, &mut acc); // qstats-get, queue
        for i in ifindexes {
            let mut hdr = Vec::new();
            put_attr(&mut hdr, 1, &i.to_ne_bytes()); // ETHTOOL_A_HEADER_DEV_INDEX
            let mut a = Vec::new();
            put_attr(&mut a, 1 | NLA_F_NESTED, &hdr); // ETHTOOL_A_*_HEADER
            self.ethtool.genl(et, 15, 1, NLM_F_ACK, &a, &mut acc); // rings-get
            self.ethtool.genl(et, 17, 1, NLM_F_ACK, &a, &mut acc); // channels-get
        }
        (pools, acc)
    }
}

fn main() {
    let passes: u64 = meter::arg("--passes").map_or(100, |s| s.parse().unwrap());
    let mut floor = Floor::new();
    // One warm-up pass (page faults of the first buffers, socket setup).
    let (pools, _) = floor.pass();
    let m = meter::Meter::start(GLOBAL);
    let mut acc = 0u64;
    for _ in 0..passes {
        acc = acc.wrapping_add(floor.pass().1);
    }
    let r = m.stop(passes);
    println!(
        "{}",
        r.json("raw-floor", pools, &format!(",\"checksum\":{}", acc % 1000))
    );
}
