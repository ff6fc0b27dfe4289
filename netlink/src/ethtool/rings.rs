//! `ETHTOOL_A_RINGS_*`.

use super::Header;
use crate::attr::{Attrs, DecodeInPlace, RawAttr, Writer, reset_keeping_other};
use crate::error::CodecError;

/// Ring state (reply / notification) or a RINGS_SET request (only `Some`
/// fields are sent). A max/current pair is absent when the driver reports a
/// zero maximum for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rings {
    pub header: Option<Header>,
    pub rx_max: Option<u32>,
    pub rx_mini_max: Option<u32>,
    pub rx_jumbo_max: Option<u32>,
    pub tx_max: Option<u32>,
    pub rx: Option<u32>,
    pub rx_mini: Option<u32>,
    pub rx_jumbo: Option<u32>,
    pub tx: Option<u32>,
    pub rx_buf_len: Option<u32>,
    /// 0 unknown, 1 disabled, 2 enabled.
    pub tcp_data_split: Option<u8>,
    pub cqe_size: Option<u32>,
    pub tx_push: Option<u8>,
    pub rx_push: Option<u8>,
    pub tx_push_buf_len: Option<u32>,
    pub tx_push_buf_len_max: Option<u32>,
    pub hds_thresh: Option<u32>,
    pub hds_thresh_max: Option<u32>,
    pub other: Vec<RawAttr>,
}

pub(super) fn attr_name(k: u16) -> Option<&'static str> {
    Some(match k {
        1 => "header",
        2 => "rx-max",
        3 => "rx-mini-max",
        4 => "rx-jumbo-max",
        5 => "tx-max",
        6 => "rx",
        7 => "rx-mini",
        8 => "rx-jumbo",
        9 => "tx",
        10 => "rx-buf-len",
        11 => "tcp-data-split",
        12 => "cqe-size",
        13 => "tx-push",
        14 => "rx-push",
        15 => "tx-push-buf-len",
        16 => "tx-push-buf-len-max",
        17 => "hds-thresh",
        18 => "hds-thresh-max",
        _ => return None,
    })
}

impl DecodeInPlace for Rings {
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
                2 => self.rx_max = Some(a.u32("rings.rx-max")?),
                3 => self.rx_mini_max = Some(a.u32("rings.rx-mini-max")?),
                4 => self.rx_jumbo_max = Some(a.u32("rings.rx-jumbo-max")?),
                5 => self.tx_max = Some(a.u32("rings.tx-max")?),
                6 => self.rx = Some(a.u32("rings.rx")?),
                7 => self.rx_mini = Some(a.u32("rings.rx-mini")?),
                8 => self.rx_jumbo = Some(a.u32("rings.rx-jumbo")?),
                9 => self.tx = Some(a.u32("rings.tx")?),
                10 => self.rx_buf_len = Some(a.u32("rings.rx-buf-len")?),
                11 => self.tcp_data_split = Some(a.u8("rings.tcp-data-split")?),
                12 => self.cqe_size = Some(a.u32("rings.cqe-size")?),
                13 => self.tx_push = Some(a.u8("rings.tx-push")?),
                14 => self.rx_push = Some(a.u8("rings.rx-push")?),
                15 => self.tx_push_buf_len = Some(a.u32("rings.tx-push-buf-len")?),
                16 => self.tx_push_buf_len_max = Some(a.u32("rings.tx-push-buf-len-max")?),
                17 => self.hds_thresh = Some(a.u32("rings.hds-thresh")?),
                18 => self.hds_thresh_max = Some(a.u32("rings.hds-thresh-max")?),
                _ => self.other.push(a.to_raw()),
            }
        }
        Ok(())
    }
}

impl Rings {
    /// In the kernel's order (`rings_fill_reply`): each max before its
    /// current value.
    pub(crate) fn emit(&self, w: &mut Writer) {
        if let Some(h) = &self.header {
            h.emit(w, 1);
        }
        w.opt_u32(2, self.rx_max);
        w.opt_u32(6, self.rx);
        w.opt_u32(3, self.rx_mini_max);
        w.opt_u32(7, self.rx_mini);
        w.opt_u32(4, self.rx_jumbo_max);
        w.opt_u32(8, self.rx_jumbo);
        w.opt_u32(5, self.tx_max);
        w.opt_u32(9, self.tx);
        w.opt_u32(10, self.rx_buf_len);
        w.opt_u8(11, self.tcp_data_split);
        w.opt_u32(12, self.cqe_size);
        w.opt_u8(13, self.tx_push);
        w.opt_u8(14, self.rx_push);
        w.opt_u32(16, self.tx_push_buf_len_max);
        w.opt_u32(15, self.tx_push_buf_len);
        w.opt_u32(17, self.hds_thresh);
        w.opt_u32(18, self.hds_thresh_max);
        w.raw(&self.other);
    }
}
