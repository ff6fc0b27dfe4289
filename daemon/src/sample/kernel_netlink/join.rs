//! The pure join: a pass's netdev dumps (page pools, their stats, queues,
//! qstats) put together per device, linear in pools and queues. No I/O:
//! the pass and the replay bench call it on bytes already read.

use netlink::netdev::{PagePool, PagePoolStats, Qstats, Queue, QueueType};
use policy::snapshot::{Device, Pool, RxQueue};

use super::convert::{convert_pool, convert_qstats, provider};

/// The one queue type a pass keeps of the queue-get and queue-scope
/// qstats-get dumps. The decoders drop the other type's replies at their
/// type attribute, unread past it (the TX halves are half the replies).
pub const PASS_QUEUE_TYPE: QueueType = QueueType::Rx;

/// A pass's decode of a queue-get dump: the device queues of
/// [`PASS_QUEUE_TYPE`]. The pass and the replay bench both call it.
pub fn decode_pass_queues(
    ex: &netlink::socket::Exchange,
    out: &mut Vec<Queue>,
) -> netlink::Result<()> {
    netlink::client::decode_queues_into(ex, Some(PASS_QUEUE_TYPE), |q| q.ifindex.is_some(), out)
}

/// A pass's decode of a device-scope qstats-get dump: the device totals.
pub fn decode_pass_dev_qstats(
    ex: &netlink::socket::Exchange,
    out: &mut Vec<Qstats>,
) -> netlink::Result<()> {
    netlink::client::decode_qstats_into(ex, None, |q| q.queue_id.is_none(), out)
}

/// A pass's decode of a queue-scope qstats-get dump: the device queues of
/// [`PASS_QUEUE_TYPE`].
pub fn decode_pass_queue_qstats(
    ex: &netlink::socket::Exchange,
    out: &mut Vec<Qstats>,
) -> netlink::Result<()> {
    netlink::client::decode_qstats_into(
        ex,
        Some(PASS_QUEUE_TYPE),
        |q| q.ifindex.is_some() && q.queue_id.is_some(),
        out,
    )
}

/// The netdev dumps of one sampling pass, as the kernel gave them.
#[derive(Debug, Clone, Copy)]
pub struct Dumps<'a> {
    pub pools: &'a [PagePool],
    pub stats: &'a [PagePoolStats],
    pub queues: &'a [Queue],
    /// qstats-get, device scope.
    pub dev_qstats: &'a [Qstats],
    /// qstats-get, queue scope.
    pub queue_qstats: &'a [Qstats],
}

/// Indexes [`join_into`] builds each pass, kept so their capacity is
/// reused (positions into the pass's dumps, never references).
#[derive(Debug, Default)]
pub struct JoinScratch {
    /// Pool id -> position in the stats dump.
    stats: DumpIndex<u64>,
    /// (ifindex, RX queue id) -> position in the queue-scope qstats dump.
    rx_qstats: DumpIndex<(u32, u32)>,
    /// (ifindex, position in the pool dump), sorted: a device's pools are
    /// one run, in dump order.
    pools_by_dev: Vec<(u32, usize)>,
    /// (ifindex, position in the queue dump) of RX queues, sorted likewise.
    rx_by_dev: Vec<(u32, usize)>,
    /// (NAPI id, queue position) of one device's queues, sorted.
    by_napi: Vec<(u32, usize)>,
}

/// Key -> position in one dump, for lookups that come mostly in the dump's
/// own order (the kernel walks the same devices, pools and queues for the
/// pool and stats dumps, and for the queue and qstats dumps): the entry
/// after the last one found is tried first, and a hash index of the whole
/// dump is built only at the first lookup that misses it (a device the
/// other dump skipped, a reordered dump). A key the dump repeats (the
/// kernel does not) resolves to the entry the walk reached, else the first.
#[derive(Debug, Default)]
struct DumpIndex<K> {
    next: usize,
    built: bool,
    map: foldhash::HashMap<K, usize>,
}

impl<K: std::hash::Hash + Eq + Copy> DumpIndex<K> {
    /// Starts a pass over a new dump (the index, if built, is stale).
    fn reset(&mut self) {
        self.next = 0;
        self.built = false;
    }

    fn find<T>(
        &mut self,
        entries: &[T],
        key_of: impl Fn(&T) -> Option<K>,
        key: K,
    ) -> Option<usize> {
        let at = match entries.get(self.next) {
            Some(e) if key_of(e) == Some(key) => self.next,
            _ => {
                if !self.built {
                    self.map.clear();
                    self.map.reserve(entries.len());
                    for (at, e) in entries.iter().enumerate() {
                        if let Some(k) = key_of(e) {
                            self.map.entry(k).or_insert(at);
                        }
                    }
                    self.built = true;
                }
                *self.map.get(&key)?
            }
        };
        self.next = at + 1;
        Some(at)
    }
}

/// The position of the first queue of `by_napi` (sorted (NAPI id,
/// position) pairs) with NAPI id `napi`. `hint` is one past the last
/// lookup's entry in `by_napi`: the entry there (pools in queue order)
/// and the last one itself (several pools on one queue) are tried before
/// a binary search.
fn queue_of_napi(by_napi: &[(u32, usize)], napi: u32, hint: &mut usize) -> Option<usize> {
    let first_with = |i: usize| {
        by_napi.get(i).is_some_and(|&(n, _)| n == napi)
            && (i == 0 || by_napi.get(i - 1).is_some_and(|&(n, _)| n != napi))
    };
    let i = [hint.wrapping_sub(1), *hint]
        .into_iter()
        .find(|&i| first_with(i))
        .or_else(|| {
            let i = by_napi.partition_point(|&(n, _)| n < napi);
            first_with(i).then_some(i)
        })?;
    *hint = i + 1;
    by_napi.get(i).map(|&(_, at)| at)
}

/// The entries of a sorted `(ifindex, position)` index for one device.
fn run_of(index: &[(u32, usize)], ifindex: u32) -> &[(u32, usize)] {
    let from = index.partition_point(|(i, _)| *i < ifindex);
    let to = index.partition_point(|(i, _)| *i <= ifindex);
    index.get(from..to).unwrap_or_default()
}

/// Join the dumps onto `devices` (already carrying link data, rings and
/// channels): RX queues from queue-get, qstats by ifindex/queue, pools by
/// ifindex and then NAPI id onto the queue reporting the same NAPI id
/// (several queues may share a NAPI: the lowest-numbered one gets the
/// pool); pools with no NAPI id or an unknown one go to `unmapped_pools`.
/// Returns the orphaned pools (no ifindex). Sorts devices by ifindex,
/// queues and pools by id.
pub fn join(devices: &mut [Device], d: &Dumps<'_>) -> Vec<Pool> {
    let mut orphans = Vec::new();
    join_into(&mut JoinScratch::default(), devices, d, &mut orphans);
    orphans
}

/// [`join`], reusing `scratch`'s indexes and what the devices already hold:
/// each device's `rx_queues` become exactly its RX queues in the dump (the
/// queue slots and their pool vectors refilled in place), its
/// `unmapped_pools` are replaced, and `orphans` is refilled.
pub fn join_into(
    scratch: &mut JoinScratch,
    devices: &mut [Device],
    d: &Dumps<'_>,
    orphans: &mut Vec<Pool>,
) {
    let JoinScratch {
        stats,
        rx_qstats,
        pools_by_dev,
        rx_by_dev,
        by_napi,
    } = scratch;
    // The join stays linear in the number of pools and queues (a per-queue
    // scan of every queue's qstats would be quadratic): stats and qstats
    // are found where the dump walk expects them, through an index only
    // when not (`DumpIndex`).
    stats.reset();
    let stats_key = |s: &PagePoolStats| s.info.as_ref().and_then(|i| i.id);
    let mut pool_of = |p: &PagePool| {
        let s =
            p.id.and_then(|id| stats.find(d.stats, stats_key, id))
                .and_then(|at| d.stats.get(at));
        convert_pool(p, s)
    };
    rx_qstats.reset();
    // Sorting (ifindex, position) pairs keeps each device's entries in
    // dump order without a stable sort's scratch allocation.
    pools_by_dev.clear();
    pools_by_dev.extend(
        d.pools
            .iter()
            .enumerate()
            .filter_map(|(at, p)| Some((p.ifindex?, at))),
    );
    pools_by_dev.sort_unstable();
    rx_by_dev.clear();
    rx_by_dev.extend(
        d.queues.iter().enumerate().filter_map(|(at, q)| {
            (q.queue_type == Some(PASS_QUEUE_TYPE)).then_some((q.ifindex?, at))
        }),
    );
    rx_by_dev.sort_unstable();
    for dev in devices.iter_mut() {
        let ifindex = dev.ifindex;
        dev.qstats = d
            .dev_qstats
            .iter()
            .find(|q| q.ifindex == Some(ifindex) && q.queue_id.is_none())
            .map(convert_qstats);
        fill_rx_queues(dev, run_of(rx_by_dev, ifindex), d, rx_qstats);
        place_pools(dev, run_of(pools_by_dev, ifindex), d, by_napi, &mut pool_of);
        for q in &mut dev.rx_queues {
            sort_pools(&mut q.pools);
        }
        sort_pools(&mut dev.unmapped_pools);
    }
    devices.sort_by_key(|d| d.ifindex);
    orphans.clear();
    orphans.extend(d.pools.iter().filter(|p| p.ifindex.is_none()).map(pool_of));
    sort_pools(orphans);
}

/// `dev.rx_queues` become exactly its RX queues in the dump (`entries`: the
/// device's run of the queue index), each with its qstats; the slots and
/// their pool vectors are refilled in place. Sorted by id.
fn fill_rx_queues(
    dev: &mut Device,
    entries: &[(u32, usize)],
    d: &Dumps<'_>,
    rx_qstats: &mut DumpIndex<(u32, u32)>,
) {
    let ifindex = dev.ifindex;
    let rx_type = Some(u32::from(PASS_QUEUE_TYPE));
    let qstats_key = |s: &Qstats| (s.queue_type == rx_type).then_some((s.ifindex?, s.queue_id?));
    let mut n = 0;
    for q in entries.iter().filter_map(|&(_, at)| d.queues.get(at)) {
        let Some(id) = q.id else { continue };
        let queue = RxQueue {
            id,
            napi_id: q.napi_id,
            provider: provider(q.dmabuf, q.io_uring.as_ref()),
            qstats: rx_qstats
                .find(d.queue_qstats, qstats_key, (ifindex, id))
                .and_then(|at| d.queue_qstats.get(at))
                .map(convert_qstats),
            pools: Vec::new(),
        };
        match dev.rx_queues.get_mut(n) {
            Some(slot) => {
                // Keep the slot's pool vector (its capacity) for this
                // pass's pools.
                let mut pools = std::mem::take(&mut slot.pools);
                pools.clear();
                *slot = RxQueue { pools, ..queue };
            }
            None => dev.rx_queues.push(queue),
        }
        n += 1;
    }
    dev.rx_queues.truncate(n);
    // The kernel lists a device's queues by id; sort only if not.
    if !dev.rx_queues.is_sorted_by_key(|q| q.id) {
        dev.rx_queues.sort_by_key(|q| q.id);
    }
}

/// The device's pools (`entries`: its run of the pool index) onto the
/// queue reporting the same NAPI id (the lowest-numbered one when queues
/// share a NAPI), the others to `unmapped_pools`.
fn place_pools(
    dev: &mut Device,
    entries: &[(u32, usize)],
    d: &Dumps<'_>,
    by_napi: &mut Vec<(u32, usize)>,
    pool_of: &mut impl FnMut(&PagePool) -> Pool,
) {
    // NAPI id -> position of the first queue with it (queues sorted by id,
    // as the scan below used to find it).
    by_napi.clear();
    by_napi.extend(
        dev.rx_queues
            .iter()
            .enumerate()
            .filter_map(|(at, q)| Some((q.napi_id?, at))),
    );
    if !by_napi.is_sorted() {
        by_napi.sort_unstable();
    }
    let mut hint = 0;
    dev.unmapped_pools.clear();
    for p in entries.iter().filter_map(|&(_, at)| d.pools.get(at)) {
        let pool = pool_of(p);
        let slot = pool
            .napi_id
            .and_then(|n| queue_of_napi(by_napi, u32::try_from(n).ok()?, &mut hint))
            .and_then(|at| dev.rx_queues.get_mut(at));
        match slot {
            Some(q) => {
                // A queue almost always has one pool: its first one
                // takes one slot, not the four of Vec's first growth
                // (three idle slots per queue per snapshot).
                if q.pools.capacity() == 0 {
                    q.pools.reserve_exact(1);
                }
                q.pools.push(pool);
            }
            None => dev.unmapped_pools.push(pool),
        }
    }
}

/// Pools by id; the dump lists them so already, then nothing is moved.
pub(super) fn sort_pools(pools: &mut [Pool]) {
    if !pools.is_sorted_by_key(|p| p.id) {
        pools.sort_by_key(|p| p.id);
    }
}
