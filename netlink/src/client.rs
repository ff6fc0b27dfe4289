//! The async client: one request socket per family, notifications apart.

use crate::caps::Capabilities;
use crate::ctrl::{CtrlMessage, Family, GENL_ID_CTRL};
use crate::error::{Error, Result};
use crate::ethtool::{Channels, EthtoolMessage, Linkmodes, Rings};
use crate::events::Notifications;
use crate::frame::NLM_F_DUMP;
use crate::genl::GenlPayload;
use crate::netdev::{Napi, NetdevBody, NetdevMessage, PagePool, PagePoolStats, Qstats, Queue};
use crate::rtnl::{self, Link};
use crate::socket::{Exchange, NETLINK_GENERIC, NETLINK_ROUTE, RequestSocket};

// The reply decoders, pure functions of an exchange's bytes, live in
// `decode`; they stay reachable here, where their request halves are.
pub use crate::decode::*;

/// A resolved generic netlink family and its request socket.
#[derive(Debug)]
struct GenlSock {
    family: Family,
    sock: RequestSocket,
}

/// The kernel interface.
///
/// Sockets are opened in the network namespace of the thread that calls
/// [`Client::connect`] (netlink sockets are bound to their creator's netns),
/// which is how tests and the VM harness point it at a throwaway namespace.
///
/// ```no_run
/// # async fn demo() -> Result<(), netlink::Error> {
/// let client = netlink::Client::connect().await?;
/// let caps = client.capabilities()?;
/// println!("kernel {}", caps.kernel_release);
/// for link in client.links().await? {
///     let queues = client.queues(Some(link.ifindex)).await.unwrap_or_default();
///     println!("{} has {} active queues", link.name, queues.len());
/// }
/// // Every pool, every netdev: filter by ifindex here, not in the kernel.
/// for pool in client.page_pools().await? {
///     println!("pool {:?} on {:?}", pool.id, pool.ifindex);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Client {
    ctrl: RequestSocket,
    netdev: Option<GenlSock>,
    ethtool: Option<GenlSock>,
    route: RequestSocket,
}

impl Client {
    /// Open the sockets and resolve the `netdev` and `ethtool` families.
    /// A missing family is not an error here: the calls that need it
    /// return [`Error::FamilyMissing`], and [`Client::capabilities`] says so.
    pub async fn connect() -> Result<Self> {
        let ctrl = RequestSocket::open(NETLINK_GENERIC, "nlctrl")?;
        let route = RequestSocket::open(NETLINK_ROUTE, "rtnetlink")?;
        let netdev = resolve_on(&ctrl, crate::netdev::FAMILY).await?;
        let ethtool = resolve_on(&ctrl, crate::ethtool::FAMILY).await?;
        let open = |family: Option<Family>, name| -> Result<Option<GenlSock>> {
            family
                .map(|family| {
                    Ok(GenlSock {
                        family,
                        sock: RequestSocket::open(NETLINK_GENERIC, name)?,
                    })
                })
                .transpose()
        };
        Ok(Self {
            netdev: open(netdev, "netdev")?,
            ethtool: open(ethtool, "ethtool")?,
            ctrl,
            route,
        })
    }

    /// Resolve any generic netlink family through nlctrl; `None` if the
    /// kernel does not have it.
    pub async fn resolve_family(&self, name: &'static str) -> Result<Option<Family>> {
        resolve_on(&self.ctrl, name).await
    }

    /// The resolved netdev family (id, ops, groups), if present.
    #[must_use]
    pub fn netdev_family(&self) -> Option<&Family> {
        self.netdev.as_ref().map(|g| &g.family)
    }

    /// The resolved ethtool family, if present.
    #[must_use]
    pub fn ethtool_family(&self) -> Option<&Family> {
        self.ethtool.as_ref().map(|g| &g.family)
    }

    /// Kernel release, registered operations, CAP_NET_ADMIN.
    pub fn capabilities(&self) -> Result<Capabilities> {
        Capabilities::new(self.netdev_family(), self.ethtool_family())
    }

    // ---- netdev ----

    /// page-pool-get dump of every pool in this netns.
    ///
    /// Unfiltered on purpose: the dump's ifindex filter is not on every
    /// kernel since 6.8, and orphaned pools (no ifindex) only show up in an
    /// unfiltered dump. Filter by [`PagePool::ifindex`] here.
    pub async fn page_pools(&self) -> Result<Vec<PagePool>> {
        decode_page_pools(
            &self
                .netdev_dump(&NetdevMessage::page_pool_get(None))
                .await?,
        )
    }

    /// page-pool-get do by id; `None` if the kernel does not know it
    /// (ENOENT: gone, invisible, or another netns).
    pub async fn page_pool(&self, id: u64) -> Result<Option<PagePool>> {
        match self
            .netdev_req(
                &NetdevMessage::page_pool_get(Some(id)),
                false,
                "page-pool-get",
                |m| match m.body {
                    NetdevBody::PagePool(p) => Some(p),
                    _ => None,
                },
            )
            .await
        {
            Ok(pools) => Ok(pools.into_iter().next()),
            Err(e) if e.errno() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// page-pool-stats-get dump, unfiltered (filter by `info.ifindex`).
    /// Fails with EOPNOTSUPP on kernels without `CONFIG_PAGE_POOL_STATS`.
    pub async fn page_pool_stats(&self) -> Result<Vec<PagePoolStats>> {
        decode_page_pool_stats(
            &self
                .netdev_dump(&NetdevMessage::page_pool_stats_get(None))
                .await?,
        )
    }

    /// page-pool-stats-get do for one pool (no RTNL taken, unlike the
    /// dump); `None` if the pool is unknown (ENOENT).
    pub async fn page_pool_stats_for(&self, id: u64) -> Result<Option<PagePoolStats>> {
        match self
            .netdev_req(
                &NetdevMessage::page_pool_stats_get(Some(id)),
                false,
                "page-pool-stats-get",
                |m| match m.body {
                    NetdevBody::PagePoolStats(s) => Some(s),
                    _ => None,
                },
            )
            .await
        {
            Ok(stats) => Ok(stats.into_iter().next()),
            Err(e) if e.errno() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// queue-get dump (all devices, or one). Devices that are down are
    /// skipped by the kernel.
    pub async fn queues(&self, ifindex: Option<u32>) -> Result<Vec<Queue>> {
        self.queues_where(ifindex, |_| true).await
    }

    /// [`Client::queues`], keeping only the queues `keep` accepts (every
    /// reply is still decoded; the others are dropped as they are, so a
    /// caller that wants a few never holds them all).
    pub async fn queues_where(
        &self,
        ifindex: Option<u32>,
        keep: impl FnMut(&Queue) -> bool,
    ) -> Result<Vec<Queue>> {
        decode_queues_where(
            &self.netdev_dump(&NetdevMessage::queue_get(ifindex)).await?,
            None,
            keep,
        )
    }

    /// napi-get dump (all devices, or one).
    pub async fn napis(&self, ifindex: Option<u32>) -> Result<Vec<Napi>> {
        self.netdev_req(
            &NetdevMessage::napi_get(ifindex, None),
            true,
            "napi-get",
            |m| match m.body {
                NetdevBody::Napi(n) => Some(n),
                _ => None,
            },
        )
        .await
    }

    /// napi-set (CAP_NET_ADMIN).
    pub async fn napi_set(&self, napi: Napi) -> Result<()> {
        self.netdev_req(&NetdevMessage::napi_set(napi), false, "napi-set", |_| {
            None::<()>
        })
        .await
        .map(drop)
    }

    /// qstats-get dump: `scope` 0 = per-device totals,
    /// [`crate::netdev::QSTATS_SCOPE_QUEUE`] = per queue. A device without
    /// `stat_ops` in the filter gives EOPNOTSUPP; an unfiltered dump just
    /// leaves it out.
    pub async fn qstats(&self, ifindex: Option<u32>, scope: u64) -> Result<Vec<Qstats>> {
        self.qstats_where(ifindex, scope, |_| true).await
    }

    /// [`Client::qstats`], keeping only the entries `keep` accepts.
    pub async fn qstats_where(
        &self,
        ifindex: Option<u32>,
        scope: u64,
        keep: impl FnMut(&Qstats) -> bool,
    ) -> Result<Vec<Qstats>> {
        decode_qstats_where(
            &self
                .netdev_dump(&NetdevMessage::qstats_get(ifindex, scope))
                .await?,
            None,
            keep,
        )
    }

    /// Send any netdev message and return the raw exchange (fixtures,
    /// capability checks). `dump` sets `NLM_F_DUMP`.
    pub async fn netdev_exchange(&self, msg: &NetdevMessage, dump: bool) -> Result<Exchange> {
        let g = self
            .netdev
            .as_ref()
            .ok_or(Error::FamilyMissing(crate::netdev::FAMILY))?;
        genl_exchange(g, msg, dump).await
    }

    /// A netdev dump into `ex` (its buffers reused). `payload` is the
    /// request's genl payload, e.g. `NetdevMessage::page_pool_get(None)
    /// .to_genl_bytes()`, encoded once by a caller that repeats the dump;
    /// decode with the `decode_*_into` functions below.
    pub async fn netdev_dump_into(&self, payload: &[u8], ex: &mut Exchange) -> Result<()> {
        let g = self
            .netdev
            .as_ref()
            .ok_or(Error::FamilyMissing(crate::netdev::FAMILY))?;
        genl_exchange_into(g, payload, true, ex).await
    }

    /// A netdev dump exchange (decoded by the `decode_*` functions below).
    async fn netdev_dump(&self, msg: &NetdevMessage) -> Result<Exchange> {
        let g = self
            .netdev
            .as_ref()
            .ok_or(Error::FamilyMissing(crate::netdev::FAMILY))?;
        genl_exchange(g, msg, true).await
    }

    /// Send a netdev message and decode the replies, keeping what `keep`
    /// returns (each reply decoded and sorted in one step: a dump of
    /// thousands of pools is not first collected as messages).
    async fn netdev_req<T>(
        &self,
        msg: &NetdevMessage,
        dump: bool,
        op: &'static str,
        keep: impl FnMut(NetdevMessage) -> Option<T>,
    ) -> Result<Vec<T>> {
        let g = self
            .netdev
            .as_ref()
            .ok_or(Error::FamilyMissing(crate::netdev::FAMILY))?;
        let ex = genl_exchange(g, msg, dump).await?;
        decode_genl_with(&ex, op, None, keep)
    }

    // ---- ethtool ----

    /// RINGS_GET. `ifname` only labels errors.
    pub async fn rings(&self, ifindex: u32, ifname: Option<&str>) -> Result<Rings> {
        let mut out = Rings::default();
        self.rings_into(ifindex, ifname, &mut Exchange::default(), &mut out)
            .await?;
        Ok(out)
    }

    /// [`Client::rings`] through `ex` into `out`, both reused.
    pub async fn rings_into(
        &self,
        ifindex: u32,
        ifname: Option<&str>,
        ex: &mut Exchange,
        out: &mut Rings,
    ) -> Result<()> {
        self.ethtool_get_into(crate::ethtool::req::RINGS_GET, ifindex, ex)
            .await?;
        decode_rings_into(ex, ifname, out)
    }

    /// RINGS_SET with ack; only the `Some` fields of `rings` are sent.
    /// `rings.header` selects the device (e.g. [`Header::ifindex`]).
    pub async fn set_rings(&self, rings: Rings, ifname: Option<&str>) -> Result<()> {
        self.ethtool_req(&EthtoolMessage::rings_set(rings), "rings-set", ifname)
            .await
            .map(drop)
    }

    /// CHANNELS_GET.
    pub async fn channels(&self, ifindex: u32, ifname: Option<&str>) -> Result<Channels> {
        let mut out = Channels::default();
        self.channels_into(ifindex, ifname, &mut Exchange::default(), &mut out)
            .await?;
        Ok(out)
    }

    /// [`Client::channels`] through `ex` into `out`, both reused.
    pub async fn channels_into(
        &self,
        ifindex: u32,
        ifname: Option<&str>,
        ex: &mut Exchange,
        out: &mut Channels,
    ) -> Result<()> {
        self.ethtool_get_into(crate::ethtool::req::CHANNELS_GET, ifindex, ex)
            .await?;
        decode_channels_into(ex, ifname, out)
    }

    /// A `*_GET` request for one device into `ex` (its buffers reused).
    async fn ethtool_get_into(&self, cmd: u8, ifindex: u32, ex: &mut Exchange) -> Result<()> {
        let g = self
            .ethtool
            .as_ref()
            .ok_or(Error::FamilyMissing(crate::ethtool::FAMILY))?;
        genl_exchange_into(g, &crate::ethtool::get_request(cmd, ifindex), false, ex).await
    }

    /// LINKMODES_GET (the link's negotiated speed). `ifname` only labels
    /// errors. A driver without link settings refuses (EOPNOTSUPP).
    pub async fn linkmodes(&self, ifindex: u32, ifname: Option<&str>) -> Result<Linkmodes> {
        let ex = self
            .ethtool_exchange(
                &EthtoolMessage::linkmodes_get(crate::ethtool::Header::ifindex(ifindex)),
                false,
            )
            .await?;
        decode_linkmodes(&ex, ifname)
    }

    /// CHANNELS_SET with ack; only the `Some` fields are sent.
    pub async fn set_channels(&self, channels: Channels, ifname: Option<&str>) -> Result<()> {
        self.ethtool_req(
            &EthtoolMessage::channels_set(channels),
            "channels-set",
            ifname,
        )
        .await
        .map(drop)
    }

    /// Send any ethtool message and return the raw exchange.
    pub async fn ethtool_exchange(&self, msg: &EthtoolMessage, dump: bool) -> Result<Exchange> {
        let g = self
            .ethtool
            .as_ref()
            .ok_or(Error::FamilyMissing(crate::ethtool::FAMILY))?;
        genl_exchange(g, msg, dump).await
    }

    async fn ethtool_req(
        &self,
        msg: &EthtoolMessage,
        op: &'static str,
        ifname: Option<&str>,
    ) -> Result<Vec<EthtoolMessage>> {
        let g = self
            .ethtool
            .as_ref()
            .ok_or(Error::FamilyMissing(crate::ethtool::FAMILY))?;
        let ex = genl_exchange(g, msg, false).await?;
        decode_genl(&ex, op, ifname)
    }

    // ---- rtnetlink ----

    /// Every link in this netns (`RTM_GETLINK` dump).
    pub async fn links(&self) -> Result<Vec<Link>> {
        let ex = self.links_exchange().await?;
        decode_links(&ex)
    }

    /// The raw `RTM_GETLINK` dump exchange, re-dumped (up to
    /// [`DUMP_ATTEMPTS`] times) while the kernel flags it inconsistent.
    pub async fn links_exchange(&self) -> Result<Exchange> {
        let mut ex = Exchange::default();
        self.links_into(&mut ex).await?;
        Ok(ex)
    }

    /// [`Client::links_exchange`] into `ex`, whose buffers are reused.
    pub async fn links_into(&self, ex: &mut Exchange) -> Result<()> {
        let mut attempt = 1;
        loop {
            self.route
                .exchange_into(
                    rtnl::RTM_GETLINK,
                    NLM_F_DUMP,
                    &rtnl::GETLINK_DUMP_PAYLOAD,
                    ex,
                )
                .await?;
            if !ex.interrupted() || attempt >= DUMP_ATTEMPTS {
                return Ok(());
            }
            attempt += 1;
        }
    }

    /// Driver name: `ETHTOOL_GDRVINFO` (current netns), else sysfs.
    #[must_use]
    pub fn driver_name(&self, ifname: &str) -> Option<String> {
        crate::drvinfo::driver_name(ifname)
    }

    /// Driver, firmware and model ([`crate::drvinfo::identity`]).
    #[must_use]
    pub fn identity(&self, ifname: &str) -> Option<crate::drvinfo::Identity> {
        crate::drvinfo::identity(ifname)
    }

    // ---- notifications ----

    /// Open the notification sockets (netdev `page-pool` + `mgmt`, ethtool
    /// `monitor`, rtnetlink links), each its own socket so an overflow on
    /// one never costs a dump's replies or another group's events.
    pub fn subscribe(&self) -> Result<Notifications> {
        Notifications::open(self.netdev_family(), self.ethtool_family())
    }
}

async fn resolve_on(ctrl: &RequestSocket, name: &'static str) -> Result<Option<Family>> {
    let msg = CtrlMessage::get_family(name);
    let wrap = |e: Error| Error::ResolveFamily {
        family: name,
        source: Box::new(e),
    };
    let ex = ctrl
        .exchange(GENL_ID_CTRL, 0, &msg.to_genl_bytes())
        .await
        .map_err(wrap)?;
    match decode_genl::<CtrlMessage>(&ex, "getfamily", None) {
        Ok(msgs) => {
            let m = msgs
                .into_iter()
                .next()
                .ok_or_else(|| wrap(no_reply("getfamily")))?;
            Family::from_reply(m)
                .map(Some)
                .map_err(|source| wrap(decode_err("getfamily", source)))
        }
        Err(e) if e.errno() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(wrap(e)),
    }
}

/// How often a dump the kernel flags inconsistent (`NLM_F_DUMP_INTR`) is
/// retried before its last result is used as is.
pub const DUMP_ATTEMPTS: u32 = 3;

async fn genl_exchange<P: GenlPayload>(g: &GenlSock, msg: &P, dump: bool) -> Result<Exchange> {
    let mut ex = Exchange::default();
    genl_exchange_into(g, &msg.to_genl_bytes(), dump, &mut ex).await?;
    Ok(ex)
}

/// One request of a genl family into `ex` (its buffers reused); a dump
/// the kernel flags inconsistent is re-dumped up to [`DUMP_ATTEMPTS`]
/// times and its last result kept.
async fn genl_exchange_into(
    g: &GenlSock,
    payload: &[u8],
    dump: bool,
    ex: &mut Exchange,
) -> Result<()> {
    let flags = if dump { NLM_F_DUMP } else { 0 };
    let mut attempt = 1;
    loop {
        g.sock
            .exchange_into(g.family.id, flags, payload, ex)
            .await?;
        if !dump || !ex.interrupted() || attempt >= DUMP_ATTEMPTS {
            return Ok(());
        }
        attempt += 1;
    }
}
