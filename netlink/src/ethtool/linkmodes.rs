//! `ETHTOOL_A_LINKMODES_*`: what pptune reads of a link's modes is its
//! negotiated speed (and duplex, autoneg, lanes); the link-mode bitsets
//! (`ours`, `peer`) and the rest are kept verbatim.

use super::Header;
use crate::attr::{Attrs, DecodeInPlace, RawAttr, Writer, reset_keeping_other};
use crate::error::CodecError;

/// `SPEED_UNKNOWN` (`include/uapi/linux/ethtool.h`): no link, or a driver
/// that does not know.
pub const SPEED_UNKNOWN: u32 = u32::MAX;

/// A LINKMODES_GET reply or notification. pptune never sets link modes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Linkmodes {
    pub header: Option<Header>,
    pub autoneg: Option<u8>,
    /// Mb/s; [`SPEED_UNKNOWN`] when the link is down or the driver does
    /// not know.
    pub speed: Option<u32>,
    /// `DUPLEX_HALF` 0, `DUPLEX_FULL` 1, `DUPLEX_UNKNOWN` 255.
    pub duplex: Option<u8>,
    pub lanes: Option<u32>,
    /// The rest (the `ours`/`peer` bitsets, master-slave, rate matching),
    /// in the order received.
    pub other: Vec<RawAttr>,
}

pub(super) fn attr_name(k: u16) -> Option<&'static str> {
    Some(match k {
        1 => "header",
        2 => "autoneg",
        3 => "ours",
        4 => "peer",
        5 => "speed",
        6 => "duplex",
        7 => "master-slave-cfg",
        8 => "master-slave-state",
        9 => "lanes",
        10 => "rate-matching",
        _ => return None,
    })
}

impl DecodeInPlace for Linkmodes {
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
                2 => self.autoneg = Some(a.u8("linkmodes.autoneg")?),
                5 => self.speed = Some(a.u32("linkmodes.speed")?),
                6 => self.duplex = Some(a.u8("linkmodes.duplex")?),
                9 => self.lanes = Some(a.u32("linkmodes.lanes")?),
                _ => self.other.push(a.to_raw()),
            }
        }
        Ok(())
    }
}

impl Linkmodes {
    /// The speed in Mb/s, when the kernel knows one.
    #[must_use]
    pub fn speed_mbps(&self) -> Option<u32> {
        self.speed.filter(|s| *s != SPEED_UNKNOWN && *s != 0)
    }

    /// In the kernel's order (`linkmodes_fill_reply`): autoneg, the
    /// bitsets, speed, duplex, lanes, then master-slave and rate matching.
    pub(crate) fn emit(&self, w: &mut Writer) {
        if let Some(h) = &self.header {
            h.emit(w, 1);
        }
        w.opt_u8(2, self.autoneg);
        let (bitsets, rest): (Vec<_>, Vec<_>) = self
            .other
            .iter()
            .cloned()
            // The kind as kept carries NLA_F_NESTED (the bitsets are nests).
            .partition(|a| matches!(a.kind & 0x3fff, 3 | 4));
        w.raw(&bitsets);
        w.opt_u32(5, self.speed);
        w.opt_u8(6, self.duplex);
        w.opt_u32(9, self.lanes);
        w.raw(&rest);
    }
}
