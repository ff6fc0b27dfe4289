//! The observe pass on the host, over recorded-shape bytes: what
//! `observe_pass` measures in the VM minus the sockets and the kernel, at
//! pool counts no VM here reaches (10,000).
//!
//! Input: the link, page-pool, page-pool-stats, queue and qstats (device
//! and queue) dumps and the rings/channels replies RECORDED from netdevsim
//! on Linux 7.3 (`netlink/tests/fixtures/vm-7.3-nsim-*`), replicated to
//! `--devices` devices of `--queues` RX (and TX) queues, one pool per RX
//! queue: each reply is a recorded one with its ids, ifindex, NAPI id and
//! names rewritten and re-encoded, every other attribute kept as the kernel
//! sent it. The exchanges are built once; each pass then does what a
//! daemon tick does after the sockets: decode every dump through the
//! client's `decode_*` functions, build the devices (`base_device`, rings,
//! channels) and `join` them into a `Snapshot`, `policy::decide` with the
//! shipped default policy and carried engine state, and
//! `Metrics::observe`. The `/metrics` render (`encode`) is a
//! scrape's cost, not the pass's, and is timed on its own.
//!
//! The floor is the raw floor's walk (`benches/walk.rs`) over the same
//! bytes: every attribute value read, nothing built. In the VM the floor
//! also holds the kernel's dump work; here it is userspace only, so
//! pass/floor here is a harsher ratio than the VM's.
//!
//! ```text
//! observe_replay-<hash> --devices 100 --queues 100 --passes 20
//! ```
//!
//! prints JSON lines: `replay-pass` (CPU, allocations, bytes per pass),
//! `replay-floor`, `replay-encode`, and `replay-parts` (CPU µs per pass of
//! decode, build+join, decide, metrics). `--shadow` and `--shadow-prior
//! RING` run a shadow policy after each pass as `observe_pass` does
//! (`shared/shadow.rs`) and add a `replay-shadow` line (its CPU per pass
//! and its share of the pass; `replay-pass` then includes it): the
//! shadow's cost on the host, where a profiler can see it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench binary

use benchkit::{meter, walk};
use std::alloc::System;

use netlink::GenlPayload;
use netlink::attr::{Attrs, Writer};
use netlink::client::{
    decode_channels_into, decode_genl, decode_links_into, decode_page_pool_stats_into,
    decode_page_pools_into, decode_rings_into,
};
use netlink::ctrl::{CtrlMessage, Family};
use netlink::frame::{self, NLM_F_MULTI, NLMSG_DONE};
use netlink::netdev::{NetdevBody, NetdevMessage, QueueType};
use netlink::rtnl::{Link, RTM_NEWLINK};
use netlink::socket::{Exchange, Outcome};
use nix::time::{ClockId, clock_gettime};
use policy::snapshot::{Availability, Capabilities, Snapshot};

use policy::Observation;
use policy::observer::Observer;
use pptune::publish::metrics::Metrics;
use pptune::sample::kernel_netlink::{
    PassBuffers, convert_caps, convert_channels, convert_rings, decode_pass_dev_qstats,
    decode_pass_queue_qstats, decode_pass_queues,
};
use pptune::service::{Engine, PolicyEngine};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[path = "shared/shadow.rs"]
mod shadow_setup;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../netlink/tests/fixtures/");
/// Any dynamic genl family id: the decoders do not look at it.
const NETDEV_ID: u16 = 0x1a;

fn recorded(name: &str) -> Exchange {
    let bytes = std::fs::read(format!("{FIXTURES}vm-7.3-nsim-{name}.bin"))
        .unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    Exchange::from_reply_bytes(Vec::new(), &bytes).unwrap()
}

fn payloads(ex: &Exchange) -> Vec<(u16, Vec<u8>)> {
    let Outcome::Replies(msgs) = ex.outcome().unwrap() else {
        panic!("a recorded dump was refused")
    };
    msgs.iter()
        .map(|m| (m.header.kind, m.payload.to_vec()))
        .collect()
}

fn netdev(name: &str) -> Vec<NetdevBody> {
    payloads(&recorded(name))
        .iter()
        .map(|(_, p)| NetdevMessage::from_genl_bytes(p).unwrap().body)
        .collect()
}

/// Frame replies the way a dump delivers them (NLM_F_MULTI, then DONE).
fn dump(kind: u16, payloads: impl Iterator<Item = Vec<u8>>) -> Exchange {
    let mut bytes = Vec::new();
    for p in payloads {
        bytes.extend(frame::request(kind, NLM_F_MULTI, 1, &p));
    }
    bytes.extend(frame::request(
        NLMSG_DONE,
        NLM_F_MULTI,
        1,
        &0i32.to_ne_bytes(),
    ));
    Exchange::from_reply_bytes(Vec::new(), &bytes).unwrap()
}

fn genl(cmd: u8, body: NetdevBody) -> Vec<u8> {
    NetdevMessage { cmd, body }.to_genl_bytes()
}

/// A recorded netdevsim link renamed and re-indexed as device `d`.
fn link_as(template: &[u8], d: u32) -> Vec<u8> {
    let mut out = template[..16].to_vec();
    out[4..8].copy_from_slice(&(2 + d).to_ne_bytes());
    let mut w = Writer::new();
    for a in Attrs::new(&template[16..]) {
        let a = a.unwrap();
        match a.kind {
            3 => w.string(3, &format!("eni{d}np1")),
            56 => w.string(56, &format!("netdevsim{d}")),
            54 => {
                let mut mac = a.value.to_vec();
                if let Some(last) = mac.last_mut() {
                    *last = u8::try_from(d % 256).unwrap();
                }
                let at = mac.len().saturating_sub(2);
                if let Some(b) = mac.get_mut(at) {
                    *b = u8::try_from(d / 256 % 256).unwrap();
                }
                w.put(a.raw_kind, &mac);
            }
            _ => w.put(a.raw_kind, a.value),
        }
    }
    out.extend(w.into_bytes());
    out
}

struct Input {
    links: Exchange,
    pools: Exchange,
    stats: Exchange,
    queues: Exchange,
    dev_qstats: Exchange,
    queue_qstats: Exchange,
    rings: Exchange,
    channels: Exchange,
}

impl Input {
    fn all(&self) -> [&Exchange; 8] {
        [
            &self.links,
            &self.pools,
            &self.stats,
            &self.queues,
            &self.dev_qstats,
            &self.queue_qstats,
            &self.rings,
            &self.channels,
        ]
    }

    #[allow(clippy::too_many_lines)]
    fn build(devices: u32, queues: u32) -> Self {
        use netlink::netdev::cmd;
        let links = payloads(&recorded("rtnl-getlink-dump"));
        let lo = links
            .iter()
            .find(|(_, p)| Link::parse(p).unwrap().name == "lo")
            .unwrap()
            .1
            .clone();
        // The recording's netdevsim device (netdevsim has no link kind).
        let nsim = links
            .iter()
            .find(|(_, p)| Link::parse(p).unwrap().name == "eth0")
            .unwrap()
            .1
            .clone();
        let links = dump(
            RTM_NEWLINK,
            std::iter::once(lo).chain((0..devices).map(|d| link_as(&nsim, d))),
        );

        let pool = netdev("netdev-page-pool-get-dump")
            .into_iter()
            .find_map(|b| match b {
                NetdevBody::PagePool(p) if p.ifindex.is_some() && p.detach_time.is_none() => {
                    Some(p)
                }
                _ => None,
            })
            .unwrap();
        let stat = netdev("netdev-page-pool-stats-get-dump")
            .into_iter()
            .find_map(|b| match b {
                NetdevBody::PagePoolStats(s) => Some(s),
                _ => None,
            })
            .unwrap();
        let queue_tmpl = netdev("netdev-queue-get-dump");
        let qstats_q = netdev("netdev-qstats-get-queue-dump");
        let qstats_d = netdev("netdev-qstats-get-dev-dump")
            .into_iter()
            .find_map(|b| match b {
                NetdevBody::Qstats(q) => Some(q),
                _ => None,
            })
            .unwrap();
        let rx_tx = |rx: bool| {
            queue_tmpl
                .iter()
                .find_map(|b| match b {
                    NetdevBody::Queue(q) if (q.queue_type == Some(QueueType::Rx)) == rx => {
                        Some(q.clone())
                    }
                    _ => None,
                })
                .unwrap()
        };
        let (rxq, txq) = (rx_tx(true), rx_tx(false));
        let qs = |t: u32| {
            qstats_q
                .iter()
                .find_map(|b| match b {
                    NetdevBody::Qstats(q) if q.queue_type == Some(t) => Some(q.clone()),
                    _ => None,
                })
                .unwrap()
        };
        let (rxs, txs) = (qs(0), qs(1));

        let each = || (0..devices).flat_map(move |d| (0..queues).map(move |q| (d, q)));
        let napi = |d: u32, q: u32| 8192 + d * queues + q;
        let id = |d: u32, q: u32| u64::from(d * queues + q + 1);
        let pools = dump(
            NETDEV_ID,
            each().map(|(d, q)| {
                let mut p = pool.clone();
                p.id = Some(id(d, q));
                p.ifindex = Some(2 + d);
                p.napi_id = Some(u64::from(napi(d, q)));
                genl(cmd::PAGE_POOL_GET, NetdevBody::PagePool(p))
            }),
        );
        let stats = dump(
            NETDEV_ID,
            each().map(|(d, q)| {
                let mut s = stat.clone();
                let info = s.info.get_or_insert_default();
                info.id = Some(id(d, q));
                info.ifindex = Some(2 + d);
                // Counters differ per pool, on both sides of 2^32.
                let c = &mut s.counters;
                let n = id(d, q);
                c.alloc_fast = Some(c.alloc_fast.unwrap_or(0) + n * (1 << 20));
                c.recycle_ring = Some(c.recycle_ring.unwrap_or(0) + n);
                genl(cmd::PAGE_POOL_STATS_GET, NetdevBody::PagePoolStats(s))
            }),
        );
        let queues_ex = dump(
            NETDEV_ID,
            each().flat_map(|(d, q)| {
                let mut r = rxq.clone();
                r.id = Some(q);
                r.ifindex = Some(2 + d);
                r.napi_id = Some(napi(d, q));
                let mut t = txq.clone();
                t.id = Some(q);
                t.ifindex = Some(2 + d);
                t.napi_id = Some(napi(d, q));
                [
                    genl(cmd::QUEUE_GET, NetdevBody::Queue(r)),
                    genl(cmd::QUEUE_GET, NetdevBody::Queue(t)),
                ]
            }),
        );
        let dev_qstats = dump(
            NETDEV_ID,
            (0..devices).map(|d| {
                let mut s = qstats_d.clone();
                s.ifindex = Some(2 + d);
                genl(cmd::QSTATS_GET, NetdevBody::Qstats(s))
            }),
        );
        let queue_qstats = dump(
            NETDEV_ID,
            each().flat_map(|(d, q)| {
                [rxs.clone(), txs.clone()].map(|mut s| {
                    s.ifindex = Some(2 + d);
                    s.queue_id = Some(q);
                    genl(cmd::QSTATS_GET, NetdevBody::Qstats(s))
                })
            }),
        );
        Self {
            links,
            pools,
            stats,
            queues: queues_ex,
            dev_qstats,
            queue_qstats,
            rings: recorded("ethtool-rings-get"),
            channels: recorded("ethtool-channels-get"),
        }
    }

    /// What one tick does after the sockets: decode, build, join, into
    /// the pass's reused buffers (as `NetlinkKernel`'s pass does).
    fn snapshot(&self, b: &mut PassBuffers, caps: &Capabilities, taken_at_ms: u64) -> Snapshot {
        decode_links_into(&self.links, &mut b.links).unwrap();
        decode_page_pools_into(&self.pools, &mut b.pools).unwrap();
        decode_page_pool_stats_into(&self.stats, &mut b.stats).unwrap();
        decode_pass_queues(&self.queues, &mut b.queues).unwrap();
        decode_pass_dev_qstats(&self.dev_qstats, &mut b.dev_qstats).unwrap();
        decode_pass_queue_qstats(&self.queue_qstats, &mut b.queue_qstats).unwrap();
        let mut snap = b.begin(
            caps,
            |l| l.name != "lo",
            |_, dev| {
                let driver = dev.driver.get_or_insert_default();
                driver.clear();
                driver.push_str("netdevsim");
            },
        );
        for dev in &mut snap.devices {
            // One rings-get and one channels-get reply per device, as the
            // pass asks for them.
            decode_rings_into(&self.rings, Some(&dev.name), &mut b.rings).unwrap();
            dev.rings = Availability::Available(convert_rings(&b.rings));
            decode_channels_into(&self.channels, Some(&dev.name), &mut b.channels).unwrap();
            dev.channels = Availability::Available(convert_channels(&b.channels));
        }
        b.finish(&mut snap, taken_at_ms);
        snap
    }

    /// The floor: every message of every exchange walked, nothing built.
    fn walk(&self) -> u64 {
        let mut acc = 0u64;
        for ex in self.all() {
            for m in &ex.messages {
                for msg in frame::split(m) {
                    let msg = msg.unwrap();
                    let skip = if msg.header.kind == RTM_NEWLINK {
                        16
                    } else {
                        4
                    };
                    if let Some(attrs) = msg.payload.get(skip..) {
                        acc = acc.wrapping_add(walk::touch(attrs, 0));
                    }
                }
            }
        }
        acc
    }
}

fn cpu_ns() -> u128 {
    clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID).map_or(0, |t| {
        u128::try_from(t.tv_sec()).unwrap() * 1_000_000_000 + u128::try_from(t.tv_nsec()).unwrap()
    })
}

#[allow(clippy::cast_precision_loss)]
fn main() {
    let devices: u32 = meter::arg("--devices").map_or(100, |s| s.parse().unwrap());
    let queues: u32 = meter::arg("--queues").map_or(100, |s| s.parse().unwrap());
    let passes: u64 = meter::arg("--passes").map_or(20, |s| s.parse().unwrap());
    let prior: Option<u32> = meter::arg("--shadow-prior").map(|s| s.parse().unwrap());
    let with_shadow = prior.is_some() || std::env::args().any(|a| a == "--shadow");
    let input = Input::build(devices, queues);
    let pools = usize::try_from(devices * queues).unwrap();
    // The recorded kernel's families, as the capability probe sees them.
    let family = |name: &str| {
        let m = decode_genl::<CtrlMessage>(&recorded(name), "getfamily", None).unwrap();
        Family::from_reply(m.into_iter().next().unwrap()).unwrap()
    };
    let caps = convert_caps(&netlink::Capabilities {
        kernel_release: "7.3.0".to_owned(),
        netdev_ops: Some(family("ctrl-getfamily-netdev").ops),
        ethtool_ops: Some(family("ctrl-getfamily-ethtool").ops),
        cap_net_admin: true,
    });
    let policy = config::default_policy().unwrap();
    let interval = policy.timing.interval;
    let metrics = Metrics::new();
    let mut engine = (PolicyEngine::default(), policy::Plan::default());
    let mut shadow = with_shadow.then(|| shadow_setup::bench_shadow(&policy, prior));
    let mut buffers = PassBuffers::default();
    let first = input.snapshot(&mut buffers, &caps, 0);
    assert_eq!(
        first
            .devices
            .iter()
            .map(|d| d.pools().count())
            .sum::<usize>(),
        pools
    );
    let mut observer = Observer::default();
    observer.next(&first, std::time::Duration::ZERO);
    metrics.observe(&first, observer.deltas());
    observer.keep(first, std::time::Duration::ZERO);
    // One warm-up tick, so the engine state and the metrics maps exist.
    let warm = |i: u64| interval * u32::try_from(i).unwrap();
    let allocs = || GLOBAL.stats().allocations as u128;
    let tick = |i: u64,
                observer: &mut Observer,
                b: &mut PassBuffers,
                engine: &mut (PolicyEngine, policy::Plan),
                shadow: &mut Option<pptune::service::shadow::Shadow>,
                parts: &mut [u128; 7]| {
        let (t0, a0) = (cpu_ns(), allocs());
        let mut snap = input.snapshot(b, &caps, i * 1000);
        let (t1, a1) = (cpu_ns(), allocs());
        // The pass's deltas, once, for the engine and the metrics (in the
        // engine's part: it computed them itself before).
        let obs = Observation {
            pass: observer.next(&snap, warm(i)),
            local_time: None,
            history: &[],
            overrides: &[],
            originals: &[],
            backoff: &policy::engine::NO_BACKOFF,
        };
        // The daemon's engine, refilling the plan it kept (`service`'s `tick`).
        let (engine, plan) = engine;
        engine.decide_into(&policy, &obs, plan);
        let (t2, a2) = (cpu_ns(), allocs());
        metrics.observe(&snap, observer.deltas());
        let (t3, a3) = (cpu_ns(), allocs());
        if prior.is_some() {
            shadow_setup::as_ice(&mut snap);
        }
        let t4 = cpu_ns();
        if let Some(s) = shadow {
            let live = (&mut *observer, &mut snap);
            s.pass(live, (warm(i), interval, None), &[], &metrics);
        }
        parts[6] += cpu_ns() - t4;
        parts[0] += t1 - t0;
        parts[1] += t2 - t1;
        parts[2] += t3 - t2;
        parts[3] += a1 - a0;
        parts[4] += a2 - a1;
        parts[5] += a3 - a2;
        if let Some(spent) = observer.keep(snap, warm(i)) {
            b.recycle(spent);
        }
        plan.decisions.len()
    };
    let mut parts = [0u128; 7];
    tick(
        1,
        &mut observer,
        &mut buffers,
        &mut engine,
        &mut shadow,
        &mut parts,
    );
    parts = [0; 7];
    let m = meter::Meter::start(GLOBAL);
    let mut decisions = 0;
    for i in 2..passes + 2 {
        decisions += tick(
            i,
            &mut observer,
            &mut buffers,
            &mut engine,
            &mut shadow,
            &mut parts,
        );
    }
    let r = m.stop(passes);
    let bytes: usize = input
        .all()
        .iter()
        .flat_map(|e| &e.messages)
        .map(Vec::len)
        .sum();
    println!(
        "{}",
        r.json(
            "replay-pass",
            pools,
            &format!(",\"devices\":{devices},\"netlink_bytes\":{bytes},\"decisions\":{decisions}")
        )
    );
    let per = |ns: u128| ns as f64 / passes as f64 / 1e3;
    println!(
        "{{\"tool\":\"replay-parts\",\"pools\":{pools},\"snapshot_us\":{:.1},\"decide_us\":{:.1},\"metrics_us\":{:.1},\"snapshot_allocs\":{:.1},\"decide_allocs\":{:.1},\"metrics_allocs\":{:.1}}}",
        per(parts[0]),
        per(parts[1]),
        per(parts[2]),
        per(parts[3] * 1000),
        per(parts[4] * 1000),
        per(parts[5] * 1000)
    );
    if with_shadow {
        // The shadow beside the pass (outside the parts above, inside
        // `replay-pass`): its CPU per pass and its share of the pass
        // without it.
        let pass: u128 = parts[..3].iter().sum();
        println!(
            "{{\"tool\":\"replay-shadow\",\"pools\":{pools},\"prior\":{},\"shadow_us\":{:.1},\"shadow_per_pass\":{:.4}}}",
            prior.map_or("null".to_owned(), |r| r.to_string()),
            per(parts[6]),
            parts[6] as f64 / pass as f64
        );
    }
    let m = meter::Meter::start(GLOBAL);
    let mut acc = 0u64;
    for _ in 0..passes {
        acc = acc.wrapping_add(input.walk());
    }
    let r = m.stop(passes);
    println!(
        "{}",
        r.json("replay-floor", pools, &format!(",\"checksum\":{acc}"))
    );
    let m = meter::Meter::start(GLOBAL);
    let mut len = 0;
    for _ in 0..passes {
        len = metrics.encode().unwrap().len();
    }
    let r = m.stop(passes);
    println!(
        "{}",
        r.json("replay-encode", pools, &format!(",\"metrics_bytes\":{len}"))
    );
}
