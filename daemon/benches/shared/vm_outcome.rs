//! What the VM outcome benches share: `outcome.rs` (ppsim's model) and
//! `wire_outcome.rs` (real TCP over the ppsim wire). A module, not a bench
//! target (cargo finds benches as `benches/*.rs` and `benches/*/main.rs`).

use std::process::{Child, Command};

/// The value of the last `name VALUE` on the command line (so a part's own
/// options override the common ones before them).
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().rposition(|a| a == name)?;
    args.get(at + 1).cloned()
}

/// The grow threshold of the naive tuner (and of the wire's doubling and
/// one-shot baselines): the share of returns freed because the pool ring
/// was full, at or above which a window counts as a miss. The shipped
/// policy's own grow threshold, 5 %.
pub const GROW_AT: f64 = 0.05;

/// The naive tuner's step (the rule generic tuners use): the ring grows by
/// 25 %, up to `max`.
pub fn naive_next(ring: u32, max: u32) -> u32 {
    (ring + ring.div_ceil(4)).min(max)
}

/// A running `pptune`, stopped (SIGTERM, then waited for) when dropped.
#[derive(Debug)]
pub struct Daemon(pub Child);

impl Daemon {
    /// CPU seconds (user + system) the daemon has used so far, from
    /// /proc/PID/stat (fields 14 and 15, in clock ticks of `getconf CLK_TCK`).
    pub fn cpu_secs(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0.id())).ok()?;
        // The command name (field 2) may hold spaces: count after its ')'.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
        let out = Command::new("getconf").arg("CLK_TCK").output().ok()?;
        let hz: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
        Some(ticks / hz)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SIGTERM through kill(1): no libc in this crate; the daemon keeps
        // its tuned values on stop (on_stop: keep).
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}
