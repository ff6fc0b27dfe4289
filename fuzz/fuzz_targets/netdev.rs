//! netdev genetlink replies: page-pool, page-pool-stats, queue, napi,
//! qstats, dev.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pptune_fuzz::genl::<netlink::netdev::NetdevMessage>(data);
});
