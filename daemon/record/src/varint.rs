//! The numbers of a snapshot block on the wire (docs/recording.md): LEB128
//! varints, zigzag deltas column by column, and the bounded reader the
//! block decoder parses with.

/// Why a record cannot be turned back into the engine's types.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("device ifindex {0} has no description earlier in the segment")]
    NoMeta(u32),
    #[error("the segment's first pass does not say the kernel's capabilities")]
    NoCaps,
    #[error("the pass's first snapshot block has no layout")]
    NoShape,
    #[error("snapshot block: {0}")]
    Block(&'static str),
}

pub(super) fn zigzag(d: u64) -> u64 {
    #[allow(clippy::cast_possible_wrap, clippy::cast_sign_loss)]
    let z = ((d << 1) as i64 ^ ((d as i64) >> 63)) as u64;
    z
}

pub(super) fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

pub(super) fn put(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        #[allow(clippy::cast_possible_truncation)]
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    #[allow(clippy::cast_possible_truncation)]
    b.push(v as u8);
}

/// `cur - base` per slot, in order (both in the same layout).
pub(super) fn put_columns(b: &mut Vec<u8>, cur: &[u64], base: &[u64]) {
    let base = base.iter().copied().chain(std::iter::repeat(0));
    for (v, prev) in cur.iter().zip(base) {
        put(b, zigzag(v.wrapping_sub(prev)));
    }
}

/// The inverse of [`put_columns`], in place: `vals` holds the previous
/// pass's numbers in this layout (realigned) and gets this pass's.
pub(super) fn get_columns(r: &mut Reader<'_>, vals: &mut [u64]) -> Result<(), DecodeError> {
    for v in vals {
        *v = v.wrapping_add(unzigzag(r.varint()?));
    }
    Ok(())
}

pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn byte(&mut self) -> Result<u8, DecodeError> {
        let (&b, rest) = self
            .0
            .split_first()
            .ok_or(DecodeError::Block("truncated"))?;
        self.0 = rest;
        Ok(b)
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.0.len() {
            return Err(DecodeError::Block("truncated"));
        }
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(a)
    }

    #[inline]
    pub(super) fn varint(&mut self) -> Result<u64, DecodeError> {
        if let Some((&b, rest)) = self.0.split_first()
            && b < 0x80
        {
            self.0 = rest;
            return Ok(u64::from(b));
        }
        let mut v = 0_u64;
        for (i, &b) in self.0.iter().enumerate().take(10) {
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.0 = &self.0[i + 1..];
                return Ok(v);
            }
        }
        Err(DecodeError::Block("truncated or overlong number"))
    }

    pub(super) fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.varint()?).map_err(|_| DecodeError::Block("number out of range"))
    }

    /// A count of items, bounded by the bytes left (each takes at least one).
    pub(super) fn count(&mut self) -> Result<usize, DecodeError> {
        let n = usize::try_from(self.varint()?).map_err(|_| DecodeError::Block("count"))?;
        if n > self.0.len() {
            return Err(DecodeError::Block("count larger than the block"));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::MAX, u64::MAX - 1, 1 << 63] {
            let mut b = Vec::new();
            put(&mut b, zigzag(v));
            let mut r = Reader(&b);
            assert_eq!(unzigzag(r.varint().unwrap()), v);
            assert!(r.0.is_empty());
        }
        // A small step back costs one byte, as a small step forward does.
        let mut b = Vec::new();
        put(&mut b, zigzag(5_u64.wrapping_sub(7)));
        assert_eq!(b.len(), 1);
        assert!(Reader(&[0x80; 11]).varint().is_err());
    }
}
