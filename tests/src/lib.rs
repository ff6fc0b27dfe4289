//! Test harness (being built).

pub mod fake;
pub mod pools;
pub mod ppsim;
pub mod vm;
