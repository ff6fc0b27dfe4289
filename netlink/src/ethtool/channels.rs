//! `ETHTOOL_A_CHANNELS_*`.

use super::Header;
use crate::attr::{Attrs, DecodeInPlace, RawAttr, Writer, reset_keeping_other};
use crate::error::CodecError;

/// Channel state (reply / notification) or a CHANNELS_SET request (only
/// `Some` fields are sent). A max/count pair is absent when its max is 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Channels {
    pub header: Option<Header>,
    pub rx_max: Option<u32>,
    pub tx_max: Option<u32>,
    pub other_max: Option<u32>,
    pub combined_max: Option<u32>,
    pub rx_count: Option<u32>,
    pub tx_count: Option<u32>,
    pub other_count: Option<u32>,
    pub combined_count: Option<u32>,
    pub other: Vec<RawAttr>,
}

pub(super) fn attr_name(k: u16) -> Option<&'static str> {
    Some(match k {
        1 => "header",
        2 => "rx-max",
        3 => "tx-max",
        4 => "other-max",
        5 => "combined-max",
        6 => "rx-count",
        7 => "tx-count",
        8 => "other-count",
        9 => "combined-count",
        _ => return None,
    })
}

impl DecodeInPlace for Channels {
    fn parse_into(&mut self, attrs: &[u8]) -> Result<(), CodecError> {
        let mut header = self.header.take();
        reset_keeping_other(self, |v| &mut v.other);
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                1 => {
                    let mut h = header.take().unwrap_or_default();
                    h.parse_into(&a)?;
                    self.header = Some(h);
                }
                2 => self.rx_max = Some(a.u32("channels.rx-max")?),
                3 => self.tx_max = Some(a.u32("channels.tx-max")?),
                4 => self.other_max = Some(a.u32("channels.other-max")?),
                5 => self.combined_max = Some(a.u32("channels.combined-max")?),
                6 => self.rx_count = Some(a.u32("channels.rx-count")?),
                7 => self.tx_count = Some(a.u32("channels.tx-count")?),
                8 => self.other_count = Some(a.u32("channels.other-count")?),
                9 => self.combined_count = Some(a.u32("channels.combined-count")?),
                _ => self.other.push(a.to_raw()),
            }
        }
        Ok(())
    }
}

impl Channels {
    /// In the kernel's order (`channels_fill_reply`): max, then count.
    pub(crate) fn emit(&self, w: &mut Writer) {
        if let Some(h) = &self.header {
            h.emit(w, 1);
        }
        w.opt_u32(2, self.rx_max);
        w.opt_u32(6, self.rx_count);
        w.opt_u32(3, self.tx_max);
        w.opt_u32(7, self.tx_count);
        w.opt_u32(4, self.other_max);
        w.opt_u32(8, self.other_count);
        w.opt_u32(5, self.combined_max);
        w.opt_u32(9, self.combined_count);
        w.raw(&self.other);
    }
}
