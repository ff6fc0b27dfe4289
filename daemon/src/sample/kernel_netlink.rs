//! The real [`Kernel`]: `netlink::Client` replies converted into
//! `policy::Snapshot`.
//!
//! A sampling pass is a handful of dumps whatever the number of pools:
//! links, page-pool, page-pool-stats, queue-get, qstats (device and queue
//! scope), then rings and channels per selected device. Pools join RX queues
//! through their NAPI id (page-pool has no queue attribute); pools with no
//! NAPI id or one no queue reports go to the device's `unmapped_pools`;
//! pools without an ifindex (orphaned to loopback) to `orphan_pools`.

use netlink::netdev::{PagePool, PagePoolStats, QSTATS_SCOPE_QUEUE, Qstats, Queue};
use netlink::rtnl::Link;
use netlink::{Client, Notifications};
use policy::snapshot::{Availability, Capabilities, Channels, Device, Rings, Snapshot};
use policy::{ChannelField, RingField};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::sample::{Kernel, KernelEvent, SampleError, SampleScope, SetError};

mod convert;
mod identity;
mod join;
use convert::convert_event;
pub use convert::{
    base_device, convert_caps, convert_channels, convert_pool, convert_rings, fill_device,
    pool_stats,
};
pub use join::{
    Dumps, JoinScratch, PASS_QUEUE_TYPE, decode_pass_dev_qstats, decode_pass_queue_qstats,
    decode_pass_queues, join, join_into,
};

/// [`Kernel`] over netlink.
#[derive(Debug)]
pub struct NetlinkKernel {
    client: Client,
    events: Mutex<Option<Notifications>>,
    origin: Instant,
    /// The capability probe, made once: the kernel release, the families'
    /// operations (resolved once, at connect) and this process's
    /// CAP_NET_ADMIN cannot change under a running client, and re-reading
    /// two /proc files and copying both op lists every pass cost more than
    /// the rest of a small pass.
    caps: std::sync::OnceLock<Capabilities>,
    /// Drivers, firmware, models and link speeds by ifindex (see
    /// [`identity::IdentityCache`]).
    identities: std::sync::Mutex<identity::IdentityCache>,
    /// The steady pass's buffers, taken for a pass and put back after it.
    buffers: std::sync::Mutex<PassBuffers>,
    /// The pass's netdev dump requests, encoded once.
    requests: DumpRequests,
}

/// The genl payloads of a full pass's netdev dumps, encoded once (they
/// never change; only the sequence number does, and the socket writes it).
#[derive(Debug)]
struct DumpRequests {
    page_pools: Vec<u8>,
    page_pool_stats: Vec<u8>,
    queues: Vec<u8>,
    dev_qstats: Vec<u8>,
    queue_qstats: Vec<u8>,
}

impl DumpRequests {
    fn new() -> Self {
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
    pub fn recycle(&mut self, s: Snapshot) {
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

async fn open_client() -> Result<Client, SampleError> {
    Client::connect()
        .await
        .map_err(|e| sample_err("connecting to the kernel over netlink", e))
}

/// Which devices a pass covers.
#[derive(Clone, Copy)]
enum Filter<'a> {
    Names(&'a [String]),
    Ifindex(u32),
}

impl NetlinkKernel {
    /// Connect in the calling thread's network namespace.
    pub async fn connect() -> Result<Self, SampleError> {
        Ok(Self::from_client(open_client().await?))
    }

    /// Connect for one-shot sampling (`pptune status`): no notification
    /// sockets are opened (four sockets, group joins and 1 MiB receive
    /// buffers a command that samples once and exits never reads). A
    /// [`Kernel::next_event`] would still open them on first use.
    pub async fn connect_oneshot() -> Result<Self, SampleError> {
        Ok(Self::with_events(open_client().await?, None))
    }

    /// Wrap an existing client (e.g. one built inside a test netns).
    ///
    /// The notification sockets are opened now when a tokio runtime is
    /// running, so no change between construction and the first
    /// [`Kernel::next_event`] is missed; otherwise on that first call.
    #[must_use]
    pub fn from_client(client: Client) -> Self {
        let events =
            tokio::runtime::Handle::try_current()
                .ok()
                .and_then(|_| match client.subscribe() {
                    Ok(n) => Some(n),
                    Err(e) => {
                        tracing::warn!(error = %crate::human::cause(&e), "cannot open notification sockets yet");
                        None
                    }
                });
        Self::with_events(client, events)
    }

    fn with_events(client: Client, events: Option<Notifications>) -> Self {
        Self {
            client,
            events: Mutex::new(events),
            origin: Instant::now(),
            caps: std::sync::OnceLock::new(),
            identities: std::sync::Mutex::new(identity::IdentityCache::default()),
            buffers: std::sync::Mutex::new(PassBuffers::default()),
            requests: DumpRequests::new(),
        }
    }

    /// The capability flags, probed on first use (a failed probe is
    /// retried on the next pass).
    fn capabilities(&self) -> Result<&Capabilities, SampleError> {
        if let Some(c) = self.caps.get() {
            return Ok(c);
        }
        let caps = self
            .client
            .capabilities()
            .map_err(|e| sample_err("probing kernel capabilities", e))?;
        Ok(self.caps.get_or_init(|| convert_caps(&caps)))
    }

    /// `dev`'s driver, firmware and model, from the cache or the ioctl
    /// (then sysfs).
    fn identify(&self, link: &Link, dev: &mut Device) {
        if let Ok(mut cache) = self.identities.lock() {
            cache.identify(link, dev, |name| self.client.identity(name));
        }
    }

    /// Forget the cached identities of links no longer in `links` (a full
    /// link dump).
    fn prune_identities(&self, links: &[Link]) {
        if let Ok(mut cache) = self.identities.lock() {
            cache.prune(links);
        }
    }

    /// `dev`'s link speed: from the cache while its link keeps its
    /// operational state, else asked (`LINKMODES_GET`). A driver without
    /// link settings has none, and is not asked again in that state.
    async fn link_speed(&self, link: &Link, dev: &mut Device, ex_name: Option<&str>) {
        let cached = self.identities.lock().ok().and_then(|c| c.speed(link));
        dev.speed_mbps = match cached {
            Some(s) => s,
            None => match self.client.linkmodes(link.ifindex, ex_name).await {
                Ok(l) => {
                    let s = l.speed_mbps();
                    if let Ok(mut c) = self.identities.lock() {
                        c.set_speed(link, s);
                    }
                    s
                }
                Err(e) => {
                    if e.kernel()
                        .is_some_and(netlink::KernelError::is_not_supported)
                        && let Ok(mut c) = self.identities.lock()
                    {
                        c.set_speed(link, None);
                    }
                    None
                }
            },
        };
    }

    /// The underlying client.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    async fn sample_filtered(&self, filter: Filter<'_>) -> Result<Snapshot, SampleError> {
        // Taken for the pass and put back after it (a pass abandoned
        // mid-way only costs the next one its reuse).
        let mut b = self
            .buffers
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default();
        let r = self.sample_into(filter, &mut b).await;
        if let Ok(mut g) = self.buffers.lock() {
            *g = b;
        }
        r
    }

    async fn sample_into(
        &self,
        filter: Filter<'_>,
        b: &mut PassBuffers,
    ) -> Result<Snapshot, SampleError> {
        let capabilities = self.capabilities()?;
        self.client
            .links_into(&mut b.ex)
            .await
            .map_err(|e| sample_err("dumping links", e))?;
        netlink::client::decode_links_into(&b.ex, &mut b.links)
            .map_err(|e| sample_err("dumping links", e))?;
        self.prune_identities(&b.links);
        let select = |l: &Link| match &filter {
            Filter::Names([]) => l.name != "lo",
            Filter::Names(names) => names.contains(&l.name),
            Filter::Ifindex(i) => l.ifindex == *i,
        };
        if !b.links.iter().any(select) && matches!(filter, Filter::Ifindex(_)) {
            // The device is gone: nothing to dump (a filtered queue-get
            // would only answer ENODEV).
            return Ok(Snapshot {
                taken_at_ms: self.elapsed_ms(),
                capabilities: capabilities.clone(),
                devices: Vec::new(),
                orphan_pools: Vec::new(),
            });
        }

        self.dump_netdev(filter, capabilities, b).await?;
        let mut snap = b.begin(capabilities, select, |l, dev| self.identify(l, dev));
        self.read_ethtool(&mut snap, select, b).await;
        b.finish(&mut snap, self.elapsed_ms());
        Ok(snap)
    }

    /// The netdev family's dumps a pass reads (page pools, their stats,
    /// queues, qstats) into the pass's buffers, as far as the kernel has
    /// them; `filter` narrows the queue dump to one device.
    async fn dump_netdev(
        &self,
        filter: Filter<'_>,
        capabilities: &policy::snapshot::Capabilities,
        b: &mut PassBuffers,
    ) -> Result<(), SampleError> {
        use netlink::client as c;
        let r = &self.requests;
        b.pools.clear();
        if capabilities.page_pool_get {
            self.dump(
                &r.page_pools,
                &mut b.ex,
                &mut b.pools,
                c::decode_page_pools_into,
            )
            .await
            .map_err(|e| sample_err("dumping page pools", e))?;
        }
        b.stats.clear();
        if capabilities.page_pool_stats {
            self.dump(
                &r.page_pool_stats,
                &mut b.ex,
                &mut b.stats,
                c::decode_page_pool_stats_into,
            )
            .await
            .map_err(|e| sample_err("dumping page pool stats", e))?;
        }
        // Only what `join` reads is kept of each dump (RX queues, device
        // totals, RX queue stats): the TX halves would be decoded counters
        // held until the join for nothing.
        b.queues.clear();
        if capabilities.queue_get {
            let filtered;
            let payload = match filter {
                Filter::Ifindex(i) => {
                    use netlink::GenlPayload as _;
                    filtered = netlink::netdev::NetdevMessage::queue_get(Some(i)).to_genl_bytes();
                    &filtered
                }
                Filter::Names(_) => &r.queues,
            };
            let got = self
                .dump(payload, &mut b.ex, &mut b.queues, decode_pass_queues)
                .await;
            match got {
                // The filtered device vanished since the link dump.
                Err(e) if e.kernel().is_some_and(netlink::KernelError::is_no_device) => {}
                r => r.map_err(|e| sample_err("dumping queues", e))?,
            }
        }
        // Unfiltered qstats dumps skip devices without stat_ops; a failure
        // here only costs the qstats columns.
        b.dev_qstats.clear();
        b.queue_qstats.clear();
        if capabilities.qstats_get {
            type Decode = fn(&netlink::socket::Exchange, &mut Vec<Qstats>) -> netlink::Result<()>;
            for (payload, out, decode) in [
                (
                    &r.dev_qstats,
                    &mut b.dev_qstats,
                    decode_pass_dev_qstats as Decode,
                ),
                (
                    &r.queue_qstats,
                    &mut b.queue_qstats,
                    decode_pass_queue_qstats,
                ),
            ] {
                let got = self.dump(payload, &mut b.ex, out, decode).await;
                if let Err(e) = got {
                    tracing::debug!(error = %crate::human::cause(&e), "qstats dump failed");
                }
            }
        }
        Ok(())
    }

    /// Each selected device's rings and channels over ethtool netlink (or
    /// why they are unavailable).
    async fn read_ethtool(
        &self,
        snap: &mut Snapshot,
        select: impl Fn(&Link) -> bool,
        b: &mut PassBuffers,
    ) {
        let capabilities = &snap.capabilities;
        let ethtool = capabilities.ethtool_family;
        for (dev, link) in snap
            .devices
            .iter_mut()
            .zip(b.links.iter().filter(|l| select(l)))
        {
            if ethtool {
                let driver = dev.driver.as_deref();
                let (name, ex) = (Some(link.name.as_str()), &mut b.ex);
                dev.rings = match self
                    .client
                    .rings_into(link.ifindex, name, ex, &mut b.rings)
                    .await
                {
                    Ok(()) => Availability::Available(convert_rings(&b.rings)),
                    Err(e) => Availability::Unavailable(unavailable_reason(&e, driver)),
                };
                dev.channels = match self
                    .client
                    .channels_into(link.ifindex, name, ex, &mut b.channels)
                    .await
                {
                    Ok(()) => Availability::Available(convert_channels(&b.channels)),
                    Err(e) => Availability::Unavailable(unavailable_reason(&e, driver)),
                };
                self.link_speed(link, dev, name).await;
            } else {
                let why = "kernel has no ethtool netlink".to_owned();
                dev.rings = Availability::Unavailable(why.clone());
                dev.channels = Availability::Unavailable(why);
                dev.speed_mbps = None;
            }
        }
    }

    /// One of the pass's netdev dumps through `ex`, decoded into `out`
    /// by its kind's `decode_*_into`.
    async fn dump<T>(
        &self,
        payload: &[u8],
        ex: &mut netlink::socket::Exchange,
        out: &mut Vec<T>,
        decode: impl FnOnce(&netlink::socket::Exchange, &mut Vec<T>) -> netlink::Result<()>,
    ) -> netlink::Result<()> {
        self.client.netdev_dump_into(payload, ex).await?;
        decode(ex, out)
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn ifname(&self, ifindex: u32) -> Option<String> {
        let links = self.client.links().await.ok()?;
        links
            .into_iter()
            .find(|l| l.ifindex == ifindex)
            .map(|l| l.name)
    }
}

fn unavailable_reason(e: &netlink::Error, driver: Option<&str>) -> String {
    match e.kernel() {
        Some(k) if k.is_not_supported() => {
            format!("not supported by driver {}", driver.unwrap_or("(unknown)"))
        }
        Some(k) if k.is_no_device() => "device vanished".to_owned(),
        Some(k) => k.to_string(),
        None => e.to_string(),
    }
}

fn sample_err(context: &str, e: netlink::Error) -> SampleError {
    SampleError {
        context: context.to_owned(),
        source: Some(Box::new(e)),
    }
}

/// A set refusal as the daemon sees it. EOPNOTSUPP usually comes without
/// an extack message (the driver simply has no hook), so the driver is
/// named here: "not supported by driver veth".
fn set_err(ifindex: u32, driver: Option<&str>, e: netlink::Error) -> SetError {
    match e.kernel() {
        Some(k) if k.is_no_device() => SetError::DeviceGone(ifindex),
        Some(k) => SetError::Refused {
            errno: k.errno,
            message: match (&k.message, k.is_not_supported()) {
                (None, true) => {
                    format!("not supported by driver {}", driver.unwrap_or("(unknown)"))
                }
                _ => k.describe(),
            },
            attr: k.attr.clone(),
        },
        None => SetError::Other(Box::new(e)),
    }
}

impl Kernel for NetlinkKernel {
    async fn sample(&self, scope: &SampleScope) -> Result<Snapshot, SampleError> {
        self.sample_filtered(Filter::Names(&scope.interfaces)).await
    }

    fn recycle(&self, snapshot: Snapshot) {
        if let Ok(mut b) = self.buffers.lock() {
            b.recycle(snapshot);
        }
    }

    async fn sample_device(&self, ifindex: u32) -> Result<Option<Device>, SampleError> {
        let snap = self.sample_filtered(Filter::Ifindex(ifindex)).await?;
        Ok(snap.devices.into_iter().find(|d| d.ifindex == ifindex))
    }

    async fn set_ring(
        &self,
        ifindex: u32,
        field: RingField,
        value: u32,
    ) -> Result<Rings, SetError> {
        let mut req = netlink::ethtool::Rings {
            header: Some(netlink::ethtool::Header::ifindex(ifindex)),
            ..Default::default()
        };
        match field {
            RingField::Rx => req.rx = Some(value),
            RingField::RxMini => req.rx_mini = Some(value),
            RingField::RxJumbo => req.rx_jumbo = Some(value),
        }
        let name = self.ifname(ifindex).await;
        let driver = name.as_deref().and_then(|n| self.client.driver_name(n));
        let err = |e| set_err(ifindex, driver.as_deref(), e);
        self.client
            .set_rings(req, name.as_deref())
            .await
            .map_err(err)?;
        let back = self
            .client
            .rings(ifindex, name.as_deref())
            .await
            .map_err(err)?;
        Ok(convert_rings(&back))
    }

    async fn set_channels(
        &self,
        ifindex: u32,
        field: ChannelField,
        value: u32,
    ) -> Result<Channels, SetError> {
        let mut req = netlink::ethtool::Channels {
            header: Some(netlink::ethtool::Header::ifindex(ifindex)),
            ..Default::default()
        };
        match field {
            ChannelField::Combined => req.combined_count = Some(value),
            ChannelField::Rx => req.rx_count = Some(value),
        }
        let name = self.ifname(ifindex).await;
        let driver = name.as_deref().and_then(|n| self.client.driver_name(n));
        let err = |e| set_err(ifindex, driver.as_deref(), e);
        self.client
            .set_channels(req, name.as_deref())
            .await
            .map_err(err)?;
        let back = self
            .client
            .channels(ifindex, name.as_deref())
            .await
            .map_err(err)?;
        Ok(convert_channels(&back))
    }

    async fn next_event(&self) -> Option<KernelEvent> {
        let mut guard = self.events.lock().await;
        if guard.is_none() {
            match self.client.subscribe() {
                Ok(n) => *guard = Some(n),
                Err(e) => {
                    tracing::error!(error = %crate::human::cause(&e), "cannot open notification sockets");
                    return None;
                }
            }
        }
        let events = guard.as_mut()?;
        loop {
            let e = events.next().await?;
            if let Some(k) = convert_event(e) {
                if let KernelEvent::LinkRemoved { ifindex } = k
                    && let Ok(mut cache) = self.identities.lock()
                {
                    cache.remove(ifindex);
                }
                return Some(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink::netdev::QueueType;
    use netlink::netns::TempNetns;
    use policy::snapshot::{Pool, QueueStats, RxQueue};

    fn veth_netns(tag: &str) -> TempNetns {
        assert!(
            netlink::netns::is_root(),
            "{tag}: needs root to create a network namespace"
        );
        let ns = TempNetns::create(tag).unwrap();
        ns.ip(&[
            "link",
            "add",
            "veth0",
            "numrxqueues",
            "4",
            "type",
            "veth",
            "peer",
            "name",
            "veth1",
        ])
        .unwrap();
        ns.ip(&["link", "set", "veth0", "up"]).unwrap();
        ns
    }

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../netlink/tests/fixtures/");

    /// A recorded exchange (request and replies) from the codec fixtures.
    fn exchange(name: &str) -> netlink::socket::Exchange {
        let req = std::fs::read(format!("{FIXTURES}{name}.req.bin")).unwrap();
        let bytes = std::fs::read(format!("{FIXTURES}{name}.bin")).unwrap();
        netlink::socket::Exchange::from_reply_bytes(req, &bytes).unwrap()
    }

    // The recorded dumps, every entry, through the client's own decoders.
    fn fixture_pools(name: &str) -> Vec<PagePool> {
        netlink::client::decode_page_pools(&exchange(name)).unwrap()
    }

    fn fixture_stats(name: &str) -> Vec<PagePoolStats> {
        netlink::client::decode_page_pool_stats(&exchange(name)).unwrap()
    }

    fn fixture_queues(name: &str) -> Vec<Queue> {
        netlink::client::decode_queues_where(&exchange(name), None, |_| true).unwrap()
    }

    fn fixture_qstats(name: &str) -> Vec<Qstats> {
        netlink::client::decode_qstats_where(&exchange(name), None, |_| true).unwrap()
    }

    /// The join on real Linux 7.3 replies (netdevsim, VM testbed): four
    /// live pools onto four RX queues by NAPI id, the detached pool (no
    /// NAPI id any more) to the device bucket with its stats.
    #[test]
    fn join_real_netdevsim_dumps() {
        let pools = fixture_pools("vm-7.3-nsim-netdev-page-pool-get-dump");
        let stats = fixture_stats("vm-7.3-nsim-netdev-page-pool-stats-get-dump");
        let queues = fixture_queues("vm-7.3-nsim-netdev-queue-get-dump");
        let dev_q = fixture_qstats("vm-7.3-nsim-netdev-qstats-get-dev-dump");
        let queue_q = fixture_qstats("vm-7.3-nsim-netdev-qstats-get-queue-dump");
        let mut devices = vec![Device {
            ifindex: 3,
            name: "eth0".to_owned(),
            ..Device::default()
        }];
        let dumps = Dumps {
            pools: &pools,
            stats: &stats,
            queues: &queues,
            dev_qstats: &dev_q,
            queue_qstats: &queue_q,
        };
        let orphans = join(&mut devices, &dumps);
        assert!(orphans.is_empty());
        let d = &devices[0];
        assert_eq!(d.rx_queues.len(), 4);
        for q in &d.rx_queues {
            assert_eq!(q.pools.len(), 1, "queue {}", q.id);
            assert_eq!(q.pools.capacity(), 1, "queue {}: no idle pool slots", q.id);
            assert_eq!(q.pools[0].napi_id, q.napi_id.map(u64::from));
            assert!(q.pools[0].stats.is_some());
            assert_eq!(q.qstats.and_then(|s| s.rx_packets), Some(0));
            assert_eq!(q.qstats.and_then(|s| s.rx_alloc_fail), None);
        }
        assert_eq!(d.unmapped_pools.len(), 1);
        let z = &d.unmapped_pools[0];
        assert!(z.detach_time.is_some());
        assert_eq!(z.stats.map(|s| (s.alloc_slow, s.alloc_empty)), Some((1, 1)));
        assert!(d.qstats.is_some());
        assert_eq!(d.pools().count(), 5);

        // The orphaned pool from the later dump: no ifindex, own bucket.
        let orphan = fixture_pools("vm-7.3-nsim-orphan-netdev-page-pool-get-dump");
        let o = join(
            &mut devices,
            &Dumps {
                pools: &orphan,
                ..dumps
            },
        );
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].ifindex, None);
        assert_eq!(devices[0].pools().count(), 0);
    }

    /// The join finds stats, qstats and a pool's queue wherever the dumps
    /// list them. Built from the real 7.3 dumps (four queues, five pools):
    /// the stats and qstats dumps reversed or rotated (the walk's guess
    /// misses and the index is built, at the first lookup or midway), and
    /// the pools reversed (the NAPI lookup walks the other way), join to
    /// the same device as the kernel's order.
    #[test]
    fn join_does_not_depend_on_dump_order() {
        let pools = fixture_pools("vm-7.3-nsim-netdev-page-pool-get-dump");
        let stats = fixture_stats("vm-7.3-nsim-netdev-page-pool-stats-get-dump");
        let queues = fixture_queues("vm-7.3-nsim-netdev-queue-get-dump");
        let queue_q = fixture_qstats("vm-7.3-nsim-netdev-qstats-get-queue-dump");
        let joined = |pools: &[PagePool], stats: &[PagePoolStats], queue_q: &[Qstats]| {
            let mut devices = vec![Device {
                ifindex: 3,
                name: "eth0".to_owned(),
                ..Device::default()
            }];
            let dumps = Dumps {
                pools,
                stats,
                queues: &queues,
                dev_qstats: &[],
                queue_qstats: queue_q,
            };
            assert!(join(&mut devices, &dumps).is_empty());
            devices
        };
        let kernel = joined(&pools, &stats, &queue_q);
        let d = &kernel[0];
        assert_eq!(d.rx_queues.len(), 4);
        assert!(
            d.rx_queues
                .iter()
                .all(|q| q.qstats.is_some() && q.pools.len() == 1)
        );
        assert!(d.pools().all(|p| p.stats.is_some()));
        fn reversed<T: Clone>(v: &[T]) -> Vec<T> {
            v.iter().rev().cloned().collect()
        }
        fn rotated<T: Clone>(v: &[T], by: usize) -> Vec<T> {
            let mut v = v.to_vec();
            v.rotate_left(by);
            v
        }
        for by in 0..stats.len() {
            assert_eq!(
                joined(&pools, &rotated(&stats, by), &queue_q),
                kernel,
                "stats rotated {by}"
            );
        }
        for by in 0..queue_q.len() {
            assert_eq!(
                joined(&pools, &stats, &rotated(&queue_q, by)),
                kernel,
                "qstats rotated {by}"
            );
        }
        assert_eq!(
            joined(&reversed(&pools), &reversed(&stats), &reversed(&queue_q)),
            kernel
        );
    }

    /// Hand-made from the real queue dump: two RX queues sharing one NAPI
    /// (drivers that pair queues on a vector): the pool goes to the lower
    /// queue; a pool whose NAPI no queue reports goes to the device bucket.
    #[test]
    fn handmade_shared_napi_and_unknown_napi() {
        let mut queues = fixture_queues("vm-7.3-nsim-netdev-queue-get-dump");
        for q in &mut queues {
            if q.queue_type == Some(QueueType::Rx) {
                q.napi_id = Some(100);
            }
        }
        let pool = |id, napi| PagePool {
            id: Some(id),
            ifindex: Some(3),
            napi_id: Some(napi),
            ..PagePool::default()
        };
        let pools = vec![pool(1, 100), pool(2, 555)];
        let mut devices = vec![Device {
            ifindex: 3,
            ..Device::default()
        }];
        join(
            &mut devices,
            &Dumps {
                pools: &pools,
                stats: &[],
                queues: &queues,
                dev_qstats: &[],
                queue_qstats: &[],
            },
        );
        let d = &devices[0];
        assert_eq!(
            d.rx_queues[0]
                .pools
                .iter()
                .map(|p| p.id)
                .collect::<Vec<_>>(),
            vec![1]
        );
        assert!(d.rx_queues[1..].iter().all(|q| q.pools.is_empty()));
        assert_eq!(
            d.unmapped_pools.iter().map(|p| p.id).collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(d.unmapped_pools[0].stats, None);
    }

    /// A snapshot nothing like the one a pass will build: other devices,
    /// more queues and pools, strings everywhere — what a spent snapshot
    /// handed back for reuse may hold.
    fn stale_snapshot() -> Snapshot {
        let pool = Pool {
            id: 999,
            ifindex: Some(77),
            napi_id: Some(5),
            inflight: Some(1),
            ..Pool::default()
        };
        let dev = Device {
            ifindex: 77,
            name: "stale-device-name".to_owned(),
            id: policy::snapshot::DeviceId {
                bus: Some("stale-bus".to_owned()),
                parent: Some("stale-parent".to_owned()),
                perm_addr: Some("ff:ff:ff:ff:ff:ff".to_owned()),
                name_fallback: Some("stale".to_owned()),
            },
            driver: Some("stale-driver".to_owned()),
            kind: Some("stale-kind".to_owned()),
            rings: Availability::Unavailable("stale".to_owned()),
            qstats: Some(QueueStats::default()),
            rx_queues: vec![
                RxQueue {
                    id: 40,
                    napi_id: Some(5),
                    pools: vec![pool.clone(); 3],
                    ..RxQueue::default()
                };
                9
            ],
            unmapped_pools: vec![pool.clone()],
            ..Device::default()
        };
        Snapshot {
            taken_at_ms: 1,
            capabilities: Capabilities {
                kernel_release: "stale-release".to_owned(),
                ..Capabilities::default()
            },
            devices: vec![dev; 3],
            orphan_pools: vec![pool],
        }
    }

    /// A pass built on a spent snapshot's allocations equals one built
    /// from nothing: the recorded 7.3 netdevsim dumps (links, pools,
    /// stats, queues, qstats) through [`PassBuffers`] twice, first with no
    /// spare and then over [`stale_snapshot`], and over its own previous
    /// result.
    #[test]
    fn a_pass_on_reused_buffers_equals_a_fresh_one() {
        let ex = exchange;
        let caps = Capabilities {
            kernel_release: "7.3.0".to_owned(),
            page_pool_get: true,
            ..Capabilities::default()
        };
        let build = |b: &mut PassBuffers| {
            use netlink::client as c;
            c::decode_links_into(&ex("vm-7.3-nsim-rtnl-getlink-dump"), &mut b.links).unwrap();
            c::decode_page_pools_into(&ex("vm-7.3-nsim-netdev-page-pool-get-dump"), &mut b.pools)
                .unwrap();
            c::decode_page_pool_stats_into(
                &ex("vm-7.3-nsim-netdev-page-pool-stats-get-dump"),
                &mut b.stats,
            )
            .unwrap();
            decode_pass_queues(&ex("vm-7.3-nsim-netdev-queue-get-dump"), &mut b.queues).unwrap();
            decode_pass_dev_qstats(
                &ex("vm-7.3-nsim-netdev-qstats-get-dev-dump"),
                &mut b.dev_qstats,
            )
            .unwrap();
            decode_pass_queue_qstats(
                &ex("vm-7.3-nsim-netdev-qstats-get-queue-dump"),
                &mut b.queue_qstats,
            )
            .unwrap();
            let mut snap = b.begin(
                &caps,
                |l| l.name != "lo",
                |l, dev| {
                    dev.driver = (l.name == "eth0").then(|| "netdevsim".to_owned());
                },
            );
            b.finish(&mut snap, 42);
            snap
        };
        let fresh = build(&mut PassBuffers::default());
        assert!(
            fresh
                .devices
                .iter()
                .map(|d| d.pools().count())
                .sum::<usize>()
                >= 4
        );
        assert!(
            fresh
                .devices
                .iter()
                .any(|d| d.id.perm_addr.is_some() || d.id.bus.is_some())
        );

        let mut b = PassBuffers::default();
        b.recycle(stale_snapshot());
        let over_stale = build(&mut b);
        assert_eq!(over_stale, fresh);
        b.recycle(over_stale);
        assert_eq!(build(&mut b), fresh);

        // One device at a time, each over a stale one.
        let link = b.links.iter().find(|l| l.name != "lo").unwrap();
        let mut dev = stale_snapshot().devices.remove(0);
        fill_device(&mut dev, link);
        let mut want = base_device(link, None);
        (want.rx_queues, want.unmapped_pools) = (dev.rx_queues.clone(), dev.unmapped_pools.clone());
        want.driver.clone_from(&dev.driver);
        assert_eq!(
            dev, want,
            "fill_device leaves only driver and the join's parts"
        );
    }

    /// Live: the Kernel trait over a veth pair in a throwaway netns.
    #[test]
    #[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
    fn kernel_trait_on_veth() {
        let ns = veth_netns("kern");
        ns.run(|| async {
            let k = NetlinkKernel::connect().await.unwrap();
            let snap = k
                .sample(&SampleScope {
                    interfaces: vec!["veth0".to_owned()],
                })
                .await
                .unwrap();
            assert_eq!(snap.devices.len(), 1);
            let d = &snap.devices[0];
            assert_eq!(d.driver.as_deref(), Some("veth"));
            assert_eq!(d.kind.as_deref(), Some("veth"));
            assert_eq!(
                d.rings,
                Availability::Unavailable("not supported by driver veth".to_owned())
            );
            assert_eq!(d.channels.available().and_then(|c| c.rx), Some(4));
            assert_eq!(d.rx_queues.len(), 4);
            assert_eq!(d.num_rx_queues, Some(4));
            assert!(!snap.capabilities.kernel_release.is_empty());

            // The second pass takes the driver and capabilities from the
            // caches, and its snapshot is built on a stale one handed
            // back: the same answers.
            k.recycle(stale_snapshot());
            let again = k
                .sample(&SampleScope {
                    interfaces: vec!["veth0".to_owned()],
                })
                .await
                .unwrap();
            assert_eq!(again.capabilities, snap.capabilities);
            assert_eq!(again.devices.len(), 1);
            let counters_cleared = |d: &Device| Device {
                link_stats: None,
                ..d.clone()
            };
            assert_eq!(counters_cleared(&again.devices[0]), counters_cleared(d));
            assert!(again.orphan_pools.is_empty());

            // set_channels: SET with ack, then read back.
            let back = k
                .set_channels(d.ifindex, ChannelField::Rx, 3)
                .await
                .unwrap();
            assert_eq!(back.rx, Some(3));
            let ev = tokio::time::timeout(std::time::Duration::from_secs(5), async {
                loop {
                    if let Some(KernelEvent::ChannelsChanged { ifindex, channels }) =
                        k.next_event().await
                    {
                        return (ifindex, channels);
                    }
                }
            })
            .await
            .unwrap();
            assert_eq!(ev, (d.ifindex, back));

            // veth has no ring operations: refused, naming the driver.
            match k.set_ring(d.ifindex, RingField::Rx, 512).await {
                Err(SetError::Refused { errno, message, .. }) => {
                    assert_eq!(errno, 95);
                    assert_eq!(message, "not supported by driver veth");
                }
                other => panic!("expected a refusal, got {other:?}"),
            }
            // Above the maximum: EINVAL with the kernel's words and attribute.
            match k.set_channels(d.ifindex, ChannelField::Rx, 64).await {
                Err(SetError::Refused {
                    errno,
                    message,
                    attr,
                }) => {
                    assert_eq!(errno, 22);
                    assert_eq!(message, "requested channel count exceeds maximum");
                    assert_eq!(attr.as_deref(), Some("channels.rx-count"));
                }
                other => panic!("expected a refusal, got {other:?}"),
            }
            // A device that does not exist.
            assert!(k.sample_device(9999).await.unwrap().is_none());
            assert!(matches!(
                k.set_channels(9999, ChannelField::Rx, 1).await,
                Err(SetError::DeviceGone(9999))
            ));
        })
        .unwrap();
    }
}
