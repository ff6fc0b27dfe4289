//! Decode cost of the two page-pool dumps at 10,000 pools.
//!
//! The input is SYNTHESISED with this crate's own encoder (no kernel with
//! 10,000 pools exists to capture from): one `page-pool-get` reply and one
//! `page-pool-stats-get` reply per pool, every attribute the 7.3 kernel
//! fills for a netdevsim/ppsim pool, counter values on both sides of the
//! 4/8-byte `uint` boundary, framed as `NLM_F_MULTI` messages and ended by
//! `NLMSG_DONE` exactly as a dump arrives. The benchmark then runs the
//! client's decode path (`decode_genl`: split, outcome, per-message parse).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench file

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use netlink::GenlPayload;
use netlink::client::decode_genl;
use netlink::frame::{self, NLM_F_MULTI, NLMSG_DONE};
use netlink::netdev::{
    NetdevBody, NetdevMessage, PagePool, PagePoolInfo, PagePoolStats, PoolCounters, cmd,
};
use netlink::socket::Exchange;

/// Any dynamic genl family id: the decoder does not look at it.
const NETDEV_ID: u16 = 0x1a;

fn pool(i: u64) -> PagePool {
    PagePool {
        id: Some(i + 1),
        ifindex: Some(2 + u32::try_from(i / 100).unwrap()),
        napi_id: Some(8192 + i),
        inflight: Some(256 + i % 64),
        inflight_mem: Some((256 + i % 64) * 4096),
        ..PagePool::default()
    }
}

fn stats(i: u64) -> PagePoolStats {
    // Half the pools have counters past 2^32 (8-byte uint), half below.
    let big = if i.is_multiple_of(2) { 1 << 33 } else { 0 };
    PagePoolStats {
        info: Some(PagePoolInfo {
            id: Some(i + 1),
            ifindex: Some(2 + u32::try_from(i / 100).unwrap()),
            other: Vec::new(),
        }),
        counters: PoolCounters {
            alloc_fast: Some(big + 1_000_000 + i),
            alloc_slow: Some(4_000 + i),
            alloc_slow_high_order: Some(0),
            alloc_empty: Some(3_000 + i),
            alloc_refill: Some(5_000 + i),
            alloc_waive: Some(0),
            recycle_cached: Some(big + 900_000 + i),
            recycle_cache_full: Some(12),
            recycle_ring: Some(80_000 + i),
            recycle_ring_full: Some(25_000 + i),
            recycle_released_refcnt: Some(7),
        },
        other: Vec::new(),
    }
}

/// Frame replies the way a dump delivers them (seq 1, NLM_F_MULTI, DONE).
fn dump(msgs: impl Iterator<Item = NetdevMessage>, request: &NetdevMessage) -> Exchange {
    let mut bytes = Vec::new();
    for m in msgs {
        bytes.extend(frame::request(
            NETDEV_ID,
            NLM_F_MULTI,
            1,
            &m.to_genl_bytes(),
        ));
    }
    bytes.extend(frame::request(
        NLMSG_DONE,
        NLM_F_MULTI,
        1,
        &0i32.to_ne_bytes(),
    ));
    let req = frame::request(NETDEV_ID, frame::NLM_F_DUMP, 1, &request.to_genl_bytes());
    Exchange::from_reply_bytes(req, &bytes).unwrap()
}

fn pools_dump(n: u64) -> Exchange {
    dump(
        (0..n).map(|i| NetdevMessage {
            cmd: cmd::PAGE_POOL_GET,
            body: NetdevBody::PagePool(pool(i)),
        }),
        &NetdevMessage::page_pool_get(None),
    )
}

fn stats_dump(n: u64) -> Exchange {
    dump(
        (0..n).map(|i| NetdevMessage {
            cmd: cmd::PAGE_POOL_STATS_GET,
            body: NetdevBody::PagePoolStats(stats(i)),
        }),
        &NetdevMessage::page_pool_stats_get(None),
    )
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    for n in [2048u64, 10_000] {
        let pools = pools_dump(n);
        let st = stats_dump(n);
        // The decoder must give back what was encoded (a bench of a broken
        // decoder measures nothing).
        let back = decode_genl::<NetdevMessage>(&st, "page-pool-stats-get", None).unwrap();
        assert_eq!(back.len(), usize::try_from(n).unwrap());
        assert_eq!(back[3].body, NetdevBody::PagePoolStats(stats(3)));
        let bytes: usize = pools
            .messages
            .iter()
            .chain(&st.messages)
            .map(Vec::len)
            .sum();
        g.throughput(Throughput::Elements(n));
        g.bench_with_input(BenchmarkId::new("page-pool-get", n), &pools, |b, ex| {
            b.iter(|| decode_genl::<NetdevMessage>(ex, "page-pool-get", None).unwrap());
        });
        g.bench_with_input(BenchmarkId::new("page-pool-stats-get", n), &st, |b, ex| {
            b.iter(|| decode_genl::<NetdevMessage>(ex, "page-pool-stats-get", None).unwrap());
        });
        g.bench_with_input(
            BenchmarkId::new("both-dumps", n),
            &(pools, st),
            |b, (p, s)| {
                b.iter(|| {
                    let a = decode_genl::<NetdevMessage>(p, "page-pool-get", None).unwrap();
                    let b = decode_genl::<NetdevMessage>(s, "page-pool-stats-get", None).unwrap();
                    (a, b)
                });
            },
        );
        eprintln!("decode/{n}: {bytes} bytes of netlink messages in the two dumps");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
