//! Test harness (being built).

pub mod fake;
pub mod ppsim;
pub mod vm;
