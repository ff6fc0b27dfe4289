//! The real [`Kernel`]: `netlink::Client` replies converted into
//! `policy::Snapshot`.
//!
//! A sampling pass is a handful of dumps whatever the number of pools:
//! links, page-pool, page-pool-stats, queue-get, qstats (device and queue
//! scope), then rings and channels per selected device. Pools join RX queues
//! through their NAPI id (page-pool has no queue attribute); pools with no
//! NAPI id or one no queue reports go to the device's `unmapped_pools`;
//! pools without an ifindex (orphaned to loopback) to `orphan_pools`.

use netlink::netdev::Qstats;
use netlink::rtnl::Link;
use netlink::{Client, Notifications};
use policy::snapshot::{Availability, Capabilities, Channels, Device, Rings, Snapshot};
use policy::{ChannelField, RingField};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::sample::{Kernel, KernelEvent, SampleError, SampleScope, SetError};

mod buffers;
mod convert;
mod identity;
mod join;
use buffers::DumpRequests;
pub use buffers::PassBuffers;
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
mod tests;
