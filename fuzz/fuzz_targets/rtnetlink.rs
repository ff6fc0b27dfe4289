//! rtnetlink RTM_NEWLINK payloads (a link dump's messages, link
//! notifications), as the device join reads them.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Any bytes as a link's name and its other string attributes: the
    // kernel's names are bytes, so a link never fails for them; a name
    // that is not UTF-8 comes back as its bytes for the kernel.
    let name: Vec<u8> = data.iter().copied().filter(|b| *b != 0).take(64).collect();
    let mut payload = vec![0u8; 16];
    let mut w = netlink::attr::Writer::new();
    w.put(3, &name); // IFLA_IFNAME
    w.put(56, &name); // IFLA_PARENT_DEV_NAME
    w.put(57, &name); // IFLA_PARENT_DEV_BUS_NAME
    payload.extend_from_slice(&w.into_bytes());
    let link = netlink::rtnl::Link::parse(&payload).expect("a name never fails a link");
    if std::str::from_utf8(&name).is_err() {
        assert_eq!(&*netlink::attr::kernel_bytes(&link.name), &name[..]);
    } else {
        assert_eq!(link.name.as_bytes(), &name[..]);
    }
    assert_eq!(link.parent_dev.as_deref(), Some(link.name.as_str()));
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
