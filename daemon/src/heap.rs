//! Giving freed heap back to the kernel.
//!
//! A container host's links come and go by the thousand. Their series,
//! names and buffers are freed when they vanish, but glibc keeps freed
//! memory in its arenas: the heap's top is pinned by whatever small thing
//! was allocated last during the burst, and the pages below it stay
//! resident. In the VM, after a batch of 1,000 links came and went, glibc's
//! main arena spanned 9 MB with 0.9 MB in use, and a `malloc_trim(0)` from
//! a debugger took RssAnon from 9.3 to 3.6 MB
//! (`benches/results/daemon-rss-vm-diagnosis.txt`). Trimming once, when
//! devices vanish, is not enough: each pass's short-lived buffers land in
//! that free space a little further on each time and fault its pages back
//! in (RssAnon back from 2.3 to 9.5 MB within seven 2 s passes after such
//! a trim, nothing allocated for good).
//!
//! The rule: after each pass and each `/metrics` render (the work that
//! allocates and frees the most), the anonymous memory the process has
//! resident beyond the bytes it has in use (the **excess**: allocator
//! overhead, static data, stacks, and free heap that is resident) is
//! compared with what it was right after the last trim (the **floor**, what
//! a trim cannot give back). When it has grown by [`MARGIN`], the heap is
//! trimmed and the floor read again. A steady daemon's excess does not
//! move, so it never trims; after a burst it trims once, then whenever the
//! passes have faulted another [`MARGIN`] of free heap back in. A trim
//! walks the free chunks (on this host's glibc, 140–200 µs for a heap cut
//! into 20,000 free chunks, measured with a C program, not in the
//! daemon), and the pages it drops are refaulted only as used.
//!
//! A render runs on a blocking thread. glibc gives such a thread an arena
//! of its own, whose top `malloc_trim` does not give back (it trims the
//! main arena's top only): with `/metrics` scraped every 0.5 s, two render
//! arenas held 0.5–1 MB each. The binary keeps one arena
//! (`M_ARENA_MAX` 1 at start): the daemon's threads seldom allocate at
//! once, and every free byte is then where a trim reaches it.
//!
//! The bytes in use come from the binary's counting allocator and the trim
//! is a call into the C library: the library crate's `forbid(unsafe_code)`
//! keeps both out, so the binary installs them at start ([`install`]); a
//! process without them (tests, another C library) trims nothing.

use std::sync::{Mutex, OnceLock};

/// What the binary gives the rule.
#[derive(Debug, Clone, Copy)]
pub struct Hooks {
    /// Gives the allocator's free pages back.
    pub trim: fn(),
    /// Bytes allocated and not yet freed.
    pub in_use: fn() -> usize,
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Sets the hooks; the first call wins.
pub fn install(hooks: Hooks) {
    let _ = HOOKS.set(hooks);
}

/// Growth of the excess over its floor that is worth a trim.
pub const MARGIN: i64 = 512 << 10;

/// The floor, between settles.
#[derive(Debug, Default)]
struct Trimmer {
    /// The excess right after the last trim (or the lowest seen before
    /// the first): `None` until a pass has read it.
    floor: Option<i64>,
}

static TRIMMER: Mutex<Trimmer> = Mutex::new(Trimmer { floor: None });

/// After work that allocated and freed (a pass, a render): trims the heap
/// when the resident excess grew by [`MARGIN`] since the last trim.
pub fn settle() {
    let Some(h) = HOOKS.get() else { return };
    if let Ok(mut t) = TRIMMER.lock() {
        t.settle(h);
    }
}

impl Trimmer {
    fn settle(&mut self, h: &Hooks) {
        let Some(before) = excess(h) else { return };
        if self.over(before) {
            (h.trim)();
            let after = excess(h);
            tracing::debug!(before, after, "resident free heap grew: trimmed");
            self.floor = after.or(self.floor);
        }
    }

    /// Whether `excess` is [`MARGIN`] over the floor; a lower excess
    /// lowers the floor.
    fn over(&mut self, excess: i64) -> bool {
        match self.floor {
            Some(f) if excess >= f.saturating_add(MARGIN) => true,
            Some(f) if excess >= f => false,
            _ => {
                self.floor = Some(excess);
                false
            }
        }
    }
}

/// Anonymous memory resident (`/proc/self/statm`: resident − shared,
/// RssAnon) less the bytes in use, now.
fn excess(h: &Hooks) -> Option<i64> {
    let m = procfs::process::Process::myself().ok()?.statm().ok()?;
    let anon = m
        .resident
        .checked_sub(m.shared)?
        .checked_mul(procfs::page_size())?;
    let anon = i64::try_from(anon).ok()?;
    let in_use = i64::try_from((h.in_use)()).ok()?;
    Some(anon - in_use)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: i64 = 1 << 10;

    /// The first reading is the floor; growth under the margin does not
    /// trim, growth to it does; a lower reading lowers the floor.
    #[test]
    fn trims_when_the_excess_grows_by_the_margin() {
        let mut t = Trimmer::default();
        assert!(!t.over(900 * KIB));
        assert!(!t.over(900 * KIB + MARGIN - 1));
        assert!(t.over(900 * KIB + MARGIN));
        assert!(!t.over(700 * KIB));
        assert_eq!(t.floor, Some(700 * KIB));
        assert!(t.over(700 * KIB + MARGIN));
    }

    /// After a trim the floor is what the trim left: a trim that could
    /// not give much back does not trim again on the next pass.
    #[test]
    fn the_floor_is_what_the_trim_left() {
        let mut t = Trimmer::default();
        assert!(!t.over(1000 * KIB));
        assert!(t.over(9000 * KIB));
        t.floor = Some(8800 * KIB);
        assert!(!t.over(8900 * KIB));
        assert!(t.over(8800 * KIB + MARGIN));
    }
}
