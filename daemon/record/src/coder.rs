//! The snapshot coder of the recording (docs/recording.md, "The
//! snapshot block"): a device's rarely changing facts go into the record's
//! CBOR ([`SnapRec`]); the layout of its queues and pools (the *shape*) and
//! every number of the pass go into a binary block after it, as columns of
//! zigzag LEB128 varints of the difference from the same slot in the
//! previous pass. The shape is written only when it changed.
//!
//! [`Coder`] is the delta memory of one segment; writer and reader keep one
//! each and update it the same way, pass by pass. The reader decodes into a
//! caller's [`Snapshot`], reusing its vectors, and keeps its own numbers in
//! place: a steady pass allocates nothing.

use policy::reuse::Reused as _;
use std::collections::HashMap;

use policy::counters::{COUNT, NAMES};
use policy::snapshot::{
    Availability, Capabilities, Device, DeviceId, LinkStats, Pool, PoolStats, QueueStats, Snapshot,
};

use super::format::{CapsRec, DevMeta, SnapRec, caps_flags, caps_rec, channels, dev_meta, rings};
use super::varint::{Reader, get_columns, put, put_columns};

pub use super::varint::DecodeError;

mod shape;
use shape::*;

/// Numbers per device: link stats (rx packets, bytes, dropped, missed
/// errors, fifo errors), then device qstats (rx packets, bytes, alloc
/// fail, hw drops, hw drop overruns).
const DEV_SLOTS: usize = 10;
/// Numbers per RX queue: its qstats.
const QUEUE_SLOTS: usize = 5;
/// A pool's numbers before its counters: inflight, inflight_mem.
const POOL_GAUGES: usize = 2;

/// What identifies each slot row, to carry a delta base across a change of
/// layout: devices by ifindex, queues by (ifindex, id), pools by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Keys {
    devs: Vec<u32>,
    queues: Vec<(u32, u32)>,
    pools: Vec<u64>,
}

/// The numbers of one pass, column by column (slot `c` of row `i` at
/// `c * rows + i`), as they are written: devices, queues, pools.
#[derive(Debug, Clone, Default)]
struct Vals {
    devs: Vec<u64>,
    queues: Vec<u64>,
    pools: Vec<u64>,
}

/// The delta-coding memory of one segment.
#[derive(Debug, Default)]
pub struct Coder {
    caps: Option<CapsRec>,
    meta: HashMap<u32, DevMeta>,
    /// The previous pass's shape: as written (writer), parsed (reader).
    shape_bytes: Vec<u8>,
    shape: Option<Shape>,
    keys: Keys,
    /// The previous pass's numbers (absolute).
    vals: Vals,
    /// Counters per pool in this segment (the writer's: [`COUNT`]).
    counters: usize,
    /// Reader side: the recorded counter index of each of this build's
    /// counters (`None`: the recording does not have it).
    map: Vec<Option<usize>>,
    // Writer scratch, kept to avoid allocating per pass.
    scratch_shape: Vec<u8>,
    scratch_vals: Vals,
}

impl Coder {
    /// A writer for this build's counters.
    #[must_use]
    pub fn writer() -> Self {
        Self {
            counters: COUNT,
            ..Self::default()
        }
    }

    /// A reader for a segment whose `Start` listed `counters`.
    #[must_use]
    pub fn for_counters(counters: &[String]) -> Self {
        Self {
            counters: counters.len(),
            map: NAMES
                .iter()
                .map(|n| counters.iter().position(|c| c == n))
                .collect(),
            ..Self::default()
        }
    }

    /// Whether a `Start` set this reader up.
    #[must_use]
    pub fn started(&self) -> bool {
        !self.map.is_empty()
    }

    /// This build's counter names, for a `Start`.
    #[must_use]
    pub fn counter_names() -> Vec<String> {
        NAMES.iter().map(|s| (*s).to_owned()).collect()
    }

    /// How many devices' facts the coder holds.
    #[cfg(test)]
    pub(crate) fn devices_remembered(&self) -> usize {
        self.meta.len()
    }

    fn pool_width(&self) -> usize {
        POOL_GAUGES + self.counters
    }

    /// Encodes `s`, updating the memory.
    pub fn encode(&mut self, s: &Snapshot) -> SnapRec {
        let caps = caps_rec(&s.capabilities);
        let caps = (self.caps.as_ref() != Some(&caps)).then(|| {
            self.caps = Some(caps.clone());
            caps
        });
        let metas = s
            .devices
            .iter()
            .map(|d| {
                let meta = dev_meta(d);
                (self.meta.get(&d.ifindex) != Some(&meta)).then(|| {
                    self.meta.insert(d.ifindex, meta.clone());
                    Box::new(meta)
                })
            })
            .collect();
        // What the writer remembers is what exists now: the facts of a
        // device that is gone are dropped (one that comes back under its
        // ifindex has them written again, which every reader takes), so a
        // host whose devices come and go keeps the memory of the devices it
        // has, not of every one it had since the segment began.
        if self.meta.len() > s.devices.len() {
            let live: std::collections::HashSet<u32> =
                s.devices.iter().map(|d| d.ifindex).collect();
            self.meta.retain(|ifindex, _| live.contains(ifindex));
            self.meta.let_go();
        }
        let mut shape = std::mem::take(&mut self.scratch_shape);
        shape.clear();
        write_shape(&mut shape, s);
        shape.let_go();
        let mut cur = std::mem::take(&mut self.scratch_vals);
        gather(s, &mut cur);
        for v in [&mut cur.devs, &mut cur.queues, &mut cur.pools] {
            v.let_go();
        }
        let same = shape == self.shape_bytes;
        let mut block = Vec::with_capacity(cur.pools.len() * 3 + shape.len() + 16);
        if same {
            block.push(0);
        } else {
            let keys = keys_of(s);
            realign(&mut self.vals, &self.keys, &keys, POOL_GAUGES + COUNT);
            self.keys = keys;
            block.push(1);
            put(&mut block, shape.len() as u64);
            block.extend_from_slice(&shape);
        }
        put_columns(&mut block, &cur.devs, &self.vals.devs);
        put_columns(&mut block, &cur.queues, &self.vals.queues);
        put_columns(&mut block, &cur.pools, &self.vals.pools);
        self.scratch_vals = std::mem::replace(&mut self.vals, cur);
        self.scratch_shape = std::mem::replace(&mut self.shape_bytes, shape);
        SnapRec {
            taken_at_ms: s.taken_at_ms,
            caps,
            metas,
            block,
        }
    }

    /// Decodes `r` (its CBOR part) and `block` (the binary block after it)
    /// into `out`, reusing `out`'s vectors; updates the memory.
    ///
    /// # Errors
    /// A device or the capabilities refer to a description the segment
    /// never gave, or the block is malformed (a corrupt segment).
    pub fn decode_into(
        &mut self,
        r: &SnapRec,
        block: &[u8],
        out: &mut Snapshot,
    ) -> Result<(), DecodeError> {
        if let Some(c) = &r.caps {
            self.caps = Some(c.clone());
        }
        let caps = self.caps.as_ref().ok_or(DecodeError::NoCaps)?;
        set_caps(&mut out.capabilities, caps);
        out.taken_at_ms = r.taken_at_ms;
        let mut rd = Reader(block);
        match rd.byte()? {
            0 => {}
            1 => {
                let len = usize::try_from(rd.varint()?).map_err(|_| DecodeError::Block("size"))?;
                let shape = parse_shape(&mut Reader(rd.take(len)?))?;
                let keys = keys_of_shape(&shape);
                let width = self.pool_width();
                // Every number of the layout takes at least a byte of what
                // follows it: a layout that needs more is corrupt, and is
                // refused before its tables are allocated (a crafted Start
                // with 10^6 counters and 20,000 pools asked for 160 GB).
                let numbers = keys
                    .pools
                    .len()
                    .checked_mul(width)
                    .and_then(|n| n.checked_add(keys.queues.len().checked_mul(QUEUE_SLOTS)?))
                    .and_then(|n| n.checked_add(keys.devs.len().checked_mul(DEV_SLOTS)?));
                if numbers.is_none_or(|n| n > rd.0.len()) {
                    return Err(DecodeError::Block(
                        "the layout has more numbers than bytes after it",
                    ));
                }
                realign(&mut self.vals, &self.keys, &keys, width);
                self.keys = keys;
                self.shape = Some(shape);
            }
            _ => return Err(DecodeError::Block("unknown layout flag")),
        }
        let shape = self.shape.as_ref().ok_or(DecodeError::NoShape)?;
        if r.metas.len() != shape.devs.len() {
            return Err(DecodeError::Block("device count differs from the layout"));
        }
        get_columns(&mut rd, &mut self.vals.devs)?;
        get_columns(&mut rd, &mut self.vals.queues)?;
        get_columns(&mut rd, &mut self.vals.pools)?;
        if !rd.0.is_empty() {
            return Err(DecodeError::Block("trailing bytes"));
        }
        for (ds, m) in shape.devs.iter().zip(&r.metas) {
            if let Some(m) = m {
                self.meta.insert(ds.ifindex, (**m).clone());
            }
        }
        fill(self, out)
    }
}

/// Writes `s` into `out` from the coder's shape and numbers.
fn fill(c: &Coder, out: &mut Snapshot) -> Result<(), DecodeError> {
    let Some(shape) = &c.shape else {
        return Err(DecodeError::NoShape);
    };
    let width = c.pool_width();
    let identity = c.counters == COUNT && c.map.iter().enumerate().all(|(i, m)| *m == Some(i));
    let map = (!identity).then_some(c.map.as_slice());
    let (mut qi, mut pi) = (0, 0);
    let np = shape.pools.len();
    if c.vals.pools.len() != np * width
        || c.vals.queues.len() != shape.queues.len() * QUEUE_SLOTS
        || c.vals.devs.len() != shape.devs.len() * DEV_SLOTS
    {
        return Err(DecodeError::Block("numbers do not match the layout"));
    }
    // Only with pools: the counter list's length comes from the recording.
    let mut row = if np > 0 {
        vec![0_u64; width]
    } else {
        Vec::new()
    };
    let mut fill_pools = |v: &mut Vec<Pool>, n: usize| -> Result<(), DecodeError> {
        v.resize_with(n, Pool::default);
        for p in v.iter_mut() {
            let ps = shape
                .pools
                .get(pi)
                .ok_or(DecodeError::Block("pool count"))?;
            for (slot, col) in row.iter_mut().zip(c.vals.pools.chunks_exact(np)) {
                *slot = col[pi];
            }
            fill_pool(p, ps, &row, map);
            pi += 1;
        }
        Ok(())
    };
    out.devices.resize_with(shape.devs.len(), Device::default);
    let nd = shape.devs.len();
    let nq = shape.queues.len();
    for (di, (d, ds)) in out.devices.iter_mut().zip(&shape.devs).enumerate() {
        let row: [u64; DEV_SLOTS] = std::array::from_fn(|col| c.vals.devs[col * nd + di]);
        let m = c
            .meta
            .get(&ds.ifindex)
            .ok_or(DecodeError::NoMeta(ds.ifindex))?;
        set_meta(d, ds.ifindex, m);
        d.link_stats = ds.link.then(|| LinkStats {
            rx_packets: row[0],
            rx_bytes: row[1],
            rx_dropped: row[2],
            rx_missed_errors: row[3],
            rx_fifo_errors: row[4],
        });
        d.qstats = qstats_of(ds.qmask, &row[5..]);
        d.rx_queues.resize_with(ds.queues, Default::default);
        for q in &mut d.rx_queues {
            let qs = shape
                .queues
                .get(qi)
                .ok_or(DecodeError::Block("queue count"))?;
            let row: [u64; QUEUE_SLOTS] = std::array::from_fn(|col| c.vals.queues[col * nq + qi]);
            qi += 1;
            q.id = qs.id;
            q.napi_id = qs.napi;
            q.provider = qs.provider;
            q.qstats = qstats_of(qs.qmask, &row);
            fill_pools(&mut q.pools, qs.pools)?;
        }
        fill_pools(&mut d.unmapped_pools, ds.unmapped)?;
    }
    fill_pools(&mut out.orphan_pools, shape.orphans)?;
    if pi != shape.pools.len() {
        return Err(DecodeError::Block("pool count"));
    }
    Ok(())
}

/// `map`: where each of this build's counters is in `row` (`None`: in the
/// same order, all there).
fn fill_pool(p: &mut Pool, s: &PoolShape, row: &[u64], map: Option<&[Option<usize>]>) {
    let has = |f: u8| s.flags & f != 0;
    p.id = s.id;
    p.ifindex = has(P_IFINDEX).then_some(s.ifindex);
    p.napi_id = has(P_NAPI).then_some(s.napi);
    p.detach_time = has(P_DETACH).then_some(s.detach);
    p.provider = s.provider;
    p.inflight = has(P_INFLIGHT).then_some(row[0]);
    p.inflight_mem = has(P_INFLIGHT_MEM).then_some(row[1]);
    p.stats = has(P_STATS).then(|| {
        let counters = &row[POOL_GAUGES..];
        let mine = match (map, <[u64; COUNT]>::try_from(counters)) {
            // Written by a build with the same counters: as they are.
            (None, Ok(same)) => same,
            _ => {
                let mut mine = [0_u64; COUNT];
                for (slot, at) in mine.iter_mut().zip(map.unwrap_or_default()) {
                    if let Some(i) = at {
                        *slot = counters.get(*i).copied().unwrap_or(0);
                    }
                }
                mine
            }
        };
        PoolStats::from_values(mine)
    });
}

fn set_caps(c: &mut Capabilities, r: &CapsRec) {
    c.kernel_release.clone_from(&r.kernel_release);
    for (f, v) in caps_flags(c).into_iter().zip(r.flags) {
        *f = v;
    }
}

/// A device's described facts, reusing its strings.
fn set_meta(d: &mut Device, ifindex: u32, m: &DevMeta) {
    d.ifindex = ifindex;
    d.name.clone_from(&m.name);
    let DeviceId {
        bus,
        parent,
        perm_addr,
        name_fallback,
    } = &mut d.id;
    bus.clone_from(&m.id.bus);
    parent.clone_from(&m.id.parent);
    perm_addr.clone_from(&m.id.perm_addr);
    name_fallback.clone_from(&m.id.name_fallback);
    d.driver.clone_from(&m.driver);
    d.kind.clone_from(&m.kind);
    d.oper_state = m.oper_state;
    d.admin_up = m.admin_up;
    d.master = m.master;
    d.mtu = m.mtu;
    d.speed_mbps = m.speed_mbps;
    d.model.clone_from(&m.model);
    d.firmware.clone_from(&m.firmware);
    d.iommu = m.iommu;
    d.num_rx_queues = m.num_rx_queues;
    d.rings = match &m.rings {
        Ok(r) => Availability::Available(rings(r)),
        Err(Some(why)) => Availability::Unavailable(why.clone()),
        Err(None) => Availability::NotSampled,
    };
    d.channels = match &m.channels {
        Ok(c) => Availability::Available(channels(c)),
        Err(Some(why)) => Availability::Unavailable(why.clone()),
        Err(None) => Availability::NotSampled,
    };
}

fn qstats_mask(q: Option<&QueueStats>) -> u8 {
    q.map_or(0, |q| {
        [
            q.rx_packets,
            q.rx_bytes,
            q.rx_alloc_fail,
            q.rx_hw_drops,
            q.rx_hw_drop_overruns,
        ]
        .iter()
        .enumerate()
        .fold(Q_SOME, |m, (i, v)| if v.is_some() { m | 1 << i } else { m })
    })
}

fn qstats_vals(q: Option<&QueueStats>) -> [u64; 5] {
    q.map_or([0; 5], |q| {
        [
            q.rx_packets,
            q.rx_bytes,
            q.rx_alloc_fail,
            q.rx_hw_drops,
            q.rx_hw_drop_overruns,
        ]
        .map(|v| v.unwrap_or(0))
    })
}

fn qstats_of(mask: u8, v: &[u64]) -> Option<QueueStats> {
    if mask & Q_SOME == 0 {
        return None;
    }
    let f = |i: usize| (mask & (1 << i) != 0).then(|| v.get(i).copied().unwrap_or(0));
    Some(QueueStats {
        rx_packets: f(0),
        rx_bytes: f(1),
        rx_alloc_fail: f(2),
        rx_hw_drops: f(3),
        rx_hw_drop_overruns: f(4),
    })
}

fn all_pools(s: &Snapshot) -> impl Iterator<Item = &Pool> {
    s.devices
        .iter()
        .flat_map(Device::pools)
        .chain(&s.orphan_pools)
}

fn keys_of(s: &Snapshot) -> Keys {
    Keys {
        devs: s.devices.iter().map(|d| d.ifindex).collect(),
        queues: s
            .devices
            .iter()
            .flat_map(|d| d.rx_queues.iter().map(|q| (d.ifindex, q.id)))
            .collect(),
        pools: all_pools(s).map(|p| p.id).collect(),
    }
}

fn keys_of_shape(s: &Shape) -> Keys {
    let mut queues = Vec::with_capacity(s.queues.len());
    let mut q = s.queues.iter();
    for d in &s.devs {
        queues.extend(q.by_ref().take(d.queues).map(|x| (d.ifindex, x.id)));
    }
    Keys {
        devs: s.devs.iter().map(|d| d.ifindex).collect(),
        queues,
        pools: s.pools.iter().map(|p| p.id).collect(),
    }
}

/// The numbers of `s`, column by column, in layout order.
fn gather(s: &Snapshot, v: &mut Vals) {
    let nd = s.devices.len();
    let nq: usize = s.devices.iter().map(|d| d.rx_queues.len()).sum();
    let np = all_pools(s).count();
    for (vals, n) in [
        (&mut v.devs, nd * DEV_SLOTS),
        (&mut v.queues, nq * QUEUE_SLOTS),
        (&mut v.pools, np * (POOL_GAUGES + COUNT)),
    ] {
        vals.clear();
        vals.resize(n, 0);
    }
    let mut qi = 0;
    for (di, d) in s.devices.iter().enumerate() {
        let l = d.link_stats.unwrap_or_default();
        let row = [
            l.rx_packets,
            l.rx_bytes,
            l.rx_dropped,
            l.rx_missed_errors,
            l.rx_fifo_errors,
        ]
        .into_iter()
        .chain(qstats_vals(d.qstats.as_ref()));
        for (col, x) in row.enumerate() {
            v.devs[col * nd + di] = x;
        }
        for q in &d.rx_queues {
            for (col, x) in qstats_vals(q.qstats.as_ref()).into_iter().enumerate() {
                v.queues[col * nq + qi] = x;
            }
            qi += 1;
        }
    }
    for (pi, p) in all_pools(s).enumerate() {
        let stats = p.stats.map_or([0; COUNT], |s| s.values());
        let row = [p.inflight.unwrap_or(0), p.inflight_mem.unwrap_or(0)]
            .into_iter()
            .chain(stats);
        for (col, x) in row.enumerate() {
            v.pools[col * np + pi] = x;
        }
    }
}

/// Moves the previous pass's rows to where the same keys sit in the new
/// layout; a key the previous pass did not have starts from zero (its
/// numbers are then written absolute).
fn realign(v: &mut Vals, old: &Keys, new: &Keys, pool_width: usize) {
    fn rows<K: std::hash::Hash + Eq + Copy>(
        vals: &[u64],
        old: &[K],
        new: &[K],
        width: usize,
    ) -> Vec<u64> {
        let mut at = HashMap::with_capacity(old.len());
        for (i, k) in old.iter().enumerate() {
            at.entry(*k).or_insert(i);
        }
        let (no, nn) = (old.len(), new.len());
        let mut out = vec![0; nn * width];
        if vals.len() != no * width {
            return out;
        }
        for (j, k) in new.iter().enumerate() {
            if let Some(&i) = at.get(k) {
                for col in 0..width {
                    out[col * nn + j] = vals[col * no + i];
                }
            }
        }
        out
    }
    v.devs = rows(&v.devs, &old.devs, &new.devs, DEV_SLOTS);
    v.queues = rows(&v.queues, &old.queues, &new.queues, QUEUE_SLOTS);
    v.pools = rows(&v.pools, &old.pools, &new.pools, pool_width);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recording's counter list is as long as its Start says: 10^6 names
    /// and a layout of 20,000 pools (three bytes each, in a 60 KB block)
    /// asked realign for 2·10^10 numbers, 160 GB, and aborted replay. The
    /// layout is now refused before anything of its size is allocated:
    /// every number takes at least one byte of the block.
    #[test]
    fn a_layout_with_more_numbers_than_bytes_is_refused_before_allocation() {
        let rec = Coder::writer().encode(&Snapshot::default());
        let mut shape = Vec::new();
        put(&mut shape, 0); // no devices
        put(&mut shape, 20_000); // orphan pools
        for id in 0..20_000_u64 {
            put(&mut shape, id);
            shape.push(0); // flags
            put(&mut shape, 0); // no provider
        }
        let mut block = vec![1];
        put(&mut block, shape.len() as u64);
        block.extend_from_slice(&shape);
        let names = vec!["x".to_owned(); 1_000_000];
        let mut c = Coder::for_counters(&names);
        let mut out = Snapshot::default();
        let e = c.decode_into(&rec, &block, &mut out).unwrap_err();
        assert!(
            matches!(e, DecodeError::Block(m) if m.contains("more numbers than bytes")),
            "{e}"
        );
        // The same layout with this build's counters and one byte per
        // number decodes.
        let mut c = Coder::writer();
        let width = POOL_GAUGES + COUNT;
        block.extend(std::iter::repeat_n(0, 20_000 * width));
        c.decode_into(&rec, &block, &mut out).unwrap();
        assert_eq!(out.orphan_pools.len(), 20_000);
    }
}
