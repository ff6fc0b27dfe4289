//! Test harness (being built).
