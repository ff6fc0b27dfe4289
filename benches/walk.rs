//! The raw floor's attribute walk, shared by `netlink/benches/raw_floor.rs`
//! (over live dump replies in the VM) and `daemon/benches/observe_replay.rs`
//! (over recorded-shape bytes on the host): read every value the way a
//! decoder must, build nothing.

/// Iterate (kind, value) over an attribute stream.
pub fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([b[0], b[1]]));
        let kind = u16::from_ne_bytes([b[2], b[3]]) & !(1 << 15);
        if len < 4 || len > b.len() {
            return None;
        }
        let v = &b[4..len];
        b = &b[len.next_multiple_of(4).min(b.len())..];
        Some((kind, v))
    })
}

/// Read every value the way a decoder must (4- or 8-byte uints, one level
/// of nesting) and fold them so the work cannot be optimised away.
#[allow(clippy::unwrap_used)] // the conversions follow the length's match
pub fn touch(b: &[u8], depth: u8) -> u64 {
    let mut acc = 0u64;
    for (kind, v) in attrs(b) {
        acc = acc.wrapping_add(u64::from(kind));
        match v.len() {
            4 => acc = acc.wrapping_add(u64::from(u32::from_ne_bytes(v.try_into().unwrap()))),
            8 => acc = acc.wrapping_add(u64::from_ne_bytes(v.try_into().unwrap())),
            _ if depth == 0 => acc = acc.wrapping_add(touch(v, 1)),
            _ => acc = acc.wrapping_add(v.len() as u64),
        }
    }
    acc
}
