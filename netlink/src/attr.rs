//! Netlink attribute (TLV) reading and writing, shared by every family codec.
//!
//! Written here rather than taken from `netlink-packet-core` for two reasons:
//! its `parse_u64` rejects the 4-byte form of the kernel's `NLA_UINT`
//! (`nla_put_uint()` writes 4 bytes when the value fits in u32, 8 otherwise),
//! and its errors are strings, while ours are typed [`CodecError`]s.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::error::CodecError;

/// A string from the kernel as text. The kernel's names are bytes (an
/// interface may be named with any bytes but `/`, `:`, whitespace and NUL),
/// so a string attribute is never refused for not being UTF-8: valid UTF-8
/// is taken as it is (borrowed), and every byte that is not part of valid
/// UTF-8 is written as `\xNN` (lower-case hex), and in such a string a
/// backslash is written `\x5c`, so two byte strings that are not UTF-8 never
/// give the same text (one can equal a UTF-8 name only if that name spells
/// out `\x` escapes itself). Control characters are left for the output's
/// own escaping (terminal, log, YAML, JSON). This is the one
/// place a netlink string becomes text; every string attribute goes
/// through it ([`Attr::str`]).
#[must_use]
pub fn kernel_text(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(bytes.len() * 2);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\x5c");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

/// The bytes [`kernel_text`] made `text` from, to name the object to the
/// kernel again (an ioctl, a sysfs path): `text` itself when it is what a
/// UTF-8 name gives, else its `\xNN` escapes undone.
#[must_use]
pub fn kernel_bytes(text: &str) -> Cow<'_, [u8]> {
    if !text.contains("\\x") {
        return Cow::Borrowed(text.as_bytes());
    }
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let byte = (b[i] == b'\\' && b.get(i + 1) == Some(&b'x'))
            .then(|| b.get(i + 2..i + 4))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        if let Some(v) = byte {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    // Only a string that is not UTF-8 was escaped.
    if std::str::from_utf8(&out).is_ok() {
        Cow::Borrowed(text.as_bytes())
    } else {
        Cow::Owned(out)
    }
}

/// `NLA_F_NESTED`.
pub const NLA_F_NESTED: u16 = 0x8000;
/// `NLA_F_NET_BYTEORDER`.
pub const NLA_F_NET_BYTEORDER: u16 = 0x4000;
const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | NLA_F_NET_BYTEORDER);
const NLA_HDRLEN: usize = 4;

/// Round up to the 4-byte netlink alignment.
#[must_use]
pub const fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// An attribute the codec does not know, kept verbatim so a message
/// re-encodes with it (type includes the flag bits as received).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawAttr {
    pub kind: u16,
    pub value: Vec<u8>,
}

/// One attribute as found in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr<'a> {
    /// Type with the flag bits (`NLA_F_NESTED`) masked off.
    pub kind: u16,
    /// Type as received, flags included.
    pub raw_kind: u16,
    pub value: &'a [u8],
}

impl<'a> Attr<'a> {
    /// Keep this attribute verbatim.
    #[must_use]
    pub fn to_raw(&self) -> RawAttr {
        RawAttr {
            kind: self.raw_kind,
            value: self.value.to_vec(),
        }
    }

    /// `NLA_U8`.
    pub fn u8(&self, name: &'static str) -> Result<u8, CodecError> {
        match self.value {
            [b] => Ok(*b),
            _ => Err(self.bad(name)),
        }
    }

    /// `NLA_U16` (host order).
    pub fn u16(&self, name: &'static str) -> Result<u16, CodecError> {
        let b: [u8; 2] = self.value.try_into().map_err(|_| self.bad(name))?;
        Ok(u16::from_ne_bytes(b))
    }

    /// `NLA_U32` (host order).
    pub fn u32(&self, name: &'static str) -> Result<u32, CodecError> {
        let b: [u8; 4] = self.value.try_into().map_err(|_| self.bad(name))?;
        Ok(u32::from_ne_bytes(b))
    }

    /// `NLA_S32`.
    pub fn i32(&self, name: &'static str) -> Result<i32, CodecError> {
        let b: [u8; 4] = self.value.try_into().map_err(|_| self.bad(name))?;
        Ok(i32::from_ne_bytes(b))
    }

    /// `NLA_U64` (exactly 8 bytes).
    pub fn u64(&self, name: &'static str) -> Result<u64, CodecError> {
        let b: [u8; 8] = self.value.try_into().map_err(|_| self.bad(name))?;
        Ok(u64::from_ne_bytes(b))
    }

    /// `NLA_UINT`: 4 **or** 8 bytes, as `nla_put_uint()` writes it.
    pub fn uint(&self, name: &'static str) -> Result<u64, CodecError> {
        match self.value.len() {
            4 => self.u32(name).map(u64::from),
            8 => self.u64(name),
            _ => Err(self.bad(name)),
        }
    }

    /// `NLA_NUL_STRING` / `NLA_STRING`: trailing NULs are dropped; bytes
    /// that are not UTF-8 are kept as `\xNN` escapes ([`kernel_text`]).
    #[must_use]
    pub fn string(&self) -> String {
        self.str().into_owned()
    }

    /// [`Attr::string`], borrowed from the message when it is UTF-8.
    #[must_use]
    pub fn str(&self) -> Cow<'a, str> {
        let end = self
            .value
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(self.value.len());
        kernel_text(&self.value[..end])
    }

    /// The attributes nested in this one.
    #[must_use]
    pub fn nested(&self) -> Attrs<'a> {
        Attrs::new(self.value)
    }

    fn bad(&self, name: &'static str) -> CodecError {
        CodecError::BadLength {
            attr: name,
            kind: self.kind,
            len: self.value.len(),
        }
    }
}

/// Iterator over the attributes in a buffer. A truncated or inconsistent
/// attribute header yields one error and ends the iteration.
#[derive(Debug, Clone)]
pub struct Attrs<'a> {
    buf: &'a [u8],
    failed: bool,
}

impl<'a> Attrs<'a> {
    #[must_use]
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, failed: false }
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<Attr<'a>, CodecError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.buf.is_empty() {
            return None;
        }
        let have = self.buf.len();
        let fail = |e| Some(Err(e));
        if have < NLA_HDRLEN {
            self.failed = true;
            return fail(CodecError::Truncated {
                what: "attribute header",
                need: NLA_HDRLEN,
                have,
            });
        }
        let len = usize::from(u16::from_ne_bytes([self.buf[0], self.buf[1]]));
        let raw_kind = u16::from_ne_bytes([self.buf[2], self.buf[3]]);
        if len < NLA_HDRLEN || len > have {
            self.failed = true;
            return fail(CodecError::BadFrame {
                what: "attribute",
                len,
                have,
            });
        }
        let value = &self.buf[NLA_HDRLEN..len];
        // The last attribute of a message may omit its padding.
        let next = align(len).min(have);
        self.buf = &self.buf[next..];
        Some(Ok(Attr {
            kind: raw_kind & NLA_TYPE_MASK,
            raw_kind,
            value,
        }))
    }
}

/// Builds an attribute stream. Values are written in host order, as the
/// kernel expects for everything but `NLA_F_NET_BYTEORDER` attributes.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    #[must_use]
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// A raw attribute with the given payload, padded to 4 bytes.
    pub fn put(&mut self, kind: u16, value: &[u8]) {
        let len = NLA_HDRLEN + value.len();
        // Attribute lengths are u16; our requests are tiny, but never wrap.
        let len16 = u16::try_from(len).unwrap_or(u16::MAX);
        self.buf.extend_from_slice(&len16.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(self.buf.len() + (align(len) - len), 0);
    }

    pub fn u8(&mut self, kind: u16, v: u8) {
        self.put(kind, &[v]);
    }

    pub fn u32(&mut self, kind: u16, v: u32) {
        self.put(kind, &v.to_ne_bytes());
    }

    pub fn i32(&mut self, kind: u16, v: i32) {
        self.put(kind, &v.to_ne_bytes());
    }

    pub fn u64(&mut self, kind: u16, v: u64) {
        self.put(kind, &v.to_ne_bytes());
    }

    /// `NLA_UINT` exactly as `nla_put_uint()` writes it: 4 bytes when the
    /// value fits in u32, otherwise 8.
    pub fn uint(&mut self, kind: u16, v: u64) {
        match u32::try_from(v) {
            Ok(v32) => self.u32(kind, v32),
            Err(_) => self.u64(kind, v),
        }
    }

    /// NUL-terminated string.
    pub fn string(&mut self, kind: u16, s: &str) {
        let mut v = Vec::with_capacity(s.len() + 1);
        v.extend_from_slice(s.as_bytes());
        v.push(0);
        self.put(kind, &v);
    }

    /// A nest (`NLA_F_NESTED` set, as the kernel sets it on replies).
    pub fn nest(&mut self, kind: u16, inner: Writer) {
        self.put(kind | NLA_F_NESTED, &inner.buf);
    }

    /// A nest without the flag (older families such as nlctrl).
    pub fn nest_noflag(&mut self, kind: u16, inner: Writer) {
        self.put(kind, &inner.buf);
    }

    /// Re-emit attributes kept verbatim.
    pub fn raw(&mut self, attrs: &[RawAttr]) {
        for a in attrs {
            self.put(a.kind, &a.value);
        }
    }

    pub fn opt_u8(&mut self, kind: u16, v: Option<u8>) {
        if let Some(v) = v {
            self.u8(kind, v);
        }
    }

    pub fn opt_u32(&mut self, kind: u16, v: Option<u32>) {
        if let Some(v) = v {
            self.u32(kind, v);
        }
    }

    pub fn opt_i32(&mut self, kind: u16, v: Option<i32>) {
        if let Some(v) = v {
            self.i32(kind, v);
        }
    }

    pub fn opt_uint(&mut self, kind: u16, v: Option<u64>) {
        if let Some(v) = v {
            self.uint(kind, v);
        }
    }
}

/// An attribute set decoded in place: every field overwritten, the
/// buffers it holds reused — a pass decodes the same replies every few
/// seconds, into the entries of the last pass.
pub trait DecodeInPlace: Default {
    /// Decode `attrs` into `self`. After an error `self` holds a partial
    /// decode.
    fn parse_into(&mut self, attrs: &[u8]) -> Result<(), CodecError>;

    /// A fresh decode.
    fn parse(attrs: &[u8]) -> Result<Self, CodecError> {
        let mut v = Self::default();
        v.parse_into(attrs)?;
        Ok(v)
    }
}

/// `*v` back to its default, keeping the buffer of the attributes it did
/// not know (`other`, cleared), for [`DecodeInPlace::parse_into`].
pub(crate) fn reset_keeping_other<T: Default>(v: &mut T, other: fn(&mut T) -> &mut Vec<RawAttr>) {
    let mut kept = std::mem::take(other(v));
    kept.clear();
    *v = T::default();
    *other(v) = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names that are not UTF-8 become text, distinct ones stay distinct,
    /// and the bytes come back for the kernel; UTF-8 names are untouched.
    #[test]
    fn kernel_names_are_bytes_carried_as_text() {
        let names: [&[u8]; 9] = [
            b"eth0",
            b"a\\b",
            b"\xff",
            b"\xff",
            b"\x5cxff\xfe",
            b"\xff\xfe",
            b"e\x1b[31m\xc3",
            b"\xe2\x82",
            "caf\u{e9}".as_bytes(),
        ];
        let mut seen = std::collections::HashMap::new();
        for n in names {
            let t = kernel_text(n);
            assert_eq!(&*kernel_bytes(&t), n, "{t}");
            if let Ok(s) = std::str::from_utf8(n) {
                assert_eq!(t, s);
            }
            if let Some(other) = seen.insert(t.clone().into_owned(), n) {
                assert_eq!(other, n, "{t} from two byte strings");
            }
        }
        assert_eq!(kernel_text(b"\xff\x1b"), "\\xff\x1b");
        assert_eq!(kernel_text(b"a\\\xff"), "a\\x5c\\xff");
    }

    #[test]
    fn uint_both_widths() {
        let mut w = Writer::new();
        w.uint(1, 7);
        w.uint(2, u64::from(u32::MAX) + 1);
        let b = w.into_bytes();
        assert_eq!(b.len(), 8 + 12);
        let attrs: Vec<_> = Attrs::new(&b).collect::<Result<_, _>>().unwrap();
        assert_eq!(attrs[0].value.len(), 4);
        assert_eq!(attrs[0].uint("a").unwrap(), 7);
        assert_eq!(attrs[1].value.len(), 8);
        assert_eq!(attrs[1].uint("b").unwrap(), 1 << 32);
    }

    #[test]
    fn uint_rejects_other_widths() {
        let mut w = Writer::new();
        w.put(1, &[1, 2]);
        let b = w.into_bytes();
        let a = Attrs::new(&b).next().unwrap().unwrap();
        assert!(matches!(
            a.uint("x"),
            Err(CodecError::BadLength { len: 2, .. })
        ));
    }

    #[test]
    fn truncated_header_and_length() {
        let mut it = Attrs::new(&[8, 0, 1]);
        assert!(matches!(it.next(), Some(Err(CodecError::Truncated { .. }))));
        assert!(it.next().is_none());
        // Length claims 12 bytes, only 8 present.
        let mut it = Attrs::new(&[12, 0, 1, 0, 0, 0, 0, 0]);
        assert!(matches!(it.next(), Some(Err(CodecError::BadFrame { .. }))));
        // Length below the header size.
        let mut it = Attrs::new(&[2, 0, 1, 0]);
        assert!(matches!(it.next(), Some(Err(CodecError::BadFrame { .. }))));
    }
}
