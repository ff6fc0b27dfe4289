//! Netlink message framing: request headers, splitting a datagram into
//! messages, and `NLMSG_ERROR` / `NLMSG_DONE` with extended acks.
//!
//! `netlink-packet-core` 0.9's `ErrorMessage` keeps only the code and the
//! echoed header bytes; the extack TLVs (`NLMSGERR_ATTR_MSG`, `_OFFS`,
//! `_MISS_TYPE`) that say *why* the kernel refused are parsed here.

use crate::attr::Attrs;
use crate::error::{CodecError, KernelError};

pub const NLMSG_HDRLEN: usize = 16;
pub const GENL_HDRLEN: usize = 4;
pub const NLMSG_NOOP: u16 = 1;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLMSG_OVERRUN: u16 = 4;
pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_MULTI: u16 = 0x2;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_DUMP_INTR: u16 = 0x10;
pub const NLM_F_DUMP: u16 = 0x300;
pub const NLM_F_CAPPED: u16 = 0x100;
pub const NLM_F_ACK_TLVS: u16 = 0x200;

const NLMSGERR_ATTR_MSG: u16 = 1;
const NLMSGERR_ATTR_OFFS: u16 = 2;
const NLMSGERR_ATTR_MISS_TYPE: u16 = 5;
const NLMSGERR_ATTR_MISS_NEST: u16 = 6;

/// `struct nlmsghdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MsgHeader {
    pub len: u32,
    pub kind: u16,
    pub flags: u16,
    pub seq: u32,
    pub pid: u32,
}

impl MsgHeader {
    fn parse(b: &[u8]) -> Result<Self, CodecError> {
        if b.len() < NLMSG_HDRLEN {
            return Err(CodecError::Truncated {
                what: "netlink message header",
                need: NLMSG_HDRLEN,
                have: b.len(),
            });
        }
        let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(Self {
            len: u32_at(0),
            kind: u16::from_ne_bytes([b[4], b[5]]),
            flags: u16::from_ne_bytes([b[6], b[7]]),
            seq: u32_at(8),
            pid: u32_at(12),
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.len.to_ne_bytes());
        out.extend_from_slice(&self.kind.to_ne_bytes());
        out.extend_from_slice(&self.flags.to_ne_bytes());
        out.extend_from_slice(&self.seq.to_ne_bytes());
        out.extend_from_slice(&self.pid.to_ne_bytes());
    }
}

/// One netlink message: its header, payload and the whole message's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg<'a> {
    pub header: MsgHeader,
    pub payload: &'a [u8],
    pub bytes: &'a [u8],
}

/// Build a request: header + payload (payload already includes any family
/// header such as the genetlink one).
#[must_use]
pub fn request(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(NLMSG_HDRLEN + payload.len());
    request_into(&mut out, kind, flags, seq, payload);
    out
}

/// [`request`], appended to `out` (a buffer reused across requests).
pub fn request_into(out: &mut Vec<u8>, kind: u16, flags: u16, seq: u32, payload: &[u8]) {
    let len = NLMSG_HDRLEN + payload.len();
    MsgHeader {
        len: u32::try_from(len).unwrap_or(u32::MAX),
        kind,
        flags,
        seq,
        pid: 0,
    }
    .emit(out);
    out.extend_from_slice(payload);
}

/// Build a genetlink payload: genl header + attributes.
#[must_use]
pub fn genl_payload(cmd: u8, version: u8, attrs: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(GENL_HDRLEN + attrs.len());
    out.extend_from_slice(&[cmd, version, 0, 0]);
    out.extend_from_slice(attrs);
    out
}

/// Split a datagram into messages. Stops at the first malformed header.
pub fn split(buf: &[u8]) -> impl Iterator<Item = Result<Msg<'_>, CodecError>> {
    let mut rest = buf;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || rest.is_empty() {
            return None;
        }
        let r = (|| {
            let header = MsgHeader::parse(rest)?;
            let len = usize::try_from(header.len).unwrap_or(usize::MAX);
            if len < NLMSG_HDRLEN || len > rest.len() {
                return Err(CodecError::BadFrame {
                    what: "netlink message",
                    len,
                    have: rest.len(),
                });
            }
            let bytes = &rest[..len];
            let msg = Msg {
                header,
                payload: &bytes[NLMSG_HDRLEN..],
                bytes,
            };
            rest = &rest[crate::attr::align(len).min(rest.len())..];
            Ok(msg)
        })();
        if r.is_err() {
            failed = true;
        }
        Some(r)
    })
}

/// Split a genetlink payload into (cmd, version, attributes).
pub fn genl_split(payload: &[u8]) -> Result<(u8, u8, &[u8]), CodecError> {
    if payload.len() < GENL_HDRLEN {
        return Err(CodecError::Truncated {
            what: "genetlink header",
            need: GENL_HDRLEN,
            have: payload.len(),
        });
    }
    Ok((payload[0], payload[1], &payload[GENL_HDRLEN..]))
}

/// Decode an `NLMSG_ERROR` payload. `Ok(None)` is an ACK (code 0).
/// `request` is the request we sent, used to name the offending attribute.
pub fn parse_error(header: &MsgHeader, payload: &[u8]) -> Result<Option<KernelError>, CodecError> {
    if payload.len() < 4 {
        return Err(CodecError::Truncated {
            what: "NLMSG_ERROR",
            need: 4,
            have: payload.len(),
        });
    }
    let code = i32::from_ne_bytes([payload[0], payload[1], payload[2], payload[3]]);
    if code == 0 {
        return Ok(None);
    }
    let mut err = KernelError::from_errno(code.saturating_abs());
    // The echoed request: its header only when capped, else header + payload.
    let echoed = MsgHeader::parse(&payload[4..])?;
    if header.flags & NLM_F_ACK_TLVS != 0 {
        let skip = if header.flags & NLM_F_CAPPED != 0 {
            NLMSG_HDRLEN
        } else {
            usize::try_from(echoed.len).unwrap_or(usize::MAX)
        };
        let start = 4usize.saturating_add(crate::attr::align(skip));
        let tlvs = payload.get(start..).ok_or(CodecError::Truncated {
            what: "NLMSG_ERROR echoed request",
            need: start,
            have: payload.len(),
        })?;
        parse_extack(tlvs, &mut err)?;
    }
    Ok(Some(err))
}

/// Decode an `NLMSG_DONE` payload: a dump can end with an error code and
/// extack instead of a clean 0.
pub fn parse_done(header: &MsgHeader, payload: &[u8]) -> Result<Option<KernelError>, CodecError> {
    // Old kernels may send an empty DONE.
    if payload.len() < 4 {
        return Ok(None);
    }
    let code = i32::from_ne_bytes([payload[0], payload[1], payload[2], payload[3]]);
    if code == 0 {
        return Ok(None);
    }
    let mut err = KernelError::from_errno(code.saturating_abs());
    if header.flags & NLM_F_ACK_TLVS != 0 {
        parse_extack(&payload[4..], &mut err)?;
    }
    Ok(Some(err))
}

fn parse_extack(tlvs: &[u8], err: &mut KernelError) -> Result<(), CodecError> {
    for a in Attrs::new(tlvs) {
        let a = a?;
        match a.kind {
            NLMSGERR_ATTR_MSG => err.message = Some(a.string()),
            NLMSGERR_ATTR_OFFS => err.offset = Some(a.u32("extack offset")?),
            NLMSGERR_ATTR_MISS_TYPE => err.missing_type = Some(a.u32("extack miss type")?),
            NLMSGERR_ATTR_MISS_NEST => err.missing_nest = Some(a.u32("extack miss nest")?),
            _ => {}
        }
    }
    Ok(())
}

/// Find the attribute at byte `offset` of a genetlink request (offsets count
/// from the start of the `nlmsghdr`), returning the attribute-type path from
/// the outermost nest inwards.
#[must_use]
pub fn genl_attr_path(request: &[u8], offset: u32) -> Option<Vec<u16>> {
    let off = usize::try_from(offset).ok()?;
    let base = NLMSG_HDRLEN + GENL_HDRLEN;
    let mut path = Vec::new();
    let mut start = base;
    let mut buf = request.get(base..)?;
    loop {
        let mut pos = start;
        let mut found = None;
        for a in Attrs::new(buf) {
            let a = a.ok()?;
            let total = 4 + a.value.len();
            if off == pos {
                path.push(a.kind);
                return Some(path);
            }
            if off > pos && off < pos + total {
                found = Some((a.kind, pos + 4, a.value));
                break;
            }
            pos += crate::attr::align(total);
        }
        let (kind, inner_start, inner) = found?;
        path.push(kind);
        start = inner_start;
        buf = inner;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Writer;

    #[test]
    fn error_with_extack() {
        // A request with a nest (kind 1) containing a u32 (kind 6).
        let mut inner = Writer::new();
        inner.u32(6, 9);
        let mut w = Writer::new();
        w.u32(2, 1);
        w.nest(1, inner);
        let req = request(
            20,
            NLM_F_REQUEST | NLM_F_ACK,
            7,
            &genl_payload(16, 1, &w.into_bytes()),
        );
        // Offset of the inner attribute: hdr 16 + genl 4 + first attr 8 + nest hdr 4.
        assert_eq!(genl_attr_path(&req, 32), Some(vec![1, 6]));
        assert_eq!(genl_attr_path(&req, 20), Some(vec![2]));
        assert_eq!(genl_attr_path(&req, 999), None);

        let mut payload = (-22i32).to_ne_bytes().to_vec();
        payload.extend_from_slice(&req[..NLMSG_HDRLEN]);
        let mut t = Writer::new();
        t.string(1, "requested ring size exceeds maximum");
        t.u32(2, 32);
        payload.extend_from_slice(&t.into_bytes());
        let h = MsgHeader {
            flags: NLM_F_CAPPED | NLM_F_ACK_TLVS,
            ..MsgHeader::default()
        };
        let e = parse_error(&h, &payload).unwrap().unwrap();
        assert_eq!(e.errno, 22);
        assert_eq!(
            e.message.as_deref(),
            Some("requested ring size exceeds maximum")
        );
        assert_eq!(e.offset, Some(32));
    }

    #[test]
    fn ack_and_truncation() {
        let h = MsgHeader::default();
        assert_eq!(parse_error(&h, &[0, 0, 0, 0]).unwrap(), None);
        assert!(parse_error(&h, &[0, 0]).is_err());
        // Non-zero code but no echoed header.
        assert!(parse_error(&h, &(-1i32).to_ne_bytes()).is_err());
        let bad: Vec<_> = split(&[40, 0, 0, 0, 1, 0]).collect();
        assert!(matches!(bad[..], [Err(CodecError::Truncated { .. })]));
        let mut m = request(3, 0, 1, &[0, 0, 0, 0]);
        m[0] = 200;
        assert!(matches!(
            split(&m).next(),
            Some(Err(CodecError::BadFrame { .. }))
        ));
    }
}
