//! Test harness: the `pptune` binary (`bin`), the loop on the fake kernel
//! (`daemon`), the fake kernel (`fake`), the
//! VM runner (`vm`), the ppsim driver (`ppsim`) and a device's pools over
//! netlink (`pools`).
#![forbid(unsafe_code)]

pub mod bin;
pub mod daemon;
pub mod fake;
pub mod pools;
pub mod ppsim;
pub mod vm;
