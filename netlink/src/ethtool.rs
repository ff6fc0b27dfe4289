//! The `ethtool` generic netlink family: rings and channels, and the
//! link's negotiated speed (`Documentation/netlink/specs/ethtool.yaml`).
//!
//! Message ids differ by direction and overlap (16 is RINGS_SET going in
//! and RINGS_GET_REPLY coming out; 17 is CHANNELS_GET in and RINGS_NTF
//! out). [`EthtoolMessage`] keeps the command as sent or received, and
//! decoding maps ids the kernel→user way, since decoding is for replies.

mod channels;
mod linkmodes;
mod rings;

pub use channels::Channels;
pub use linkmodes::{Linkmodes, SPEED_UNKNOWN};
pub use rings::Rings;

use crate::attr::{Attrs, DecodeInPlace as _, RawAttr, Writer};
use crate::error::CodecError;
use crate::genl::GenlPayload;

pub const FAMILY: &str = "ethtool";
/// The multicast group carrying `*_NTF` messages.
pub const GROUP_MONITOR: &str = "monitor";

/// userspace → kernel message ids.
pub mod req {
    pub const LINKMODES_GET: u8 = 4;
    pub const RINGS_GET: u8 = 15;
    pub const RINGS_SET: u8 = 16;
    pub const CHANNELS_GET: u8 = 17;
    pub const CHANNELS_SET: u8 = 18;
}

/// kernel → userspace message ids.
pub mod reply {
    pub const LINKMODES_GET_REPLY: u8 = 4;
    pub const LINKMODES_NTF: u8 = 5;
    pub const RINGS_GET_REPLY: u8 = 16;
    pub const RINGS_NTF: u8 = 17;
    pub const CHANNELS_GET_REPLY: u8 = 18;
    pub const CHANNELS_NTF: u8 = 19;
}

/// What a message with a given command decodes to (kernel→user ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Rings,
    Channels,
    Linkmodes,
    Other,
}

/// The body a message with command `cmd` carries, as decoding reads it.
#[must_use]
pub fn body_kind(cmd: u8) -> BodyKind {
    match cmd {
        req::RINGS_GET | reply::RINGS_GET_REPLY | reply::RINGS_NTF => BodyKind::Rings,
        reply::CHANNELS_GET_REPLY | reply::CHANNELS_NTF => BodyKind::Channels,
        reply::LINKMODES_GET_REPLY | reply::LINKMODES_NTF => BodyKind::Linkmodes,
        _ => BodyKind::Other,
    }
}

/// The genl payload of a `*_GET` request for one device by ifindex (the
/// header nest, attribute 1 of every ethtool request, holding only
/// `DEV_INDEX`), built on the stack: the bytes [`EthtoolMessage`] encodes
/// for `rings_get`/`channels_get` with [`Header::ifindex`] (test
/// `get_request_is_the_encoders_bytes`), without its allocations — a pass
/// asks this for every device.
#[must_use]
pub fn get_request(cmd: u8, ifindex: u32) -> [u8; 16] {
    const NLA_F_NESTED: u16 = 1 << 15;
    let mut b = [0u8; 16];
    b[0] = cmd;
    b[1] = <EthtoolMessage as GenlPayload>::VERSION;
    b[4..6].copy_from_slice(&12u16.to_ne_bytes());
    b[6..8].copy_from_slice(&(1 | NLA_F_NESTED).to_ne_bytes());
    b[8..10].copy_from_slice(&8u16.to_ne_bytes());
    b[10..12].copy_from_slice(&1u16.to_ne_bytes());
    b[12..16].copy_from_slice(&ifindex.to_ne_bytes());
    b
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

    /// [`Header::parse`] into `self`, every field overwritten, reusing the
    /// device name's and `other`'s buffers.
    pub(crate) fn parse_into(&mut self, a: &crate::attr::Attr<'_>) -> Result<(), CodecError> {
        let mut other = std::mem::take(&mut self.other);
        other.clear();
        let mut name = self.dev_name.take();
        *self = Self {
            other,
            ..Self::default()
        };
        for f in a.nested() {
            let f = f?;
            match f.kind {
                1 => self.dev_index = Some(f.u32("header.dev-index")?),
                2 => {
                    let n = name.get_or_insert_default();
                    n.clear();
                    n.push_str(&f.str());
                    self.dev_name = name.take();
                }
                3 => self.flags = Some(f.u32("header.flags")?),
                4 => self.phy_index = Some(f.u32("header.phy-index")?),
                _ => self.other.push(f.to_raw()),
            }
        }
        Ok(())
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
    Linkmodes(Linkmodes),
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

    /// LINKMODES_GET for one device, its bitsets asked compact (the reply
    /// carries every link mode the device knows twice over; pptune reads
    /// only the speed).
    #[must_use]
    pub fn linkmodes_get(mut header: Header) -> Self {
        header.flags = Some(header.flags.unwrap_or(0) | FLAG_COMPACT_BITSETS);
        Self {
            cmd: req::LINKMODES_GET,
            body: EthtoolBody::Linkmodes(Linkmodes {
                header: Some(header),
                ..Linkmodes::default()
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
            EthtoolBody::Linkmodes(l) => l.emit(w),
            EthtoolBody::Other(raw) => w.raw(raw),
        }
    }

    fn parse_attrs(cmd: u8, attrs: &[u8]) -> Result<Self, CodecError> {
        let body = match body_kind(cmd) {
            BodyKind::Rings => EthtoolBody::Rings(Rings::parse(attrs)?),
            BodyKind::Channels => EthtoolBody::Channels(Channels::parse(attrs)?),
            BodyKind::Linkmodes => EthtoolBody::Linkmodes(Linkmodes::parse(attrs)?),
            BodyKind::Other => EthtoolBody::Other(
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
            req::LINKMODES_GET => ("linkmodes", linkmodes::attr_name),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The stack-built request is byte for byte what the encoder makes.
    #[test]
    fn get_request_is_the_encoders_bytes() {
        for ifindex in [0, 1, 2, 77, 0x0102_0304, u32::MAX] {
            let h = || Header::ifindex(ifindex);
            assert_eq!(
                get_request(req::RINGS_GET, ifindex).to_vec(),
                EthtoolMessage::rings_get(h()).to_genl_bytes()
            );
            assert_eq!(
                get_request(req::CHANNELS_GET, ifindex).to_vec(),
                EthtoolMessage::channels_get(h()).to_genl_bytes()
            );
        }
    }

    /// Rings and channels decoded over other ones (another device's reply,
    /// a header with a longer name, unknown attributes) equal fresh decodes.
    #[test]
    fn parse_into_keeps_nothing_stale() {
        let mut w = Writer::new();
        Rings {
            header: Some(Header {
                dev_index: Some(9),
                dev_name: Some("a-much-longer-device-name".to_owned()),
                flags: Some(3),
                phy_index: Some(1),
                other: vec![RawAttr {
                    kind: 9,
                    value: vec![1, 2, 3, 4],
                }],
            }),
            rx: Some(1),
            rx_max: Some(2),
            tcp_data_split: Some(2),
            other: vec![RawAttr {
                kind: 99,
                value: vec![0; 4],
            }],
            ..Rings::default()
        }
        .emit(&mut w);
        let old = w.into_bytes();
        let mut w = Writer::new();
        Rings {
            header: Some(Header {
                dev_index: Some(3),
                dev_name: Some("eth0".to_owned()),
                ..Header::default()
            }),
            rx: Some(512),
            tx: Some(256),
            ..Rings::default()
        }
        .emit(&mut w);
        let new = w.into_bytes();
        let mut r = Rings::parse(&old).unwrap();
        r.parse_into(&new).unwrap();
        assert_eq!(r, Rings::parse(&new).unwrap());

        let mut w = Writer::new();
        Channels {
            header: Some(Header::name("x")),
            combined_count: Some(4),
            other: vec![RawAttr {
                kind: 50,
                value: vec![0; 4],
            }],
            ..Channels::default()
        }
        .emit(&mut w);
        let old = w.into_bytes();
        let mut w = Writer::new();
        Channels {
            rx_count: Some(2),
            ..Channels::default()
        }
        .emit(&mut w);
        let new = w.into_bytes();
        let mut c = Channels::parse(&old).unwrap();
        c.parse_into(&new).unwrap();
        assert_eq!(c, Channels::parse(&new).unwrap());
    }
}
