//! ethtool genetlink replies: rings, channels, their set acks.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pptune_fuzz::genl::<netlink::ethtool::EthtoolMessage>(data);
});
