//! What every netlink fuzz target does with its bytes: the paths the
//! daemon takes with a kernel reply.

use netlink::GenlPayload;
use netlink::client::decode_genl;
use netlink::socket::Exchange;

/// `data` as one generic-netlink payload (genlmsghdr + attributes), and as
/// a whole reply stream (netlink headers, NLMSG_ERROR with extack,
/// NLMSG_DONE) decoded the way the client decodes a dump or a refusal.
/// Errors are fine; a panic, a hang or unbounded memory is a finding.
pub fn genl<P: GenlPayload>(data: &[u8]) {
    let _ = P::from_genl_bytes(data);
    reply_stream::<P>(Vec::new(), data);
}

/// A reply stream to `request` (whose bytes name the attribute an extack
/// offset points at).
pub fn reply_stream<P: GenlPayload>(request: Vec<u8>, reply: &[u8]) {
    if let Ok(ex) = Exchange::from_reply_bytes(request, reply) {
        let _ = ex.interrupted();
        let _ = decode_genl::<P>(&ex, "fuzz", Some("eth0"));
    }
}
