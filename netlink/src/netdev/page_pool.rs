//! `page-pool` and `page-pool-stats` attribute sets.

use super::{emit_io_uring, parse_io_uring};
use crate::attr::{Attrs, DecodeInPlace, RawAttr, Writer, reset_keeping_other};
use crate::error::CodecError;

/// `io-uring-provider-info` nest. Present (possibly empty) when an io_uring
/// zero-copy RX provider backs the pool or queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoUringProviderInfo {
    /// `1 << niov_shift` (newer kernels only).
    pub rx_buf_len: Option<u64>,
    pub other: Vec<RawAttr>,
}

/// `page-pool` attribute set (page-pool-get replies and notifications).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagePool {
    pub id: Option<u64>,
    /// Omitted once the pool is orphaned to loopback.
    pub ifindex: Option<u32>,
    pub napi_id: Option<u64>,
    pub inflight: Option<u64>,
    pub inflight_mem: Option<u64>,
    /// CLOCK_BOOTTIME seconds of `page_pool_destroy()` with pages out.
    pub detach_time: Option<u64>,
    /// devmem binding id.
    pub dmabuf: Option<u32>,
    pub io_uring: Option<IoUringProviderInfo>,
    pub other: Vec<RawAttr>,
}

impl DecodeInPlace for PagePool {
    fn parse_into(&mut self, attrs: &[u8]) -> Result<(), CodecError> {
        reset_keeping_other(self, |v| &mut v.other);
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                1 => self.id = Some(a.uint("page-pool.id")?),
                2 => self.ifindex = Some(a.u32("page-pool.ifindex")?),
                3 => self.napi_id = Some(a.uint("page-pool.napi-id")?),
                4 => self.inflight = Some(a.uint("page-pool.inflight")?),
                5 => self.inflight_mem = Some(a.uint("page-pool.inflight-mem")?),
                6 => self.detach_time = Some(a.uint("page-pool.detach-time")?),
                7 => self.dmabuf = Some(a.u32("page-pool.dmabuf")?),
                8 => self.io_uring = Some(parse_io_uring(&a)?),
                _ => self.other.push(a.to_raw()),
            }
        }
        Ok(())
    }
}

impl PagePool {
    /// In the kernel's order (`page_pool_nl_fill`).
    pub(crate) fn emit(&self, w: &mut Writer) {
        w.opt_uint(1, self.id);
        w.opt_u32(2, self.ifindex);
        w.opt_uint(3, self.napi_id);
        w.opt_uint(4, self.inflight);
        w.opt_uint(5, self.inflight_mem);
        w.opt_uint(6, self.detach_time);
        w.opt_u32(7, self.dmabuf);
        if let Some(io) = &self.io_uring {
            emit_io_uring(w, 8, io);
        }
        w.raw(&self.other);
    }
}

/// `page-pool-info` nest: which pool a stats entry is about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagePoolInfo {
    pub id: Option<u64>,
    pub ifindex: Option<u32>,
    pub other: Vec<RawAttr>,
}

macro_rules! counters {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident = $id:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fm])* pub $field: Option<u64>,)*
        }

        impl $name {
            /// Store a counter attribute; `false` if `kind` is not one.
            pub(crate) fn set(&mut self, a: &crate::attr::Attr<'_>) -> Result<bool, CodecError> {
                match a.kind {
                    $($id => self.$field = Some(a.uint(stringify!($field))?),)*
                    _ => return Ok(false),
                }
                Ok(true)
            }

            pub(crate) fn emit(&self, w: &mut Writer) {
                $(w.opt_uint($id, self.$field);)*
            }

            /// How many counters the set has.
            pub const COUNT: usize = [$($id),*].len();

            /// Each counter with its field name (the kernel's attribute
            /// name, `_` for `-`), in attribute order.
            #[must_use]
            pub fn named(&self) -> [(&'static str, Option<u64>); Self::COUNT] {
                [$((stringify!($field), self.$field)),*]
            }
        }
    };
}
pub(crate) use counters;

counters! {
    /// The page_pool counters (all `uint`). The kernel emits all it has
    /// when it has `CONFIG_PAGE_POOL_STATS`. This is the decode half of
    /// a counter (its attribute id); everything else about it comes from
    /// the one table in `policy/src/counters.rs`, which names the same
    /// counters in the same order (the daemon's conversion reads each of
    /// its fields here, and a test there compares the two lists).
    PoolCounters {
        alloc_fast = 8,
        alloc_slow = 9,
        alloc_slow_high_order = 10,
        alloc_empty = 11,
        alloc_refill = 12,
        alloc_waive = 13,
        recycle_cached = 14,
        recycle_cache_full = 15,
        recycle_ring = 16,
        recycle_ring_full = 17,
        recycle_released_refcnt = 18,
    }
}

/// `page-pool-stats` attribute set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagePoolStats {
    pub info: Option<PagePoolInfo>,
    pub counters: PoolCounters,
    pub other: Vec<RawAttr>,
}

impl DecodeInPlace for PagePoolStats {
    fn parse_into(&mut self, attrs: &[u8]) -> Result<(), CodecError> {
        reset_keeping_other(self, |v| &mut v.other);
        for a in Attrs::new(attrs) {
            let a = a?;
            if a.kind == 1 {
                let mut info = PagePoolInfo::default();
                for f in a.nested() {
                    let f = f?;
                    match f.kind {
                        1 => info.id = Some(f.uint("page-pool-stats.info.id")?),
                        2 => info.ifindex = Some(f.u32("page-pool-stats.info.ifindex")?),
                        _ => info.other.push(f.to_raw()),
                    }
                }
                self.info = Some(info);
            } else if !self.counters.set(&a)? {
                self.other.push(a.to_raw());
            }
        }
        Ok(())
    }
}

impl PagePoolStats {
    pub(crate) fn emit(&self, w: &mut Writer) {
        if let Some(info) = &self.info {
            let mut n = Writer::new();
            n.opt_uint(1, info.id);
            n.opt_u32(2, info.ifindex);
            n.raw(&info.other);
            w.nest(1, n);
        }
        self.counters.emit(w);
        w.raw(&self.other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::genl::GenlPayload;
    use crate::netdev::{NetdevBody, NetdevMessage, cmd};

    /// Hand-made (no pool reaches 2^32 pages in a test): every attribute,
    /// with values on both sides of the 4/8-byte `uint` boundary.
    #[test]
    fn handmade_page_pool_all_attributes_round_trip() {
        let pool = PagePool {
            id: Some(u64::from(u32::MAX) + 5),
            ifindex: None,
            napi_id: Some(8193),
            inflight: Some(3),
            inflight_mem: Some(1 << 40),
            detach_time: Some(1234),
            dmabuf: Some(7),
            io_uring: Some(IoUringProviderInfo {
                rx_buf_len: Some(4096),
                other: Vec::new(),
            }),
            other: Vec::new(),
        };
        let m = NetdevMessage {
            cmd: cmd::PAGE_POOL_CHANGE_NTF,
            body: NetdevBody::PagePool(pool),
        };
        let b = m.to_genl_bytes();
        assert_eq!(NetdevMessage::from_genl_bytes(&b).unwrap(), m);

        let stats = PagePoolStats {
            info: Some(PagePoolInfo {
                id: Some(9),
                ifindex: Some(2),
                other: Vec::new(),
            }),
            counters: PoolCounters {
                alloc_fast: Some(u64::MAX),
                alloc_slow: Some(1),
                recycle_ring_full: Some(0),
                ..PoolCounters::default()
            },
            other: Vec::new(),
        };
        let m = NetdevMessage {
            cmd: cmd::PAGE_POOL_STATS_GET,
            body: NetdevBody::PagePoolStats(stats),
        };
        let b = m.to_genl_bytes();
        assert_eq!(NetdevMessage::from_genl_bytes(&b).unwrap(), m);
    }

    #[test]
    fn empty_io_uring_nest_is_present() {
        // Older kernels emit an empty io-uring nest: presence is the signal.
        let mut w = crate::attr::Writer::new();
        w.nest(8, crate::attr::Writer::new());
        let b = w.into_bytes();
        let p = PagePool::parse(&b).unwrap();
        assert_eq!(p.io_uring, Some(IoUringProviderInfo::default()));
    }
}
