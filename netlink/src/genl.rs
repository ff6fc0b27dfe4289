//! What every generic netlink family codec in this crate shares, and the
//! glue to `netlink-packet-generic`'s traits (`GenlFamily`, `Emitable`,
//! `ParseableParametrized<[u8], GenlHeader>`), so our payloads also work in
//! a `GenlMessage` for anyone using that stack.

use crate::attr::Writer;
use crate::error::CodecError;

/// A generic netlink family's message payload (after the genl header).
pub trait GenlPayload: Sized {
    /// Family name resolved through nlctrl.
    const FAMILY: &'static str;
    /// `genlmsghdr.version` we send.
    const VERSION: u8;
    /// The command of this message.
    fn cmd(&self) -> u8;
    /// Write the attributes.
    fn emit_attrs(&self, w: &mut Writer);
    /// Decode the attributes of a message with command `cmd`.
    fn parse_attrs(cmd: u8, attrs: &[u8]) -> Result<Self, CodecError>;
    /// Name an attribute path (outermost first) in a request with command
    /// `cmd`, for error messages. Defaults to the numbers.
    fn attr_name(cmd: u8, path: &[u16]) -> String {
        let _ = cmd;
        path.iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The attributes as bytes.
    fn attrs_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.emit_attrs(&mut w);
        w.into_bytes()
    }

    /// genl header + attributes.
    fn to_genl_bytes(&self) -> Vec<u8> {
        crate::frame::genl_payload(self.cmd(), Self::VERSION, &self.attrs_bytes())
    }

    /// Decode genl header + attributes.
    fn from_genl_bytes(payload: &[u8]) -> Result<Self, CodecError> {
        let (cmd, _version, attrs) = crate::frame::genl_split(payload)?;
        Self::parse_attrs(cmd, attrs)
    }
}

/// Implement `netlink-packet-generic`'s traits for a [`GenlPayload`].
macro_rules! impl_genl_traits {
    ($t:ty) => {
        impl netlink_packet_generic::GenlFamily for $t {
            fn family_name() -> &'static str {
                <$t as $crate::genl::GenlPayload>::FAMILY
            }
            fn command(&self) -> u8 {
                $crate::genl::GenlPayload::cmd(self)
            }
            fn version(&self) -> u8 {
                <$t as $crate::genl::GenlPayload>::VERSION
            }
        }

        impl netlink_packet_core::Emitable for $t {
            fn buffer_len(&self) -> usize {
                $crate::genl::GenlPayload::attrs_bytes(self).len()
            }
            fn emit(&self, buffer: &mut [u8]) {
                let b = $crate::genl::GenlPayload::attrs_bytes(self);
                let n = b.len().min(buffer.len());
                buffer[..n].copy_from_slice(&b[..n]);
            }
        }

        impl netlink_packet_core::ParseableParametrized<[u8], netlink_packet_generic::GenlHeader>
            for $t
        {
            fn parse_with_param(
                buf: &[u8],
                header: netlink_packet_generic::GenlHeader,
            ) -> Result<Self, netlink_packet_core::DecodeError> {
                <$t as $crate::genl::GenlPayload>::parse_attrs(header.cmd, buf).map_err(Into::into)
            }
        }
    };
}
pub(crate) use impl_genl_traits;
