//! What a pass reuses: the netdev dump requests, encoded once, and the
//! steady pass's buffers (replies decoded in place, the joined snapshot
//! refilled), taken for a pass and put back after it.

use netlink::netdev::{PagePool, PagePoolStats, QSTATS_SCOPE_QUEUE, Qstats, Queue};
use netlink::rtnl::Link;
use policy::reuse::Reused as _;
use policy::snapshot::{Capabilities, Device, Snapshot};

use super::{Dumps, JoinScratch, base_device, fill_device, join_into};

/// The genl payloads of a full pass's netdev dumps, encoded once (they
/// never change; only the sequence number does, and the socket writes it).
#[derive(Debug)]
pub(super) struct DumpRequests {
    pub(super) page_pools: Vec<u8>,
    pub(super) page_pool_stats: Vec<u8>,
    pub(super) queues: Vec<u8>,
    pub(super) dev_qstats: Vec<u8>,
    pub(super) queue_qstats: Vec<u8>,
}

impl DumpRequests {
    pub(super) fn new() -> Self {
        use netlink::GenlPayload as _;
        use netlink::netdev::NetdevMessage;
        Self {
            page_pools: NetdevMessage::page_pool_get(None).to_genl_bytes(),
            page_pool_stats: NetdevMessage::page_pool_stats_get(None).to_genl_bytes(),
            queues: NetdevMessage::queue_get(None).to_genl_bytes(),
            dev_qstats: NetdevMessage::qstats_get(None, 0).to_genl_bytes(),
            queue_qstats: NetdevMessage::qstats_get(None, QSTATS_SCOPE_QUEUE).to_genl_bytes(),
        }
    }
}

/// What a sampling pass decodes and builds into, kept between passes so
/// that a steady pass allocates next to nothing whatever the number of
/// pools: the exchange buffers, the decoded dumps, the join's indexes, and
/// a spent snapshot handed back through [`Kernel::recycle`], whose
/// devices, queues, pool vectors and strings are refilled in place.
#[derive(Debug, Default)]
pub struct PassBuffers {
    pub ex: netlink::socket::Exchange,
    pub links: Vec<Link>,
    pub pools: Vec<PagePool>,
    pub stats: Vec<PagePoolStats>,
    pub queues: Vec<Queue>,
    pub dev_qstats: Vec<Qstats>,
    pub queue_qstats: Vec<Qstats>,
    /// The last device's rings and channels replies, decoded in place.
    pub rings: netlink::ethtool::Rings,
    pub channels: netlink::ethtool::Channels,
    join: JoinScratch,
    spare: Option<Snapshot>,
}

impl PassBuffers {
    /// Give back a snapshot no longer needed; the next pass refills it.
    ///
    /// Buffers reused from pass to pass follow [`policy::reuse`]: when
    /// the last link dump held under half the links the buffers were
    /// grown for (a container host's burst of veths came and went), every
    /// buffer is let go (the dump buffer, link, join and reply vectors,
    /// filled in several steps, are judged by the links); the snapshot's
    /// vectors are judged by what each holds, every time: the daemon keeps
    /// two snapshots in turn (this pass's and the previous one), and the
    /// one away when the links shrank must be cut when it comes back.
    pub fn recycle(&mut self, mut s: Snapshot) {
        if policy::reuse::oversized(self.links.capacity(), self.links.len()) {
            *self = Self::default();
        }
        s.devices.let_go();
        s.orphan_pools.let_go();
        self.spare = Some(s);
    }

    /// The pass's snapshot, started: one device per link of
    /// [`PassBuffers::links`] that `select` accepts, filled from its link
    /// ([`fill_device`]: rings and channels not yet sampled) and its
    /// driver set by `driver` (which may reuse the slot's string), on the
    /// spare snapshot's allocations when there is one.
    pub fn begin(
        &mut self,
        capabilities: &Capabilities,
        select: impl Fn(&Link) -> bool,
        mut identify: impl FnMut(&Link, &mut Device),
    ) -> Snapshot {
        let mut snap = self.spare.take().unwrap_or_default();
        copy_capabilities(&mut snap.capabilities, capabilities);
        let mut n = 0;
        for link in self.links.iter().filter(|l| select(l)) {
            match snap.devices.get_mut(n) {
                Some(dev) => fill_device(dev, link),
                None => snap.devices.push(base_device(link, None)),
            }
            if let Some(dev) = snap.devices.get_mut(n) {
                identify(link, dev);
            }
            n += 1;
        }
        snap.devices.truncate(n);
        snap
    }

    /// Join the decoded dumps onto `snap`'s devices ([`join_into`]).
    pub fn finish(&mut self, snap: &mut Snapshot, taken_at_ms: u64) {
        let dumps = Dumps {
            pools: &self.pools,
            stats: &self.stats,
            queues: &self.queues,
            dev_qstats: &self.dev_qstats,
            queue_qstats: &self.queue_qstats,
        };
        join_into(
            &mut self.join,
            &mut snap.devices,
            &dumps,
            &mut snap.orphan_pools,
        );
        snap.taken_at_ms = taken_at_ms;
    }
}

/// `dst` made equal to `src`, reusing the release string's buffer.
fn copy_capabilities(dst: &mut Capabilities, src: &Capabilities) {
    let Capabilities {
        kernel_release,
        netdev_family,
        page_pool_get,
        page_pool_stats,
        queue_get,
        napi_get,
        qstats_get,
        ethtool_family,
        cap_net_admin,
    } = src;
    dst.kernel_release.clone_from(kernel_release);
    dst.netdev_family = *netdev_family;
    dst.page_pool_get = *page_pool_get;
    dst.page_pool_stats = *page_pool_stats;
    dst.queue_get = *queue_get;
    dst.napi_get = *napi_get;
    dst.qstats_get = *qstats_get;
    dst.ethtool_family = *ethtool_family;
    dst.cap_net_admin = *cap_net_admin;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst of links that went away lets the buffers go; a host that
    /// keeps its links keeps them (a steady pass allocates nothing).
    #[test]
    fn a_burst_that_went_away_lets_the_buffers_go() {
        let mut b = PassBuffers::default();
        b.links.resize(1000, Link::default());
        let mut snap = Snapshot::default();
        snap.devices.reserve(1000);
        b.links.truncate(600);
        b.recycle(snap);
        assert!(b.links.capacity() >= 1000, "600 of 1000 links: kept");
        let snap = b.spare.take().unwrap_or_default();
        b.links.truncate(10);
        b.recycle(snap);
        assert_eq!(b.links.capacity(), 0, "10 of 1000 links: let go");
        assert!(
            b.spare.as_ref().is_some_and(|s| s.devices.capacity() == 0),
            "the spare snapshot cut to what it holds"
        );
    }

    /// The daemon keeps two snapshots in turn: the one away (the previous
    /// pass's) when the links shrank comes back after the buffers were let
    /// go, and is cut then, by what it holds.
    #[test]
    fn the_snapshot_away_when_the_links_shrank_is_cut_when_it_comes_back() {
        let mut b = PassBuffers::default();
        b.links.resize(1000, Link::default());
        let mut away = Snapshot::default();
        away.devices.reserve(1000);
        away.orphan_pools.reserve(1000);
        b.links.truncate(10);
        b.recycle(Snapshot::default());
        assert_eq!(b.links.capacity(), 0, "let go");
        b.recycle(away);
        let s = b.spare.take().unwrap_or_default();
        assert!(s.devices.capacity() < 100, "{}", s.devices.capacity());
        assert!(s.orphan_pools.capacity() < 100);
    }
}
