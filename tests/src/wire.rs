//! The ppsim wire (`tests/ppsim/ppsim_wire.c`) as the VM tests build it:
//! device A in netns `pp-tx` (10.77.0.1), device B in `pp-rx`
//! (10.77.0.2), joined by `link_wire`; `pptraffic` runs between them; B's
//! pools are read over pptune's netlink client from inside `pp-rx`
//! (page-pool dumps are per namespace).
//!
//! Helpers of the VM tests: a failure here is the test's own failure.
#![allow(clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use netlink::Client;
use netlink::ethtool::{Header, Rings};
use netlink::netdev::{PagePool, QstatsCounters};
use nix::sched::{CloneFlags, setns};
use policy::snapshot::PoolStats;
use serde_json::Value;

use crate::pools::stats_of;
use crate::ppsim::{Ppsim, PpsimDev};

pub const TX_NS: &str = "pp-tx";
pub const RX_NS: &str = "pp-rx";
pub const TX_ADDR: &str = "10.77.0.1";
pub const RX_ADDR: &str = "10.77.0.2";
const LINK: &str = "/sys/kernel/debug/ppsim/link_wire";
/// `PP_ALLOC_CACHE_SIZE`: the pages a pool's per-NAPI cache holds.
const PP_ALLOC_CACHE: u64 = 128;

fn check(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what}: {} (stderr: {})",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run `cmd args…` and return its stdout; any failure fails the test.
pub fn sh(cmd: &str, args: &[&str]) -> String {
    let what = format!("{cmd} {}", args.join(" "));
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    check(&what, &out)
}

/// `ip netns exec <ns> args…`.
pub fn ns_exec(ns: &str, args: &[&str]) -> String {
    let mut v = vec!["netns", "exec", ns];
    v.extend_from_slice(args);
    sh("ip", &v)
}

/// Runs `f` on a thread inside netns `ns`, on a runtime of its own (a
/// netlink socket belongs to the namespace it is created in).
pub fn in_netns<T, F, Fut>(ns: &str, f: F) -> T
where
    T: Send,
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = T>,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            let path = format!("/run/netns/{ns}");
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            setns(&file, CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("setns {ns}: {e}"));
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(f())
        })
        .join()
        .unwrap_or_else(|_| panic!("the thread in {ns} panicked"))
    })
}

/// Every page pool netns `ns` lists (attached, detached and orphaned).
pub fn pools_in(ns: &str) -> Vec<PagePool> {
    in_netns(ns, || async {
        let c = Client::connect().await.expect("netlink client");
        c.page_pools().await.expect("page-pool-get")
    })
}

/// Summed counters of the pools `ids` in netns `ns`.
pub fn stats_in(ns: &str, ids: &BTreeSet<u64>) -> PoolStats {
    in_netns(ns, || async {
        let c = Client::connect().await.expect("netlink client");
        stats_of(&c, ids).await.expect("page-pool-stats-get")
    })
}

/// Runs a NET_RX softirq on every CPU (a loopback datagram sent from
/// each): an skb freed on another CPU than the one that built it (a
/// reader on CPU 1, B's NAPI on CPU 0) waits on a defer list until the
/// building CPU's next NET_RX, and an idle wire brings none, so its pages
/// would stay out of the pool for good. Real hosts have traffic.
pub fn flush_deferred_frees() {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    for cpu in 0..cpus {
        sh(
            "taskset",
            &[
                "-c",
                &cpu.to_string(),
                "bash",
                "-c",
                "echo > /dev/udp/127.0.0.1/9",
            ],
        );
    }
}

/// Device totals of `ifindex`'s qstats in netns `ns` (qstats-get, device
/// scope: the queues' counters plus the driver's base).
pub fn qstats_in(ns: &str, ifindex: u32) -> QstatsCounters {
    in_netns(ns, || async {
        let c = Client::connect().await.expect("netlink client");
        let q = c.qstats(Some(ifindex), 0).await.expect("qstats-get");
        assert_eq!(q.len(), 1, "one device entry: {q:?}");
        q.into_iter().next().map(|q| q.counters).unwrap_or_default()
    })
}

/// Polls `pools_in(ns)` every 100 ms (after [`flush_deferred_frees`])
/// until `done` holds, for at most `limit`; returns the last listing and
/// whether `done` held.
pub fn wait_pools(
    ns: &str,
    limit: Duration,
    done: impl Fn(&[PagePool]) -> bool,
) -> (Vec<PagePool>, bool) {
    let steps = limit.as_millis() / 100;
    for _ in 0..steps {
        flush_deferred_frees();
        let p = pools_in(ns);
        if done(&p) {
            return (p, true);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    flush_deferred_frees();
    let p = pools_in(ns);
    let ok = done(&p);
    (p, ok)
}

/// `ETHTOOL_TCP_DATA_SPLIT_ENABLED` (rings' `tcp-data-split`).
const ETHTOOL_TCP_DATA_SPLIT_ENABLED: u8 = 2;

/// The two ends of a wire, each in its namespace.
#[derive(Debug)]
pub struct Wire {
    pub a: PpsimDev,
    pub b: PpsimDev,
}

impl Wire {
    /// Builds the wire: A (1 queue, ring 256) in `pp-tx`, B (`b_queues`,
    /// RX ring `b_ring`) in `pp-rx`, linked, addressed, up. Namespaces
    /// and ppsim devices left by an earlier failed test are deleted first
    /// (or every wire test after it would fail to build its own).
    pub fn build(p: &Ppsim, b_queues: u32, b_ring: u32) -> Self {
        Self::build_with(p, b_queues, b_ring, false)
    }

    /// [`Wire::build`] with B a devmem device
    /// ([`Ppsim::new_devmem_device`]), its header split on
    /// (`tcp-data-split on hds-thresh 0`, what `bind-rx` requires; set
    /// over ethtool netlink: the host's ethtool 6.1 has no such option).
    pub fn build_devmem(p: &Ppsim, b_queues: u32, b_ring: u32) -> Self {
        let w = Self::build_with(p, b_queues, b_ring, true);
        let ifx = w.b_ifindex();
        in_netns(RX_NS, || async {
            let rings = Rings {
                header: Some(Header::ifindex(ifx)),
                tcp_data_split: Some(ETHTOOL_TCP_DATA_SPLIT_ENABLED),
                hds_thresh: Some(0),
                ..Rings::default()
            };
            Client::connect()
                .await
                .expect("netlink client")
                .set_rings(rings, Some(w.b.name()))
                .await
                .expect("B's header split on");
        });
        w
    }

    fn build_with(p: &Ppsim, b_queues: u32, b_ring: u32, b_devmem: bool) -> Self {
        for ns in [TX_NS, RX_NS] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
            sh("ip", &["netns", "add", ns]);
            ns_exec(ns, &["ip", "link", "set", "lo", "up"]);
        }
        p.delete_all().expect("ppsim devices a failed test left");
        let a = p.new_device(1).expect("device A");
        let b = if b_devmem {
            p.new_devmem_device(b_queues)
        } else {
            p.new_device(b_queues)
        }
        .expect("device B");
        std::fs::write(LINK, format!("{} {}", a.name(), b.name())).expect("link_wire");
        b.ethtool_set_rx_ring(b_ring).expect("B's ring");
        for (d, ns, addr) in [(&a, TX_NS, TX_ADDR), (&b, RX_NS, RX_ADDR)] {
            sh("ip", &["link", "set", d.name(), "netns", ns]);
            ns_exec(
                ns,
                &["ip", "addr", "add", &format!("{addr}/24"), "dev", d.name()],
            );
            ns_exec(ns, &["ip", "link", "set", d.name(), "up"]);
        }
        Self { a, b }
    }

    /// B's ifindex in `pp-rx`.
    pub fn b_ifindex(&self) -> u32 {
        let p = format!("/sys/class/net/{}/ifindex", self.b.name());
        ns_exec(RX_NS, &["cat", &p])
            .trim()
            .parse()
            .expect("ifindex")
    }

    /// B's pools attached now (ids).
    pub fn b_pools(&self) -> BTreeSet<u64> {
        let ifx = self.b_ifindex();
        pools_in(RX_NS)
            .iter()
            .filter(|p| p.ifindex == Some(ifx) && p.detach_time.is_none())
            .filter_map(|p| p.id)
            .collect()
    }

    /// `ethtool -G <B> rx n` (a rebuild: new pools).
    pub fn set_b_ring(&self, n: u32) {
        ns_exec(
            RX_NS,
            &["ethtool", "-G", self.b.name(), "rx", &n.to_string()],
        );
    }

    /// `ethtool -L <B> combined n`.
    pub fn set_b_channels(&self, n: u32) {
        ns_exec(
            RX_NS,
            &["ethtool", "-L", self.b.name(), "combined", &n.to_string()],
        );
    }

    /// Waits until every pool of B is attached and its `inflight` is its
    /// posted ring plus at most what the pool itself keeps (its ptr_ring,
    /// `pool_size`, and the 128-page alloc cache): `inflight` counts the
    /// pages the pool got from the page allocator and has not given back,
    /// so recycled pages waiting in the pool are in it. Nothing is left in
    /// a socket. Returns the listing (and ppsim's queues) if that never holds.
    pub fn wait_b_quiet(&self, limit: Duration) -> Result<(), String> {
        let ifx = self.b_ifindex();
        let q = self.b.queues().expect("queues");
        let bounds = |id: Option<u64>| {
            q.iter()
                .find(|q| Some(u64::from(q.pool_id)) == id)
                .map(|q| (q.posted, q.posted + u64::from(q.pool_size) + PP_ALLOC_CACHE))
        };
        let (p, ok) = wait_pools(RX_NS, limit, |pools| {
            pools.len() == q.len()
                && pools.iter().all(|p| {
                    let b = bounds(p.id);
                    p.ifindex == Some(ifx)
                        && p.detach_time.is_none()
                        && b.zip(p.inflight)
                            .is_some_and(|((lo, hi), n)| (lo..=hi).contains(&n))
                })
        });
        if ok {
            Ok(())
        } else {
            Err(format!(
                "pools {p:#?}
ppsim queues {q:#?}"
            ))
        }
    }

    /// Rebuilds B at RX ring `ring` (`ethtool -G`) and waits until B's
    /// pools from before are gone: `page_pool_destroy` gives back the
    /// posted ring, the pool's ring and cache, and frees the pool at once
    /// unless a page is still out (then it lingers, detached). Every page
    /// the wire took came home exactly when they vanish.
    pub fn rebuild_b_and_drain(&self, ring: u32, limit: Duration) -> Result<(), String> {
        let old = self.b_pools();
        self.set_b_ring(ring);
        let (p, ok) = wait_pools(RX_NS, limit, |pools| {
            pools
                .iter()
                .all(|p| p.id.is_none_or(|id| !old.contains(&id)))
        });
        if ok {
            Ok(())
        } else {
            Err(format!("old pools {old:?} still listed: {p:#?}"))
        }
    }

    /// Deletes both devices and waits (up to `limit`) for every pool of
    /// both namespaces to vanish; then deletes the namespaces. Returns the
    /// pools still listed if they did not.
    pub fn teardown(self, limit: Duration) -> Result<(), Vec<PagePool>> {
        self.b.delete().expect("delete B");
        self.a.delete().expect("delete A");
        let (rx, rx_ok) = wait_pools(RX_NS, limit, <[PagePool]>::is_empty);
        let (tx, tx_ok) = wait_pools(TX_NS, limit, <[PagePool]>::is_empty);
        for ns in [TX_NS, RX_NS] {
            sh("ip", &["netns", "del", ns]);
        }
        if rx_ok && tx_ok {
            Ok(())
        } else {
            Err(rx.into_iter().chain(tx).collect())
        }
    }
}

/// pptraffic's bursty read pattern: receivers pause 50 ms in step, then
/// drain to EAGAIN (their sockets return their pages together).
macro_rules! drain_reads {
    ($($arg:literal),*) => {
        &[$($arg,)* "--pattern", "drain", "--sync", "--pause-ms", "50"]
    };
}

/// The read pattern of [`DRAIN`] alone, for other flows (the outcome
/// bench's UDP workload).
pub const DRAIN_READS: &[&str] = drain_reads!();

/// The bursty wire workload, as pptraffic's arguments: four TCP streams
/// read with [`DRAIN_READS`] (the returns of the closed-loop scenario, the
/// recycle split and the outcome bench's `drain`).
pub const DRAIN: &[&str] = drain_reads!("--tcp", "4");

/// [`DRAIN`] with the receive buffers pinned at 1 MiB (SO_RCVBUF; no
/// receive autotuning): the bursts stop growing, a stationary bursty load
/// (the closed-loop scenario, the outcome bench's `drain-pinned`). With
/// autotuning the drains' bursts keep growing for a minute or more, so a
/// ring that took them at one moment frees pages again later.
pub const DRAIN_PINNED: &[&str] = drain_reads!("--tcp", "4", "--rcvbuf", "1048576");

/// [`DRAIN_PINNED`] with 4 MiB receive buffers: for B with four queues,
/// where ppsim's RSS hash gives each stream a queue (or two a queue) and a
/// 1 MiB stream's drains alone barely overflow a ring of 256.
pub const DRAIN_PINNED_4M: &[&str] = drain_reads!("--tcp", "4", "--rcvbuf", "4194304");

/// The traffic generator a wire test runs in the guest:
/// `PPTUNE_PPTRAFFIC_BIN`, the private copy tests/vm/test.sh makes (a guest
/// must not run the path cargo re-links under it: it read a mix of two
/// builds over 9p and crashed), else `cargos`, the test's own
/// `env!("CARGO_BIN_EXE_pptraffic")` ([`pptraffic!`](crate::pptraffic)
/// passes it).
#[must_use]
pub fn pptraffic_bin(cargos: &str) -> std::path::PathBuf {
    std::env::var_os("PPTUNE_PPTRAFFIC_BIN").map_or_else(|| cargos.into(), Into::into)
}

/// [`pptraffic_bin`] for the calling test (its `CARGO_BIN_EXE_pptraffic`).
#[macro_export]
macro_rules! pptraffic {
    () => {
        $crate::wire::pptraffic_bin(env!("CARGO_BIN_EXE_pptraffic"))
    };
}

/// A finished `pptraffic` run: exit status and its JSON lines.
#[derive(Debug)]
pub struct Traffic {
    pub success: bool,
    pub lines: Vec<Value>,
    pub stderr: String,
}

impl Traffic {
    /// Starts `bin args…` (stdout piped) without waiting.
    pub fn spawn(bin: &Path, args: &[&str]) -> Child {
        Command::new(bin)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()))
    }

    /// Waits for a run started with [`Traffic::spawn`].
    pub fn wait(child: Child) -> Self {
        let out = child.wait_with_output().expect("pptraffic output");
        Self {
            success: out.status.success(),
            lines: String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
                .collect(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `bin args…` to the end.
    pub fn run(bin: &Path, args: &[&str]) -> Self {
        Self::wait(Self::spawn(bin, args))
    }

    fn of_type(&self, t: &str) -> impl Iterator<Item = &Value> {
        self.lines.iter().filter(move |l| l["type"] == t)
    }

    /// The summary line (`Value::Null` when the run ended without one).
    pub fn summary(&self) -> &Value {
        self.of_type("summary").next().unwrap_or(&Value::Null)
    }

    /// The per-flow lines.
    pub fn flows(&self) -> Vec<&Value> {
        self.of_type("flow").collect()
    }

    /// An snmp/netstat delta of the receiving namespace (`Tcp.InSegs`).
    pub fn snmp(&self, key: &str) -> i64 {
        self.summary()["snmp"][key].as_i64().unwrap_or(0)
    }

    /// Bytes received over all flows.
    pub fn received(&self) -> u64 {
        self.summary()["received"].as_u64().unwrap_or(0)
    }

    /// Fails `what` unless the run ended well, every stream intact
    /// (`--verify`), and every flow moved bytes.
    pub fn assert_intact(&self, what: &str) {
        assert!(
            self.success && self.summary()["intact"] == true,
            "{what}: pptraffic says the streams were not intact: {:#?}\n{}",
            self.lines,
            self.stderr
        );
        for f in self.flows() {
            assert!(
                f["bytes"].as_u64().unwrap_or(0) > 0,
                "{what}: a flow moved nothing: {f}"
            );
        }
    }
}

/// Fails `what` when the kernel log reports trouble since `mark`
/// ([`dmesg_mark`]).
pub fn assert_quiet_kernel(mark: usize, what: &str) {
    let t = kernel_trouble_since(mark);
    assert!(
        t.is_empty(),
        "{what}: the kernel log reports trouble:\n{}",
        t.join("\n")
    );
}

/// The kernel log's lines now (a mark for [`kernel_trouble_since`]).
pub fn dmesg_mark() -> usize {
    sh("dmesg", &[]).lines().count()
}

/// Kernel log lines after `mark` that report a stalled pool shutdown, a
/// warning, a bug or an oops.
pub fn kernel_trouble_since(mark: usize) -> Vec<String> {
    sh("dmesg", &[])
        .lines()
        .skip(mark)
        .filter(|l| {
            [
                "stalled pool shutdown",
                "WARNING",
                "BUG",
                "Oops",
                "asks to queue packet",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .map(str::to_owned)
        .collect()
}

/// A netlink client whose sockets live in netns `ns`, driven by the
/// calling thread's runtime: the thread enters `ns`, connects and comes
/// back (a socket keeps the namespace it was created in). Unlike
/// [`in_netns`], the client outlives the call.
pub async fn client_in(ns: &str) -> Client {
    let here = std::fs::File::open("/proc/thread-self/ns/net").expect("this thread's netns");
    let path = format!("/run/netns/{ns}");
    let there = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    setns(&there, CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("setns {ns}: {e}"));
    let c = Client::connect().await;
    setns(&here, CloneFlags::CLONE_NEWNET).expect("back to this thread's netns");
    c.expect("netlink client")
}

/// The counters of every page pool a namespace listed, each pool's last
/// seen values kept after it vanishes: a rebuild (`ethtool -G`) destroys
/// B's pools and makes new ones, and a destroyed pool whose pages all came
/// home disappears from the dump with its counters. Sum a window over
/// every pool that existed in it with [`PoolLedger::since`]; refresh often
/// enough that no pool lives and vanishes between two refreshes.
#[derive(Debug, Clone, Default)]
pub struct PoolLedger {
    pools: std::collections::BTreeMap<u64, PoolStats>,
}

impl PoolLedger {
    /// Takes the current counters of every pool `c`'s namespace lists.
    pub async fn refresh(&mut self, c: &Client) {
        for s in c.page_pool_stats().await.expect("page-pool-stats-get") {
            if let Some(id) = s.info.as_ref().and_then(|i| i.id) {
                self.pools
                    .insert(id, pptune::sample::kernel_netlink::pool_stats(&s.counters));
            }
        }
    }

    /// Counters summed over every pool seen: for each pool, what it
    /// counted since `earlier` (all of it for a pool `earlier` did not
    /// know, which started at zero).
    pub fn since(&self, earlier: &Self) -> PoolStats {
        self.each_since(earlier)
            .fold(PoolStats::default(), |acc, (_, d)| acc.add(&d))
    }

    /// What each pool seen counted since `earlier`, by pool id (the
    /// terms of [`PoolLedger::since`]).
    pub fn each_since<'a>(
        &'a self,
        earlier: &'a Self,
    ) -> impl Iterator<Item = (u64, PoolStats)> + 'a {
        self.pools.iter().map(|(id, now)| {
            let d = earlier
                .pools
                .get(id)
                .map_or(Some(*now), |e| now.delta(e))
                .expect("pool counters go backwards");
            (*id, d)
        })
    }
}

/// `(busy, total)` jiffies of all CPUs (`/proc/stat`, USER_HZ 100): busy
/// is user + nice + system + irq + softirq, total adds idle and iowait.
/// Under `--icount` a jiffy of busy time is 10^7 guest instructions
/// (tests/vm/wire-cost.sh).
pub fn cpu_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let line = stat.lines().next().expect("the cpu line");
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().expect("a number"))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6);
    (busy, busy + at(3) + at(4))
}

/// `Group.Name` of `/proc/net/snmp` in netns `ns` (`Tcp.RetransSegs`).
pub fn snmp_in(ns: &str, key: &str) -> u64 {
    let (group, name) = key.split_once('.').expect("Group.Name");
    let text = ns_exec(ns, &["cat", "/proc/net/snmp"]);
    let lines: Vec<&str> = text.lines().collect();
    lines
        .chunks(2)
        .find_map(|pair| {
            let [names, values] = pair else { return None };
            let names = names.strip_prefix(group)?.strip_prefix(':')?;
            let values = values.strip_prefix(group)?.strip_prefix(':')?;
            names
                .split_whitespace()
                .zip(values.split_whitespace())
                .find(|(n, _)| *n == name)
                .and_then(|(_, v)| v.parse().ok())
        })
        .unwrap_or_else(|| panic!("{key} not in {ns}'s /proc/net/snmp"))
}

#[cfg(test)]
mod tests {
    use super::{PoolLedger, PoolStats};

    fn stats(ring_full: u64, slow: u64) -> PoolStats {
        PoolStats {
            recycle_ring_full: ring_full,
            alloc_slow: slow,
            ..PoolStats::default()
        }
    }

    #[test]
    fn a_window_sums_known_pools_deltas_new_pools_whole_and_vanished_ones_last_seen() {
        let mut start = PoolLedger::default();
        start.pools.insert(1, stats(10, 1));
        start.pools.insert(2, stats(5, 5));
        let mut end = start.clone();
        // Pool 1 moved on; pool 2 vanished (its last seen values stay);
        // pool 3 was made by a rebuild in the window.
        end.pools.insert(1, stats(30, 4));
        end.pools.insert(3, stats(7, 2));
        assert_eq!(end.since(&start), stats(20 + 7, 3 + 2));
        assert_eq!(start.since(&start), PoolStats::default());
    }
}
