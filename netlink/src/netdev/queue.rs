//! `queue` and `napi` attribute sets.

use super::{emit_io_uring, parse_io_uring};
use crate::attr::{Attrs, DecodeInPlace, RawAttr, Writer, reset_keeping_other};
use crate::error::CodecError;
use crate::netdev::IoUringProviderInfo;

/// `queue-type` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueType {
    Rx,
    Tx,
    Other(u32),
}

impl From<u32> for QueueType {
    fn from(v: u32) -> Self {
        match v {
            0 => Self::Rx,
            1 => Self::Tx,
            v => Self::Other(v),
        }
    }
}

impl From<QueueType> for u32 {
    fn from(v: QueueType) -> Self {
        match v {
            QueueType::Rx => 0,
            QueueType::Tx => 1,
            QueueType::Other(v) => v,
        }
    }
}

/// `queue-id` nest inside a lease.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseQueue {
    pub id: Option<u32>,
    pub queue_type: Option<u32>,
}

/// `lease` nest: the queue is leased to/from another device (7.1+).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lease {
    pub ifindex: Option<u32>,
    pub queue: Option<LeaseQueue>,
    pub netns_id: Option<i32>,
    pub other: Vec<RawAttr>,
}

/// `queue` attribute set (queue-get).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queue {
    pub id: Option<u32>,
    pub ifindex: Option<u32>,
    pub queue_type: Option<QueueType>,
    pub napi_id: Option<u32>,
    pub dmabuf: Option<u32>,
    pub io_uring: Option<IoUringProviderInfo>,
    /// The `xsk` nest is present (an AF_XDP pool is bound); it has no members.
    pub xsk: bool,
    pub lease: Option<Lease>,
    pub other: Vec<RawAttr>,
}

impl Queue {
    /// The `type` attribute's id and name (the decoders' type filter reads
    /// it before the rest of a reply).
    pub(crate) const TYPE_ATTR: u16 = 3;
    pub(crate) const TYPE_NAME: &'static str = "queue.type";
}

impl DecodeInPlace for Queue {
    fn parse_into(&mut self, attrs: &[u8]) -> Result<(), CodecError> {
        reset_keeping_other(self, |v| &mut v.other);
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                1 => self.id = Some(a.u32("queue.id")?),
                2 => self.ifindex = Some(a.u32("queue.ifindex")?),
                Self::TYPE_ATTR => self.queue_type = Some(a.u32(Self::TYPE_NAME)?.into()),
                4 => self.napi_id = Some(a.u32("queue.napi-id")?),
                5 => self.dmabuf = Some(a.u32("queue.dmabuf")?),
                6 => self.io_uring = Some(parse_io_uring(&a)?),
                7 => self.xsk = true,
                8 => {
                    let mut l = Lease::default();
                    for f in a.nested() {
                        let f = f?;
                        match f.kind {
                            1 => l.ifindex = Some(f.u32("queue.lease.ifindex")?),
                            2 => {
                                let mut lq = LeaseQueue::default();
                                for g in f.nested() {
                                    let g = g?;
                                    match g.kind {
                                        1 => lq.id = Some(g.u32("queue.lease.queue.id")?),
                                        2 => {
                                            lq.queue_type = Some(g.u32("queue.lease.queue.type")?);
                                        }
                                        _ => {}
                                    }
                                }
                                l.queue = Some(lq);
                            }
                            3 => l.netns_id = Some(f.i32("queue.lease.netns-id")?),
                            _ => l.other.push(f.to_raw()),
                        }
                    }
                    self.lease = Some(l);
                }
                _ => self.other.push(a.to_raw()),
            }
        }
        Ok(())
    }
}

impl Queue {
    /// In the kernel's order (`netdev_nl_queue_fill_one`): id, type, ifindex.
    pub(crate) fn emit(&self, w: &mut Writer) {
        w.opt_u32(1, self.id);
        w.opt_u32(Self::TYPE_ATTR, self.queue_type.map(u32::from));
        w.opt_u32(2, self.ifindex);
        w.opt_u32(4, self.napi_id);
        w.opt_u32(5, self.dmabuf);
        if let Some(io) = &self.io_uring {
            emit_io_uring(w, 6, io);
        }
        if self.xsk {
            w.nest(7, Writer::new());
        }
        if let Some(l) = &self.lease {
            let mut n = Writer::new();
            n.opt_u32(1, l.ifindex);
            if let Some(lq) = &l.queue {
                let mut m = Writer::new();
                m.opt_u32(1, lq.id);
                m.opt_u32(2, lq.queue_type);
                n.nest(2, m);
            }
            n.opt_i32(3, l.netns_id);
            n.raw(&l.other);
            w.nest(8, n);
        }
        w.raw(&self.other);
    }
}

/// `napi` attribute set (napi-get replies, napi-set requests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Napi {
    pub ifindex: Option<u32>,
    pub id: Option<u32>,
    pub irq: Option<u32>,
    /// Kernel thread pid in threaded mode.
    pub pid: Option<u32>,
    /// Written with `nla_put_s32` by the kernel; read as u32.
    pub defer_hard_irqs: Option<u32>,
    /// Nanoseconds (`uint`).
    pub gro_flush_timeout: Option<u64>,
    /// Nanoseconds (`uint`).
    pub irq_suspend_timeout: Option<u64>,
    /// 0 disabled, 1 enabled, 2 busy-poll. Written with `nla_put_uint`
    /// although the spec says u32, so read as `uint`.
    pub threaded: Option<u64>,
    pub other: Vec<RawAttr>,
}

impl Napi {
    pub(crate) fn parse(attrs: &[u8]) -> Result<Self, CodecError> {
        let mut n = Self::default();
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                1 => n.ifindex = Some(a.u32("napi.ifindex")?),
                2 => n.id = Some(a.u32("napi.id")?),
                3 => n.irq = Some(a.u32("napi.irq")?),
                4 => n.pid = Some(a.u32("napi.pid")?),
                5 => n.defer_hard_irqs = Some(a.u32("napi.defer-hard-irqs")?),
                6 => n.gro_flush_timeout = Some(a.uint("napi.gro-flush-timeout")?),
                7 => n.irq_suspend_timeout = Some(a.uint("napi.irq-suspend-timeout")?),
                8 => n.threaded = Some(a.uint("napi.threaded")?),
                _ => n.other.push(a.to_raw()),
            }
        }
        Ok(n)
    }

    /// In the kernel's order (`netdev_nl_napi_fill_one`).
    pub(crate) fn emit(&self, w: &mut Writer) {
        w.opt_u32(2, self.id);
        w.opt_u32(1, self.ifindex);
        w.opt_u32(3, self.irq);
        w.opt_uint(8, self.threaded);
        w.opt_u32(4, self.pid);
        w.opt_u32(5, self.defer_hard_irqs);
        w.opt_uint(7, self.irq_suspend_timeout);
        w.opt_uint(6, self.gro_flush_timeout);
        w.raw(&self.other);
    }
}
