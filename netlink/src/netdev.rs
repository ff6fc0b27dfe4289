//! The `netdev` generic netlink family (`Documentation/netlink/specs/netdev.yaml`).
//!
//! One payload type, [`NetdevMessage`], for requests, replies and
//! notifications; the body is chosen by the command. Every attribute the
//! 7.3 spec lists for page-pool, page-pool-stats, queue, napi and qstats is
//! decoded; attributes this code does not know are kept in `other` (and
//! re-emitted), never an error.

mod page_pool;
mod qstats;
mod queue;

pub use page_pool::{IoUringProviderInfo, PagePool, PagePoolInfo, PagePoolStats, PoolCounters};
pub use qstats::{QSTATS_SCOPE_QUEUE, Qstats, QstatsCounters};
pub use queue::{Lease, LeaseQueue, Napi, Queue, QueueType};

use crate::attr::{Attrs, DecodeInPlace as _, RawAttr, Writer};
use crate::error::CodecError;
use crate::genl::GenlPayload;

/// Family name.
pub const FAMILY: &str = "netdev";
/// Multicast group for dev-add/del/change notifications.
pub const GROUP_MGMT: &str = "mgmt";
/// Multicast group for page-pool add/del/change notifications.
pub const GROUP_PAGE_POOL: &str = "page-pool";

/// `NETDEV_CMD_*`.
pub mod cmd {
    pub const DEV_GET: u8 = 1;
    pub const DEV_ADD_NTF: u8 = 2;
    pub const DEV_DEL_NTF: u8 = 3;
    pub const DEV_CHANGE_NTF: u8 = 4;
    pub const PAGE_POOL_GET: u8 = 5;
    pub const PAGE_POOL_ADD_NTF: u8 = 6;
    pub const PAGE_POOL_DEL_NTF: u8 = 7;
    pub const PAGE_POOL_CHANGE_NTF: u8 = 8;
    pub const PAGE_POOL_STATS_GET: u8 = 9;
    pub const QUEUE_GET: u8 = 10;
    pub const NAPI_GET: u8 = 11;
    pub const QSTATS_GET: u8 = 12;
    pub const BIND_RX: u8 = 13;
    pub const NAPI_SET: u8 = 14;
    pub const BIND_TX: u8 = 15;
    pub const QUEUE_CREATE: u8 = 16;

    /// The spec's name of a command, for messages.
    #[must_use]
    pub fn name(cmd: u8) -> &'static str {
        match cmd {
            DEV_GET => "dev-get",
            DEV_ADD_NTF => "dev-add-ntf",
            DEV_DEL_NTF => "dev-del-ntf",
            DEV_CHANGE_NTF => "dev-change-ntf",
            PAGE_POOL_GET => "page-pool-get",
            PAGE_POOL_ADD_NTF => "page-pool-add-ntf",
            PAGE_POOL_DEL_NTF => "page-pool-del-ntf",
            PAGE_POOL_CHANGE_NTF => "page-pool-change-ntf",
            PAGE_POOL_STATS_GET => "page-pool-stats-get",
            QUEUE_GET => "queue-get",
            NAPI_GET => "napi-get",
            QSTATS_GET => "qstats-get",
            BIND_RX => "bind-rx",
            NAPI_SET => "napi-set",
            BIND_TX => "bind-tx",
            QUEUE_CREATE => "queue-create",
            _ => "unknown",
        }
    }
}

/// `dev` attribute set (dev-get and the mgmt notifications).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dev {
    pub ifindex: Option<u32>,
    pub xdp_features: Option<u64>,
    pub xdp_zc_max_segs: Option<u32>,
    pub xdp_rx_metadata_features: Option<u64>,
    pub xsk_features: Option<u64>,
    pub other: Vec<RawAttr>,
}

impl Dev {
    fn parse(attrs: &[u8]) -> Result<Self, CodecError> {
        let mut d = Self::default();
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                1 => d.ifindex = Some(a.u32("dev.ifindex")?),
                2 => {} // pad
                3 => d.xdp_features = Some(a.u64("dev.xdp-features")?),
                4 => d.xdp_zc_max_segs = Some(a.u32("dev.xdp-zc-max-segs")?),
                5 => d.xdp_rx_metadata_features = Some(a.u64("dev.xdp-rx-metadata-features")?),
                6 => d.xsk_features = Some(a.u64("dev.xsk-features")?),
                _ => d.other.push(a.to_raw()),
            }
        }
        Ok(d)
    }

    fn emit(&self, w: &mut Writer) {
        w.opt_u32(1, self.ifindex);
        if let Some(v) = self.xdp_features {
            w.u64(3, v);
        }
        w.opt_u32(4, self.xdp_zc_max_segs);
        if let Some(v) = self.xdp_rx_metadata_features {
            w.u64(5, v);
        }
        if let Some(v) = self.xsk_features {
            w.u64(6, v);
        }
        w.raw(&self.other);
    }
}

/// The body of a netdev message, by command.
// Qstats carries 27 counters; messages are decoded and consumed at once, so
// the size difference costs nothing worth a Box in every match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetdevBody {
    Dev(Dev),
    PagePool(PagePool),
    PagePoolStats(PagePoolStats),
    Queue(Queue),
    Napi(Napi),
    Qstats(Qstats),
    /// A command this codec does not model: attributes kept verbatim.
    Other(Vec<RawAttr>),
}

/// A netdev family message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetdevMessage {
    pub cmd: u8,
    pub body: NetdevBody,
}

impl NetdevMessage {
    /// page-pool-get; `None` = dump every pool (no filter, see
    /// [`crate::Client::page_pools`] for why).
    #[must_use]
    pub fn page_pool_get(id: Option<u64>) -> Self {
        Self {
            cmd: cmd::PAGE_POOL_GET,
            body: NetdevBody::PagePool(PagePool {
                id,
                ..PagePool::default()
            }),
        }
    }

    /// page-pool-stats-get. `id` = do for one pool; `None` = unfiltered dump.
    #[must_use]
    pub fn page_pool_stats_get(id: Option<u64>) -> Self {
        Self {
            cmd: cmd::PAGE_POOL_STATS_GET,
            body: NetdevBody::PagePoolStats(PagePoolStats {
                info: id.map(|id| PagePoolInfo {
                    id: Some(id),
                    ..PagePoolInfo::default()
                }),
                ..PagePoolStats::default()
            }),
        }
    }

    /// queue-get dump, optionally for one device.
    #[must_use]
    pub fn queue_get(ifindex: Option<u32>) -> Self {
        Self {
            cmd: cmd::QUEUE_GET,
            body: NetdevBody::Queue(Queue {
                ifindex,
                ..Queue::default()
            }),
        }
    }

    /// napi-get dump (optionally one device), or do by `id`.
    #[must_use]
    pub fn napi_get(ifindex: Option<u32>, id: Option<u32>) -> Self {
        Self {
            cmd: cmd::NAPI_GET,
            body: NetdevBody::Napi(Napi {
                ifindex,
                id,
                ..Napi::default()
            }),
        }
    }

    /// napi-set (needs CAP_NET_ADMIN).
    #[must_use]
    pub fn napi_set(napi: Napi) -> Self {
        Self {
            cmd: cmd::NAPI_SET,
            body: NetdevBody::Napi(napi),
        }
    }

    /// qstats-get dump (dump only). `scope` 0 = device totals,
    /// [`QSTATS_SCOPE_QUEUE`] = per queue.
    #[must_use]
    pub fn qstats_get(ifindex: Option<u32>, scope: u64) -> Self {
        Self {
            cmd: cmd::QSTATS_GET,
            body: NetdevBody::Qstats(Qstats {
                ifindex,
                scope: (scope != 0).then_some(scope),
                ..Qstats::default()
            }),
        }
    }

    /// dev-get dump.
    #[must_use]
    pub fn dev_get() -> Self {
        Self {
            cmd: cmd::DEV_GET,
            body: NetdevBody::Dev(Dev::default()),
        }
    }
}

impl GenlPayload for NetdevMessage {
    const FAMILY: &'static str = FAMILY;
    const VERSION: u8 = 1;

    fn cmd(&self) -> u8 {
        self.cmd
    }

    fn emit_attrs(&self, w: &mut Writer) {
        match &self.body {
            NetdevBody::Dev(d) => d.emit(w),
            NetdevBody::PagePool(p) => p.emit(w),
            NetdevBody::PagePoolStats(s) => s.emit(w),
            NetdevBody::Queue(q) => q.emit(w),
            NetdevBody::Napi(n) => n.emit(w),
            NetdevBody::Qstats(q) => q.emit(w),
            NetdevBody::Other(raw) => w.raw(raw),
        }
    }

    fn parse_attrs(c: u8, attrs: &[u8]) -> Result<Self, CodecError> {
        let body = match c {
            cmd::DEV_GET | cmd::DEV_ADD_NTF | cmd::DEV_DEL_NTF | cmd::DEV_CHANGE_NTF => {
                NetdevBody::Dev(Dev::parse(attrs)?)
            }
            cmd::PAGE_POOL_GET
            | cmd::PAGE_POOL_ADD_NTF
            | cmd::PAGE_POOL_DEL_NTF
            | cmd::PAGE_POOL_CHANGE_NTF => NetdevBody::PagePool(PagePool::parse(attrs)?),
            cmd::PAGE_POOL_STATS_GET => NetdevBody::PagePoolStats(PagePoolStats::parse(attrs)?),
            cmd::QUEUE_GET => NetdevBody::Queue(Queue::parse(attrs)?),
            cmd::NAPI_GET | cmd::NAPI_SET => NetdevBody::Napi(Napi::parse(attrs)?),
            cmd::QSTATS_GET => NetdevBody::Qstats(Qstats::parse(attrs)?),
            _ => NetdevBody::Other(
                Attrs::new(attrs)
                    .map(|a| a.map(|a| a.to_raw()))
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(Self { cmd: c, body })
    }

    fn attr_name(c: u8, path: &[u16]) -> String {
        let top = |k: u16| -> Option<&'static str> {
            Some(match (c, k) {
                (cmd::PAGE_POOL_GET, 1) => "id",
                (cmd::PAGE_POOL_GET, 2) => "ifindex",
                (cmd::PAGE_POOL_STATS_GET, 1) => "info",
                (cmd::QUEUE_GET, 1) => "id",
                (cmd::QUEUE_GET, 2) => "ifindex",
                (cmd::QUEUE_GET, 3) => "type",
                (cmd::NAPI_GET | cmd::NAPI_SET, 1) => "ifindex",
                (cmd::NAPI_GET | cmd::NAPI_SET, 2) => "id",
                (cmd::NAPI_SET, 5) => "defer-hard-irqs",
                (cmd::NAPI_SET, 6) => "gro-flush-timeout",
                (cmd::NAPI_SET, 7) => "irq-suspend-timeout",
                (cmd::NAPI_SET, 8) => "threaded",
                (cmd::QSTATS_GET, 1) => "ifindex",
                (cmd::QSTATS_GET, 2) => "queue-type",
                (cmd::QSTATS_GET, 3) => "queue-id",
                (cmd::QSTATS_GET, 4) => "scope",
                _ => return None,
            })
        };
        let nested = |k: u16| -> Option<&'static str> {
            Some(match (c, k) {
                (cmd::PAGE_POOL_STATS_GET, 1) => "id",
                (cmd::PAGE_POOL_STATS_GET, 2) => "ifindex",
                _ => return None,
            })
        };
        let mut parts = vec![cmd::name(c).to_owned()];
        for (i, k) in path.iter().enumerate() {
            let n = if i == 0 { top(*k) } else { nested(*k) };
            parts.push(n.map_or_else(|| k.to_string(), str::to_owned));
        }
        parts.join(".")
    }
}

crate::genl::impl_genl_traits!(NetdevMessage);

/// Parse the `io-uring` nest (`io-uring-provider-info`), shared by
/// page-pool and queue.
pub(crate) fn parse_io_uring(a: &crate::attr::Attr<'_>) -> Result<IoUringProviderInfo, CodecError> {
    let mut info = IoUringProviderInfo::default();
    for f in a.nested() {
        let f = f?;
        match f.kind {
            1 => info.rx_buf_len = Some(f.uint("io-uring.rx-buf-len")?),
            _ => info.other.push(f.to_raw()),
        }
    }
    Ok(info)
}

pub(crate) fn emit_io_uring(w: &mut Writer, kind: u16, info: &IoUringProviderInfo) {
    let mut n = Writer::new();
    n.opt_uint(1, info.rx_buf_len);
    n.raw(&info.other);
    w.nest(kind, n);
}
