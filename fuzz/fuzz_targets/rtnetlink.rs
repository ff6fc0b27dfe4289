//! rtnetlink RTM_NEWLINK payloads (a link dump's messages, link
//! notifications), as the device join reads them.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(link) = netlink::rtnl::Link::parse(data) {
        let _ = link.perm_addr_string();
    }
    // And as a whole stream of messages.
    if let Ok(ex) = netlink::socket::Exchange::from_reply_bytes(Vec::new(), data)
        && let Ok(netlink::socket::Outcome::Replies(msgs)) = ex.outcome()
    {
        for m in msgs {
            let _ = netlink::rtnl::Link::parse(m.payload);
        }
    }
});
