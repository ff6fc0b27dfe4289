//! nlctrl getfamily replies, and the family (ops, groups) built from one.
#![no_main]
use netlink::GenlPayload;
use netlink::ctrl::{CtrlMessage, Family};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pptune_fuzz::genl::<CtrlMessage>(data);
    if let Ok(m) = CtrlMessage::from_genl_bytes(data)
        && let Ok(f) = Family::from_reply(m)
    {
        let _ = f.group("page-pool");
        let _ = f.op(0);
    }
});
