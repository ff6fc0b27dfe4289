//! Kernel refusals: NLMSG_ERROR with extack (message, bad-attribute
//! offset, missing-attribute nest) against the request it points into.
//! Input: 2 bytes of request length (little endian), the request, the
//! reply stream.
#![no_main]
use netlink::ethtool::EthtoolMessage;
use netlink::netdev::NetdevMessage;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let n = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (request, reply) = rest.split_at(n);
    pptune_fuzz::reply_stream::<NetdevMessage>(request.to_vec(), reply);
    pptune_fuzz::reply_stream::<EthtoolMessage>(request.to_vec(), reply);
});
