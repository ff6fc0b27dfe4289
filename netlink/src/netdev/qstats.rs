//! `qstats` attribute set.

use super::page_pool::counters;
use crate::attr::{Attrs, DecodeInPlace, RawAttr, Writer, reset_keeping_other};
use crate::error::CodecError;

/// `scope` flag for per-queue stats.
pub const QSTATS_SCOPE_QUEUE: u64 = 1;

counters! {
    /// qstats counters (all `uint`). `None` = the driver does not fill it.
    QstatsCounters {
        rx_packets = 8,
        rx_bytes = 9,
        tx_packets = 10,
        tx_bytes = 11,
        rx_alloc_fail = 12,
        rx_hw_drops = 13,
        rx_hw_drop_overruns = 14,
        rx_csum_complete = 15,
        rx_csum_unnecessary = 16,
        rx_csum_none = 17,
        rx_csum_bad = 18,
        rx_hw_gro_packets = 19,
        rx_hw_gro_bytes = 20,
        rx_hw_gro_wire_packets = 21,
        rx_hw_gro_wire_bytes = 22,
        rx_hw_drop_ratelimits = 23,
        tx_hw_drops = 24,
        tx_hw_drop_errors = 25,
        tx_csum_none = 26,
        tx_needs_csum = 27,
        tx_hw_gso_packets = 28,
        tx_hw_gso_bytes = 29,
        tx_hw_gso_wire_packets = 30,
        tx_hw_gso_wire_bytes = 31,
        tx_hw_drop_ratelimits = 32,
        tx_stop = 33,
        tx_wake = 34,
    }
}

/// One qstats entry: device totals (no queue keys) or one queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qstats {
    pub ifindex: Option<u32>,
    /// 0 rx, 1 tx (per-queue scope only).
    pub queue_type: Option<u32>,
    pub queue_id: Option<u32>,
    /// Request only: 0 = device, [`QSTATS_SCOPE_QUEUE`] = per queue.
    pub scope: Option<u64>,
    pub counters: QstatsCounters,
    pub other: Vec<RawAttr>,
}

impl Qstats {
    /// The `queue-type` attribute's id and name (the decoders' type filter
    /// reads it before the rest of a reply).
    pub(crate) const TYPE_ATTR: u16 = 2;
    pub(crate) const TYPE_NAME: &'static str = "qstats.queue-type";
}

impl DecodeInPlace for Qstats {
    fn parse_into(&mut self, attrs: &[u8]) -> Result<(), CodecError> {
        reset_keeping_other(self, |v| &mut v.other);
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                1 => self.ifindex = Some(a.u32("qstats.ifindex")?),
                Self::TYPE_ATTR => self.queue_type = Some(a.u32(Self::TYPE_NAME)?),
                3 => self.queue_id = Some(a.u32("qstats.queue-id")?),
                4 => self.scope = Some(a.uint("qstats.scope")?),
                _ => {
                    if !self.counters.set(&a)? {
                        self.other.push(a.to_raw());
                    }
                }
            }
        }
        Ok(())
    }
}

impl Qstats {
    pub(crate) fn emit(&self, w: &mut Writer) {
        w.opt_u32(1, self.ifindex);
        w.opt_u32(Self::TYPE_ATTR, self.queue_type);
        w.opt_u32(3, self.queue_id);
        w.opt_uint(4, self.scope);
        self.counters.emit(w);
        w.raw(&self.other);
    }
}
