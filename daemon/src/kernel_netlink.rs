//! The real [`Kernel`]: `netlink::Client` replies converted into
//! `policy::Snapshot`.
//!
//! A sampling pass is a handful of dumps whatever the number of pools:
//! links, page-pool, page-pool-stats, queue-get, qstats (device and queue
//! scope), then rings and channels per selected device. Pools join RX queues
//! through their NAPI id (page-pool has no queue attribute); pools with no
//! NAPI id or one no queue reports go to the device's `unmapped_pools`;
//! pools without an ifindex (orphaned to loopback) to `orphan_pools`.

use std::collections::HashMap;

use netlink::netdev::{PagePool, PagePoolStats, QSTATS_SCOPE_QUEUE, Qstats, Queue, QueueType, cmd};
use netlink::rtnl::Link;
use netlink::{Client, Event, Notifications};
use policy::snapshot::{
    Availability, Capabilities, Channels, Device, DeviceId, LinkStats, MemoryProvider, OperState,
    Pool, PoolStats, QueueStats, Rings, RxQueue, Snapshot,
};
use policy::{ChannelField, RingField};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::kernel::{Kernel, KernelEvent, SampleError, SampleScope, SetError};

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
    /// Driver names by ifindex (see [`DriverCache`]).
    drivers: std::sync::Mutex<DriverCache>,
}

/// Driver names of the devices sampled, so the `ETHTOOL_GDRVINFO` ioctl
/// (a socket, an ioctl and a close) is made once per device rather than
/// once per device per pass. A netdev's driver never changes while it
/// exists; an entry is used only while the link dump still shows the same
/// ifindex with the same name, kind and parent, is dropped when the link
/// is removed or missing from a dump, and a failed lookup is not cached.
#[derive(Debug, Default)]
struct DriverCache {
    by_ifindex: HashMap<u32, (LinkIdentity, String)>,
}

/// What must match for a cached driver name to be used.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LinkIdentity {
    name: String,
    kind: Option<String>,
    parent_bus: Option<String>,
    parent_dev: Option<String>,
}

impl LinkIdentity {
    fn matches(&self, l: &Link) -> bool {
        self.name == l.name
            && self.kind == l.kind
            && self.parent_bus == l.parent_bus
            && self.parent_dev == l.parent_dev
    }

    fn of(l: &Link) -> Self {
        Self {
            name: l.name.clone(),
            kind: l.kind.clone(),
            parent_bus: l.parent_bus.clone(),
            parent_dev: l.parent_dev.clone(),
        }
    }
}

async fn open_client() -> Result<Client, SampleError> {
    Client::connect()
        .await
        .map_err(|e| sample_err("connecting to the kernel over netlink", e))
}

/// Which devices a pass covers.
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
                        tracing::warn!(error = %e, "cannot open notification sockets yet");
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
            drivers: std::sync::Mutex::new(DriverCache::default()),
        }
    }

    /// The capability flags, probed on first use (a failed probe is
    /// retried on the next pass).
    fn capabilities(&self) -> Result<Capabilities, SampleError> {
        if let Some(c) = self.caps.get() {
            return Ok(c.clone());
        }
        let caps = self
            .client
            .capabilities()
            .map_err(|e| sample_err("probing kernel capabilities", e))?;
        Ok(self.caps.get_or_init(|| convert_caps(&caps)).clone())
    }

    /// The driver of `link`, from the cache or `ETHTOOL_GDRVINFO` (then
    /// sysfs).
    fn driver(&self, link: &Link) -> Option<String> {
        if let Ok(cache) = self.drivers.lock()
            && let Some((id, driver)) = cache.by_ifindex.get(&link.ifindex)
            && id.matches(link)
        {
            return Some(driver.clone());
        }
        let driver = self.client.driver_name(&link.name)?;
        if let Ok(mut cache) = self.drivers.lock() {
            cache
                .by_ifindex
                .insert(link.ifindex, (LinkIdentity::of(link), driver.clone()));
        }
        Some(driver)
    }

    /// Forget the cached drivers of links no longer in `links` (a full
    /// link dump).
    fn prune_drivers(&self, links: &[Link]) {
        if let Ok(mut cache) = self.drivers.lock() {
            cache
                .by_ifindex
                .retain(|i, _| links.iter().any(|l| l.ifindex == *i));
        }
    }

    /// The underlying client.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    async fn sample_filtered(&self, filter: Filter<'_>) -> Result<Snapshot, SampleError> {
        let capabilities = self.capabilities()?;
        let links = self
            .client
            .links()
            .await
            .map_err(|e| sample_err("dumping links", e))?;
        self.prune_drivers(&links);
        let selected: Vec<&Link> = links
            .iter()
            .filter(|l| match &filter {
                Filter::Names([]) => l.name != "lo",
                Filter::Names(names) => names.contains(&l.name),
                Filter::Ifindex(i) => l.ifindex == *i,
            })
            .collect();
        if selected.is_empty() && matches!(filter, Filter::Ifindex(_)) {
            // The device is gone: nothing to dump (a filtered queue-get
            // would only answer ENODEV).
            return Ok(Snapshot {
                taken_at_ms: self.elapsed_ms(),
                capabilities,
                devices: Vec::new(),
                orphan_pools: Vec::new(),
            });
        }

        let pools = if capabilities.page_pool_get {
            self.client
                .page_pools()
                .await
                .map_err(|e| sample_err("dumping page pools", e))?
        } else {
            Vec::new()
        };
        let stats = if capabilities.page_pool_stats {
            self.client
                .page_pool_stats()
                .await
                .map_err(|e| sample_err("dumping page pool stats", e))?
        } else {
            Vec::new()
        };
        let queue_filter = match filter {
            Filter::Ifindex(i) => Some(i),
            Filter::Names(_) => None,
        };
        // Only what `join` reads is kept of each dump (RX queues, device
        // totals, RX queue stats): at 2048 queues the TX halves alone were
        // megabytes of decoded counters held until the join.
        let queues = if capabilities.queue_get {
            match self.client.queues_where(queue_filter, keep_queue).await {
                // The filtered device vanished since the link dump.
                Err(e) if e.kernel().is_some_and(netlink::KernelError::is_no_device) => Vec::new(),
                r => r.map_err(|e| sample_err("dumping queues", e))?,
            }
        } else {
            Vec::new()
        };
        // Unfiltered qstats dumps skip devices without stat_ops; a failure
        // here only costs the qstats columns.
        let (dev_qstats, queue_qstats) = if capabilities.qstats_get {
            let dev = self
                .client
                .qstats_where(None, 0, keep_dev_qstats)
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(error = %e, "device qstats dump failed");
                    Vec::new()
                });
            let per_q = self
                .client
                .qstats_where(None, QSTATS_SCOPE_QUEUE, keep_queue_qstats)
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(error = %e, "queue qstats dump failed");
                    Vec::new()
                });
            (dev, per_q)
        } else {
            (Vec::new(), Vec::new())
        };

        let mut devices = Vec::with_capacity(selected.len());
        for link in selected {
            let driver = self.driver(link);
            let mut dev = base_device(link, driver);
            if capabilities.ethtool_family {
                dev.rings = self.rings(link, dev.driver.as_deref()).await;
                dev.channels = self.channels(link, dev.driver.as_deref()).await;
            } else {
                let why = "kernel has no ethtool netlink".to_owned();
                dev.rings = Availability::Unavailable(why.clone());
                dev.channels = Availability::Unavailable(why);
            }
            devices.push(dev);
        }
        let orphan_pools = join(
            &mut devices,
            &Dumps {
                pools: &pools,
                stats: &stats,
                queues: &queues,
                dev_qstats: &dev_qstats,
                queue_qstats: &queue_qstats,
            },
        );
        Ok(Snapshot {
            taken_at_ms: self.elapsed_ms(),
            capabilities,
            devices,
            orphan_pools,
        })
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn rings(&self, link: &Link, driver: Option<&str>) -> Availability<Rings> {
        match self.client.rings(link.ifindex, Some(&link.name)).await {
            Ok(r) => Availability::Available(convert_rings(&r)),
            Err(e) => Availability::Unavailable(unavailable_reason(&e, driver)),
        }
    }

    async fn channels(&self, link: &Link, driver: Option<&str>) -> Availability<Channels> {
        match self.client.channels(link.ifindex, Some(&link.name)).await {
            Ok(c) => Availability::Available(convert_channels(&c)),
            Err(e) => Availability::Unavailable(unavailable_reason(&e, driver)),
        }
    }

    async fn ifname(&self, ifindex: u32) -> Option<String> {
        let links = self.client.links().await.ok()?;
        links
            .into_iter()
            .find(|l| l.ifindex == ifindex)
            .map(|l| l.name)
    }
}

/// The queue-get entries a pass keeps: RX queues of a device.
#[must_use]
pub fn keep_queue(q: &Queue) -> bool {
    q.ifindex.is_some() && q.queue_type == Some(QueueType::Rx)
}

/// The device-scope qstats entries a pass keeps.
#[must_use]
pub fn keep_dev_qstats(q: &Qstats) -> bool {
    q.queue_id.is_none()
}

/// The queue-scope qstats entries a pass keeps: RX queues of a device.
#[must_use]
pub fn keep_queue_qstats(q: &Qstats) -> bool {
    q.ifindex.is_some() && q.queue_type == Some(0) && q.queue_id.is_some()
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

/// Join the dumps onto `devices` (already carrying link data, rings and
/// channels): RX queues from queue-get, qstats by ifindex/queue, pools by
/// ifindex and then NAPI id onto the queue reporting the same NAPI id
/// (several queues may share a NAPI: the lowest-numbered one gets the
/// pool); pools with no NAPI id or an unknown one go to `unmapped_pools`.
/// Returns the orphaned pools (no ifindex). Sorts devices by ifindex,
/// queues and pools by id.
pub fn join(devices: &mut [Device], d: &Dumps<'_>) -> Vec<Pool> {
    // Sized up front: growing (rehashing) thousands of entries cost more
    // than filling them.
    let mut stats: HashMap<u64, &PagePoolStats> = HashMap::with_capacity(d.stats.len());
    stats.extend(
        d.stats
            .iter()
            .filter_map(|s| Some((s.info.as_ref()?.id?, s))),
    );
    let pool_of = |p: &PagePool| convert_pool(p, p.id.and_then(|id| stats.get(&id).copied()));
    // Indexes built once per pass, so the join stays linear in the number
    // of pools and queues (a per-queue scan of every queue's qstats was
    // quadratic: ~4M comparisons at 2048 queues). Where the dumps repeat
    // a key, the first entry wins, as a linear `find` would have chosen.
    let mut rx_qstats: HashMap<(u32, u32), &Qstats> = HashMap::with_capacity(d.queue_qstats.len());
    for s in d.queue_qstats {
        if let (Some(i), Some(0), Some(q)) = (s.ifindex, s.queue_type, s.queue_id) {
            rx_qstats.entry((i, q)).or_insert(s);
        }
    }
    let mut pools_by_dev: HashMap<u32, Vec<&PagePool>> = HashMap::new();
    for p in d.pools {
        if let Some(i) = p.ifindex {
            pools_by_dev.entry(i).or_default().push(p);
        }
    }
    let mut rx_by_dev: HashMap<u32, Vec<&Queue>> = HashMap::new();
    for q in d.queues {
        if let (Some(i), Some(QueueType::Rx)) = (q.ifindex, q.queue_type) {
            rx_by_dev.entry(i).or_default().push(q);
        }
    }
    for dev in devices.iter_mut() {
        let ifindex = dev.ifindex;
        dev.qstats = d
            .dev_qstats
            .iter()
            .find(|q| q.ifindex == Some(ifindex) && q.queue_id.is_none())
            .map(convert_qstats);
        dev.rx_queues = rx_by_dev
            .get(&ifindex)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|q| {
                let id = q.id?;
                Some(RxQueue {
                    id,
                    napi_id: q.napi_id,
                    provider: provider(q.dmabuf, q.io_uring.as_ref()),
                    qstats: rx_qstats.get(&(ifindex, id)).map(|s| convert_qstats(s)),
                    pools: Vec::new(),
                })
            })
            .collect();
        dev.rx_queues.sort_by_key(|q| q.id);
        // NAPI id -> position of the first queue with it (after the sort,
        // as the scan below used to find it).
        let mut by_napi: HashMap<u64, usize> = HashMap::with_capacity(dev.rx_queues.len());
        for (at, q) in dev.rx_queues.iter().enumerate() {
            if let Some(n) = q.napi_id {
                by_napi.entry(u64::from(n)).or_insert(at);
            }
        }
        dev.unmapped_pools.clear();
        for p in pools_by_dev
            .get(&ifindex)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let pool = pool_of(p);
            let slot = pool
                .napi_id
                .and_then(|n| by_napi.get(&n).copied())
                .and_then(|at| dev.rx_queues.get_mut(at));
            match slot {
                Some(q) => q.pools.push(pool),
                None => dev.unmapped_pools.push(pool),
            }
        }
        for q in &mut dev.rx_queues {
            q.pools.sort_by_key(|p| p.id);
        }
        dev.unmapped_pools.sort_by_key(|p| p.id);
    }
    devices.sort_by_key(|d| d.ifindex);
    let mut orphans: Vec<Pool> = d
        .pools
        .iter()
        .filter(|p| p.ifindex.is_none())
        .map(pool_of)
        .collect();
    orphans.sort_by_key(|p| p.id);
    orphans
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

/// The policy's capability flags from the probe.
#[must_use]
pub fn convert_caps(c: &netlink::Capabilities) -> Capabilities {
    Capabilities {
        kernel_release: c.kernel_release.clone(),
        netdev_family: c.netdev_ops.is_some(),
        page_pool_get: c.netdev_op(cmd::PAGE_POOL_GET).is_some(),
        page_pool_stats: c.netdev_op(cmd::PAGE_POOL_STATS_GET).is_some(),
        queue_get: c.netdev_op(cmd::QUEUE_GET).is_some(),
        napi_get: c.netdev_op(cmd::NAPI_GET).is_some(),
        qstats_get: c.netdev_op(cmd::QSTATS_GET).is_some(),
        ethtool_family: c.ethtool_ops.is_some(),
        cap_net_admin: c.cap_net_admin,
    }
}

/// A device from its link (rings, channels and the join's parts still
/// empty).
#[must_use]
pub fn base_device(link: &Link, driver: Option<String>) -> Device {
    let perm = link.perm_addr_string();
    let name_fallback = (link.parent_bus.is_none() && link.parent_dev.is_none() && perm.is_none())
        .then(|| link.name.clone());
    Device {
        ifindex: link.ifindex,
        name: link.name.clone(),
        id: DeviceId {
            bus: link.parent_bus.clone(),
            parent: link.parent_dev.clone(),
            perm_addr: perm,
            name_fallback,
        },
        driver,
        kind: link.kind.clone(),
        oper_state: match link.oper_state {
            netlink::rtnl::OperState::Unknown => OperState::Unknown,
            netlink::rtnl::OperState::NotPresent => OperState::NotPresent,
            netlink::rtnl::OperState::Down => OperState::Down,
            netlink::rtnl::OperState::LowerLayerDown => OperState::LowerLayerDown,
            netlink::rtnl::OperState::Testing => OperState::Testing,
            netlink::rtnl::OperState::Dormant => OperState::Dormant,
            netlink::rtnl::OperState::Up => OperState::Up,
        },
        admin_up: link.admin_up,
        master: link.master,
        mtu: link.mtu,
        num_rx_queues: link.num_rx_queues,
        rings: Availability::NotSampled,
        channels: Availability::NotSampled,
        link_stats: link.stats64.map(|s| LinkStats {
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            rx_dropped: s.rx_dropped,
            rx_missed_errors: s.rx_missed_errors,
            rx_fifo_errors: s.rx_fifo_errors,
        }),
        qstats: None,
        rx_queues: Vec::new(),
        unmapped_pools: Vec::new(),
    }
}

fn provider(
    dmabuf: Option<u32>,
    io_uring: Option<&netlink::netdev::IoUringProviderInfo>,
) -> Option<MemoryProvider> {
    match (dmabuf, io_uring) {
        (Some(id), _) => Some(MemoryProvider::Dmabuf { id }),
        (None, Some(io)) => Some(MemoryProvider::IoUring {
            rx_buf_len: io.rx_buf_len,
        }),
        (None, None) => None,
    }
}

/// A netlink pool (and its stats entry, if any) as the policy sees it.
#[must_use]
pub fn convert_pool(p: &PagePool, stats: Option<&PagePoolStats>) -> Pool {
    Pool {
        id: p.id.unwrap_or(0),
        ifindex: p.ifindex,
        napi_id: p.napi_id,
        inflight: p.inflight,
        inflight_mem: p.inflight_mem,
        detach_time: p.detach_time,
        provider: provider(p.dmabuf, p.io_uring.as_ref()),
        stats: stats.map(|s| pool_stats(&s.counters)),
    }
}

/// The kernel's page-pool counters as the policy's `PoolStats`, field by
/// field from the one counter table (`policy::counters`). A counter the
/// kernel omitted reads 0 (the stats reply carries all of them or none).
#[must_use]
pub fn pool_stats(c: &netlink::netdev::PoolCounters) -> PoolStats {
    macro_rules! convert {
        ($($field:ident, $unit:literal, $help:literal;)*) => {
            PoolStats {
                $($field: c.$field.unwrap_or(0),)*
            }
        };
    }
    policy::pool_counters!(convert)
}

fn convert_qstats(q: &Qstats) -> QueueStats {
    let c = &q.counters;
    QueueStats {
        rx_packets: c.rx_packets,
        rx_bytes: c.rx_bytes,
        rx_alloc_fail: c.rx_alloc_fail,
        rx_hw_drops: c.rx_hw_drops,
        rx_hw_drop_overruns: c.rx_hw_drop_overruns,
    }
}

/// ethtool rings as the policy sees them.
#[must_use]
pub fn convert_rings(r: &netlink::ethtool::Rings) -> Rings {
    Rings {
        rx: r.rx,
        rx_max: r.rx_max,
        rx_mini: r.rx_mini,
        rx_mini_max: r.rx_mini_max,
        rx_jumbo: r.rx_jumbo,
        rx_jumbo_max: r.rx_jumbo_max,
        tx: r.tx,
        tx_max: r.tx_max,
        rx_buf_len: r.rx_buf_len,
        tcp_data_split: r.tcp_data_split,
        hds_thresh: r.hds_thresh,
        hds_thresh_max: r.hds_thresh_max,
    }
}

/// ethtool channels as the policy sees them.
#[must_use]
pub fn convert_channels(c: &netlink::ethtool::Channels) -> Channels {
    Channels {
        rx: c.rx_count,
        rx_max: c.rx_max,
        tx: c.tx_count,
        tx_max: c.tx_max,
        other: c.other_count,
        other_max: c.other_max,
        combined: c.combined_count,
        combined_max: c.combined_max,
    }
}

fn convert_event(e: Event) -> Option<KernelEvent> {
    Some(match e {
        Event::PagePool { pool, .. } => KernelEvent::PoolsChanged {
            ifindex: pool.ifindex,
        },
        Event::Rings(r) => KernelEvent::RingsChanged {
            ifindex: r.header.as_ref()?.dev_index?,
            rings: convert_rings(&r),
        },
        Event::Channels(c) => KernelEvent::ChannelsChanged {
            ifindex: c.header.as_ref()?.dev_index?,
            channels: convert_channels(&c),
        },
        Event::LinkNew(l) => KernelEvent::LinkChanged { ifindex: l.ifindex },
        Event::LinkDel(l) => KernelEvent::LinkRemoved { ifindex: l.ifindex },
        Event::Overflow { source } => KernelEvent::Overflow { source },
        Event::Dev { .. } => return None,
    })
}

impl Kernel for NetlinkKernel {
    async fn sample(&self, scope: &SampleScope) -> Result<Snapshot, SampleError> {
        self.sample_filtered(Filter::Names(&scope.interfaces)).await
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
                    tracing::error!(error = %e, "cannot open notification sockets");
                    return None;
                }
            }
        }
        let events = guard.as_mut()?;
        loop {
            let e = events.next().await?;
            if let Some(k) = convert_event(e) {
                if let KernelEvent::LinkRemoved { ifindex } = k
                    && let Ok(mut cache) = self.drivers.lock()
                {
                    cache.by_ifindex.remove(&ifindex);
                }
                return Some(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink::netns::TempNetns;

    fn veth_netns(tag: &str) -> Option<TempNetns> {
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
        Some(ns)
    }

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../netlink/tests/fixtures/");

    fn decode(name: &str) -> Vec<netlink::netdev::NetdevBody> {
        let req = std::fs::read(format!("{FIXTURES}{name}.req.bin")).unwrap();
        let bytes = std::fs::read(format!("{FIXTURES}{name}.bin")).unwrap();
        let ex = netlink::socket::Exchange::from_reply_bytes(req, &bytes).unwrap();
        netlink::client::decode_genl::<netlink::netdev::NetdevMessage>(&ex, "fixture", None)
            .unwrap()
            .into_iter()
            .map(|m| m.body)
            .collect()
    }

    /// The join on real Linux 7.3 replies (netdevsim, VM testbed): four
    /// live pools onto four RX queues by NAPI id, the detached pool (no
    /// NAPI id any more) to the device bucket with its stats.
    #[test]
    fn join_real_netdevsim_dumps() {
        use netlink::netdev::NetdevBody as B;
        let pools: Vec<_> = decode("vm-7.3-nsim-netdev-page-pool-get-dump")
            .into_iter()
            .filter_map(|b| {
                if let B::PagePool(p) = b {
                    Some(p)
                } else {
                    None
                }
            })
            .collect();
        let stats: Vec<_> = decode("vm-7.3-nsim-netdev-page-pool-stats-get-dump")
            .into_iter()
            .filter_map(|b| {
                if let B::PagePoolStats(p) = b {
                    Some(p)
                } else {
                    None
                }
            })
            .collect();
        let queues: Vec<_> = decode("vm-7.3-nsim-netdev-queue-get-dump")
            .into_iter()
            .filter_map(|b| if let B::Queue(q) = b { Some(q) } else { None })
            .collect();
        let qstats = |n| -> Vec<_> {
            decode(n)
                .into_iter()
                .filter_map(|b| if let B::Qstats(q) = b { Some(q) } else { None })
                .collect()
        };
        let dev_q = qstats("vm-7.3-nsim-netdev-qstats-get-dev-dump");
        let queue_q = qstats("vm-7.3-nsim-netdev-qstats-get-queue-dump");
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
        let orphan: Vec<_> = decode("vm-7.3-nsim-orphan-netdev-page-pool-get-dump")
            .into_iter()
            .filter_map(|b| {
                if let B::PagePool(p) = b {
                    Some(p)
                } else {
                    None
                }
            })
            .collect();
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

    /// Hand-made from the real queue dump: two RX queues sharing one NAPI
    /// (drivers that pair queues on a vector): the pool goes to the lower
    /// queue; a pool whose NAPI no queue reports goes to the device bucket.
    #[test]
    fn handmade_shared_napi_and_unknown_napi() {
        use netlink::netdev::NetdevBody as B;
        let mut queues: Vec<_> = decode("vm-7.3-nsim-netdev-queue-get-dump")
            .into_iter()
            .filter_map(|b| if let B::Queue(q) = b { Some(q) } else { None })
            .collect();
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

    /// Live: the Kernel trait over a veth pair in a throwaway netns.
    #[test]
    #[ignore = "needs root: creates a network namespace (run with --include-ignored as root)"]
    fn kernel_trait_on_veth() {
        let Some(ns) = veth_netns("kern") else { return };
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
            // caches: the same answers.
            let again = k
                .sample(&SampleScope {
                    interfaces: vec!["veth0".to_owned()],
                })
                .await
                .unwrap();
            assert_eq!(again.capabilities, snap.capabilities);
            assert_eq!(again.devices[0].driver.as_deref(), Some("veth"));
            assert_eq!(again.devices[0].rx_queues.len(), 4);

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
