//! The `ethtool` generic netlink family: rings and channels
//! (`Documentation/netlink/specs/ethtool.yaml`).
//!
//! Message ids differ by direction and overlap (16 is RINGS_SET going in
//! and RINGS_GET_REPLY coming out; 17 is CHANNELS_GET in and RINGS_NTF
//! out). [`EthtoolMessage`] keeps the command as sent or received, and
//! decoding maps ids the kernel→user way, since decoding is for replies.

mod channels;
mod rings;

pub use channels::Channels;
pub use rings::Rings;

use crate::attr::{Attrs, RawAttr, Writer};
use crate::error::CodecError;
use crate::genl::GenlPayload;

pub const FAMILY: &str = "ethtool";
/// The multicast group carrying `*_NTF` messages.
pub const GROUP_MONITOR: &str = "monitor";

/// userspace → kernel message ids.
pub mod req {
    pub const RINGS_GET: u8 = 15;
    pub const RINGS_SET: u8 = 16;
    pub const CHANNELS_GET: u8 = 17;
    pub const CHANNELS_SET: u8 = 18;
}

/// kernel → userspace message ids.
pub mod reply {
    pub const RINGS_GET_REPLY: u8 = 16;
    pub const RINGS_NTF: u8 = 17;
    pub const CHANNELS_GET_REPLY: u8 = 18;
    pub const CHANNELS_NTF: u8 = 19;
}

/// `ETHTOOL_A_HEADER_FLAGS` values.
pub const FLAG_COMPACT_BITSETS: u32 = 1;
pub const FLAG_OMIT_REPLY: u32 = 2;

/// The request/reply header nest (`ETHTOOL_A_*_HEADER`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    pub dev_index: Option<u32>,
    pub dev_name: Option<String>,
    pub flags: Option<u32>,
    pub phy_index: Option<u32>,
    pub other: Vec<RawAttr>,
}

impl Header {
    /// Select a device by ifindex.
    #[must_use]
    pub fn ifindex(ifindex: u32) -> Self {
        Self {
            dev_index: Some(ifindex),
            ..Self::default()
        }
    }

    /// Select a device by name.
    #[must_use]
    pub fn name(name: &str) -> Self {
        Self {
            dev_name: Some(name.to_owned()),
            ..Self::default()
        }
    }

    pub(crate) fn parse(a: &crate::attr::Attr<'_>) -> Result<Self, CodecError> {
        let mut h = Self::default();
        for f in a.nested() {
            let f = f?;
            match f.kind {
                1 => h.dev_index = Some(f.u32("header.dev-index")?),
                2 => h.dev_name = Some(f.string("header.dev-name")?),
                3 => h.flags = Some(f.u32("header.flags")?),
                4 => h.phy_index = Some(f.u32("header.phy-index")?),
                _ => h.other.push(f.to_raw()),
            }
        }
        Ok(h)
    }

    pub(crate) fn emit(&self, w: &mut Writer, kind: u16) {
        let mut n = Writer::new();
        n.opt_u32(1, self.dev_index);
        if let Some(name) = &self.dev_name {
            n.string(2, name);
        }
        n.opt_u32(3, self.flags);
        n.opt_u32(4, self.phy_index);
        n.raw(&self.other);
        w.nest(kind, n);
    }
}

/// The body of an ethtool message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EthtoolBody {
    Rings(Rings),
    Channels(Channels),
    /// Any other message: attributes kept verbatim.
    Other(Vec<RawAttr>),
}

/// An ethtool family message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthtoolMessage {
    pub cmd: u8,
    pub body: EthtoolBody,
}

impl EthtoolMessage {
    /// RINGS_GET for one device.
    #[must_use]
    pub fn rings_get(header: Header) -> Self {
        Self {
            cmd: req::RINGS_GET,
            body: EthtoolBody::Rings(Rings {
                header: Some(header),
                ..Rings::default()
            }),
        }
    }

    /// RINGS_SET: only the `Some` fields of `rings` are sent.
    #[must_use]
    pub fn rings_set(rings: Rings) -> Self {
        Self {
            cmd: req::RINGS_SET,
            body: EthtoolBody::Rings(rings),
        }
    }

    /// CHANNELS_GET for one device.
    #[must_use]
    pub fn channels_get(header: Header) -> Self {
        Self {
            cmd: req::CHANNELS_GET,
            body: EthtoolBody::Channels(Channels {
                header: Some(header),
                ..Channels::default()
            }),
        }
    }

    /// CHANNELS_SET: only the `Some` fields are sent.
    #[must_use]
    pub fn channels_set(channels: Channels) -> Self {
        Self {
            cmd: req::CHANNELS_SET,
            body: EthtoolBody::Channels(channels),
        }
    }
}

impl GenlPayload for EthtoolMessage {
    const FAMILY: &'static str = FAMILY;
    const VERSION: u8 = 1;

    fn cmd(&self) -> u8 {
        self.cmd
    }

    fn emit_attrs(&self, w: &mut Writer) {
        match &self.body {
            EthtoolBody::Rings(r) => r.emit(w),
            EthtoolBody::Channels(c) => c.emit(w),
            EthtoolBody::Other(raw) => w.raw(raw),
        }
    }

    fn parse_attrs(cmd: u8, attrs: &[u8]) -> Result<Self, CodecError> {
        let body = match cmd {
            req::RINGS_GET | reply::RINGS_GET_REPLY | reply::RINGS_NTF => {
                EthtoolBody::Rings(Rings::parse(attrs)?)
            }
            reply::CHANNELS_GET_REPLY | reply::CHANNELS_NTF => {
                EthtoolBody::Channels(Channels::parse(attrs)?)
            }
            _ => EthtoolBody::Other(
                Attrs::new(attrs)
                    .map(|a| a.map(|a| a.to_raw()))
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(Self { cmd, body })
    }

    /// Names for the request-side commands (what an extack offset points
    /// into).
    fn attr_name(cmd: u8, path: &[u16]) -> String {
        let (obj, name): (&str, fn(u16) -> Option<&'static str>) = match cmd {
            req::RINGS_GET | req::RINGS_SET => ("rings", rings::attr_name),
            req::CHANNELS_GET | req::CHANNELS_SET => ("channels", channels::attr_name),
            _ => ("ethtool", |_| None),
        };
        let mut parts = vec![obj.to_owned()];
        for (i, k) in path.iter().enumerate() {
            let n = if i == 0 {
                name(*k)
            } else {
                header_attr_name(*k)
            };
            parts.push(n.map_or_else(|| k.to_string(), str::to_owned));
        }
        parts.join(".")
    }
}

fn header_attr_name(k: u16) -> Option<&'static str> {
    Some(match k {
        1 => "dev-index",
        2 => "dev-name",
        3 => "flags",
        4 => "phy-index",
        _ => return None,
    })
}

crate::genl::impl_genl_traits!(EthtoolMessage);
