//! Multicast notifications as the daemon's event socket receives them:
//! page-pool add/change/del and dev NTFs (netdev), channels/rings NTFs
//! (ethtool), link messages (route). Input: a source byte, the family id
//! (2 bytes little endian), the message.
#![no_main]
use netlink::events::{Source, decode};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&[which, a, b], msg)) = data.split_first_chunk::<3>() else {
        return;
    };
    let id = u16::from_le_bytes([a, b]);
    let source = match which % 3 {
        0 => Source::Netdev(id),
        1 => Source::Ethtool(id),
        _ => Source::Route,
    };
    let _ = decode(source, msg);
});
