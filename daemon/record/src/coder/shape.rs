//! The shape of a pass in the recording (formats 2 and 3; docs/recording.md, "The
//! snapshot block"): the layout of its devices, queues and pools, written
//! only when it changed, and parsed back on the reader side.

use policy::snapshot::{MemoryProvider, Pool, Snapshot};

use super::{DecodeError, qstats_mask};
use crate::varint::{Reader, put};

// Presence bits of the shape.
pub(super) const Q_SOME: u8 = 1 << 5;
pub(super) const P_INFLIGHT: u8 = 1;
pub(super) const P_INFLIGHT_MEM: u8 = 1 << 1;
pub(super) const P_STATS: u8 = 1 << 2;
pub(super) const P_IFINDEX: u8 = 1 << 3;
pub(super) const P_NAPI: u8 = 1 << 4;
pub(super) const P_DETACH: u8 = 1 << 5;

/// One device's place in the shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DevShape {
    pub(super) ifindex: u32,
    pub(super) link: bool,
    pub(super) qmask: u8,
    pub(super) queues: usize,
    pub(super) unmapped: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct QueueShape {
    pub(super) id: u32,
    pub(super) napi: Option<u32>,
    pub(super) provider: Option<MemoryProvider>,
    pub(super) qmask: u8,
    pub(super) pools: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct PoolShape {
    pub(super) id: u64,
    pub(super) flags: u8,
    pub(super) ifindex: u32,
    pub(super) napi: u64,
    pub(super) detach: u64,
    pub(super) provider: Option<MemoryProvider>,
}

/// The layout of a pass, parsed (reader side).
#[derive(Debug, Clone, Default)]
pub(super) struct Shape {
    pub(super) devs: Vec<DevShape>,
    pub(super) queues: Vec<QueueShape>,
    pub(super) pools: Vec<PoolShape>,
    pub(super) orphans: usize,
}

pub(super) fn provider_tag(b: &mut Vec<u8>, p: Option<MemoryProvider>) {
    match p {
        None => put(b, 0),
        Some(MemoryProvider::Dmabuf { id }) => {
            put(b, 1);
            put(b, u64::from(id));
        }
        Some(MemoryProvider::IoUring { rx_buf_len: None }) => put(b, 2),
        Some(MemoryProvider::IoUring {
            rx_buf_len: Some(l),
        }) => {
            put(b, 3);
            put(b, l);
        }
    }
}

pub(super) fn get_provider(r: &mut Reader<'_>) -> Result<Option<MemoryProvider>, DecodeError> {
    Ok(match r.varint()? {
        0 => None,
        1 => Some(MemoryProvider::Dmabuf { id: r.u32()? }),
        2 => Some(MemoryProvider::IoUring { rx_buf_len: None }),
        3 => Some(MemoryProvider::IoUring {
            rx_buf_len: Some(r.varint()?),
        }),
        _ => return Err(DecodeError::Block("unknown memory provider")),
    })
}

pub(super) fn opt_plus_one(v: Option<u64>) -> u64 {
    v.map_or(0, |x| x.wrapping_add(1))
}

pub(super) fn pool_shape(b: &mut Vec<u8>, p: &Pool) {
    let mut flags = 0;
    for (on, f) in [
        (p.inflight.is_some(), P_INFLIGHT),
        (p.inflight_mem.is_some(), P_INFLIGHT_MEM),
        (p.stats.is_some(), P_STATS),
        (p.ifindex.is_some(), P_IFINDEX),
        (p.napi_id.is_some(), P_NAPI),
        (p.detach_time.is_some(), P_DETACH),
    ] {
        if on {
            flags |= f;
        }
    }
    put(b, p.id);
    b.push(flags);
    if let Some(i) = p.ifindex {
        put(b, u64::from(i));
    }
    if let Some(n) = p.napi_id {
        put(b, n);
    }
    if let Some(t) = p.detach_time {
        put(b, t);
    }
    provider_tag(b, p.provider);
}

/// The layout of `s`: devices, their queues and pools, the orphans.
pub(super) fn write_shape(b: &mut Vec<u8>, s: &Snapshot) {
    put(b, s.devices.len() as u64);
    for d in &s.devices {
        put(b, u64::from(d.ifindex));
        b.push(u8::from(d.link_stats.is_some()));
        b.push(qstats_mask(d.qstats.as_ref()));
        put(b, d.rx_queues.len() as u64);
        for q in &d.rx_queues {
            put(b, u64::from(q.id));
            put(b, opt_plus_one(q.napi_id.map(u64::from)));
            provider_tag(b, q.provider);
            b.push(qstats_mask(q.qstats.as_ref()));
            put(b, q.pools.len() as u64);
            for p in &q.pools {
                pool_shape(b, p);
            }
        }
        put(b, d.unmapped_pools.len() as u64);
        for p in &d.unmapped_pools {
            pool_shape(b, p);
        }
    }
    put(b, s.orphan_pools.len() as u64);
    for p in &s.orphan_pools {
        pool_shape(b, p);
    }
}

pub(super) fn parse_pool(r: &mut Reader<'_>) -> Result<PoolShape, DecodeError> {
    let id = r.varint()?;
    let flags = r.byte()?;
    let has = |f: u8| flags & f != 0;
    Ok(PoolShape {
        id,
        flags,
        ifindex: if has(P_IFINDEX) { r.u32()? } else { 0 },
        napi: if has(P_NAPI) { r.varint()? } else { 0 },
        detach: if has(P_DETACH) { r.varint()? } else { 0 },
        provider: get_provider(r)?,
    })
}

/// A count of pools and the pools; returns the count.
pub(super) fn parse_pools(
    r: &mut Reader<'_>,
    pools: &mut Vec<PoolShape>,
) -> Result<usize, DecodeError> {
    let n = r.count()?;
    for _ in 0..n {
        pools.push(parse_pool(r)?);
    }
    Ok(n)
}

pub(super) fn parse_shape(r: &mut Reader<'_>) -> Result<Shape, DecodeError> {
    let mut s = Shape::default();
    let n = r.count()?;
    for _ in 0..n {
        let ifindex = r.u32()?;
        let link = r.byte()? != 0;
        let qmask = r.byte()?;
        let nq = r.count()?;
        for _ in 0..nq {
            let id = r.u32()?;
            let napi = match r.varint()? {
                0 => None,
                v => Some(u32::try_from(v - 1).map_err(|_| DecodeError::Block("napi id"))?),
            };
            let provider = get_provider(r)?;
            let qmask = r.byte()?;
            let np = parse_pools(r, &mut s.pools)?;
            s.queues.push(QueueShape {
                id,
                napi,
                provider,
                qmask,
                pools: np,
            });
        }
        let nu = parse_pools(r, &mut s.pools)?;
        s.devs.push(DevShape {
            ifindex,
            link,
            qmask,
            queues: nq,
            unmapped: nu,
        });
    }
    s.orphans = parse_pools(r, &mut s.pools)?;
    if !r.0.is_empty() {
        return Err(DecodeError::Block("trailing layout bytes"));
    }
    Ok(s)
}
