//! Giving freed heap back to the kernel after devices vanish.
//!
//! A container host's links come and go by the thousand. Their series,
//! names and buffers are freed when they vanish, but glibc keeps freed
//! memory in its arenas: after 30,000 link lifetimes, 1,000 at a time, the
//! daemon's RSS stayed at the first batch's peak, +106 % over its start
//! (BENCHMARKS §7). `malloc_trim(0)` returns the free pages of every arena.
//! It is a call into the C library, which the library crate's
//! `forbid(unsafe_code)` keeps out: the binary installs it at start
//! ([`install`]), and a process without it (tests, another C library)
//! trims nothing.

use std::sync::OnceLock;

static TRIM: OnceLock<fn()> = OnceLock::new();

/// Sets what [`trim`] calls; the first call wins.
pub fn install(trim: fn()) {
    let _ = TRIM.set(trim);
}

/// Gives the allocator's free memory back, when the binary said how.
pub(super) fn trim() {
    if let Some(t) = TRIM.get() {
        t();
    }
}
