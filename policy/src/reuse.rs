//! The one rule for buffers reused from pass to pass (the sampler's dump
//! and snapshot buffers, the observer's deltas, the engine's scratch, the
//! recorder's columns and facts, the identity cache): a buffer cleared and refilled each pass keeps the
//! capacity of the largest pass it ever held, so a container host's burst
//! of a thousand veths, gone a minute later, would pin that burst's memory
//! for the daemon's life (measured: 2.8 MB of live heap more after two
//! bursts of 1,000 links, RssAnon +3.6 MB, BENCHMARKS §7). After a pass
//! fills it, a buffer that holds under half its capacity (less
//! [`SLACK`]) is cut to what it holds; the next pass grows it back to
//! what the host has now. A few devices coming and going cost nothing.

/// Elements a buffer may hold spare beyond twice its content.
pub const SLACK: usize = 64;

/// Whether a buffer of `capacity` holding `len` is let go ([`Reused`]).
#[must_use]
pub fn oversized(capacity: usize, len: usize) -> bool {
    capacity > len.saturating_mul(2).saturating_add(SLACK)
}

/// A buffer reused from pass to pass.
pub trait Reused {
    /// Cuts the buffer to what it holds when it is [`oversized`].
    fn let_go(&mut self);
}

impl<T> Reused for Vec<T> {
    fn let_go(&mut self) {
        if oversized(self.capacity(), self.len()) {
            self.shrink_to_fit();
        }
    }
}

impl Reused for String {
    fn let_go(&mut self) {
        if oversized(self.capacity(), self.len()) {
            self.shrink_to_fit();
        }
    }
}

/// Maps keyed by devices (caches, the recorder's per-device facts): a
/// map keeps its table's capacity after entries are removed too.
impl<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher> Reused
    for std::collections::HashMap<K, V, S>
{
    fn let_go(&mut self) {
        if oversized(self.capacity(), self.len()) {
            self.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_a_burst_grew_is_cut_to_what_it_holds() {
        let mut v: Vec<u64> = (0..1000).collect();
        v.truncate(10);
        v.let_go();
        assert!(v.capacity() < 100, "{}", v.capacity());
        // A few coming and going: kept.
        let mut w: Vec<u64> = Vec::with_capacity(100);
        w.extend(0..40);
        w.let_go();
        assert_eq!(w.capacity(), 100);
        let mut s = "x".repeat(5000);
        s.truncate(3);
        s.let_go();
        assert!(s.capacity() < 100);
        let mut m: std::collections::HashMap<u32, u64> = (0..1000).map(|i| (i, 0)).collect();
        m.retain(|k, _| *k < 5);
        m.let_go();
        assert!(m.capacity() < 100, "{}", m.capacity());
    }
}
