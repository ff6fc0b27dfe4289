//! Test harness (being built).

pub mod fake;
