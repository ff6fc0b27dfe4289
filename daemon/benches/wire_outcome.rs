//! Tuning outcome on real traffic: static RX rings, the tuning rules
//! operators use, and pptune, on TCP over the ppsim wire (docs/testbed.md
//! "The wire"), judged by the kernel's counters and the application only.
//!
//! Not a criterion bench: `benches/wire-outcome.sh` runs the built binary
//! inside one 7.3 test VM under `--icount` (ppsim loaded from
//! `PPTUNE_PPSIM_KO`):
//!
//! ```text
//! wire_outcome-<hash> --pptraffic PATH --pptune PATH --policy FILE
//!     [--workloads drain,steady] [--sweep 256,362,...,16384] [--rounds 2]
//!     [--warmup-secs 2] [--window-secs 3] [--ctl-window-secs 3]
//!     [--quiet-secs 9] [--pptune-quiet-secs 30] [--max-run-secs 90]
//!     [--tuners max-once,doubling,one-shot,naive,pptune,settle,give-back-stop,give-back-steady,give-back-spill|none]
//!     [--settle-calm-secs 30] [--settle-watch-calms 2] [--spill-at 0.5] [--onset-seed N]
//!     [--age-secs A] [--queues N] [--repeats N] [--passes K,L]
//! ```
//!
//! Every point is a fresh wire (tests/src/wire.rs: A in `pp-tx`, B with
//! `--queues` RX queues, one by default, in `pp-rx`) and a fresh
//! `pptraffic --control` run of the
//! workload. **Static sweep**: B built at the ring, `--warmup-secs`, then
//! a measured window of `--window-secs`; `--rounds` rounds, the sweep
//! ascending in even rounds and descending in odd ones, so a drift of the
//! host or guest does not fall on one end of the sweep. `--repeats N` runs
//! every tuner N times, interleaved with the rounds: pass k is round k of
//! the sweep, then repeat k of each tuner (the row's `repeat`), their order
//! rotated by k; `--passes K,L` runs only those passes, unchanged, so a
//! long run can be split and its rows concatenated. **Tuned runs**: B
//! built at 256; a controller in this program reads B's pool counters per
//! `--ctl-window-secs` window and acts through `ethtool -G` in `pp-rx`:
//! - `max-once`: the device's maximum (ethtool's rx max) at the start, the
//!   `.link RxBufferSize=max` way;
//! - `doubling`: ring × 2 after every window whose ring_full share is ≥ 5 %;
//! - `one-shot`: at the first window whose ring_full share is ≥ 5 %, once,
//!   ring := R·(1 + F/K)·1.25 with F = `recycle.ring_full` and K =
//!   `recycle.cached` + `recycle.ring` over that window: returns freed per
//!   return that found room. If a burst of B pages returns to a ring of R,
//!   R find room and B − R are freed, so R·(1 + F/K) = B, and the rule
//!   sets 1.25 B;
//! - `naive`: ring + 25 % after every window whose share is ≥ 5 %;
//! - `pptune`: `pptune run` (enforce, `--policy`) started in `pp-rx`; this
//!   program only watches B's ring each second;
//! - `settle` (stationary bursty workloads only): `pptune` with `--policy`
//!   and `timing.calm_before_shrink` set to `--settle-calm-secs` (a drop-in,
//!   nothing else differs); once it made no change for
//!   `--pptune-quiet-secs` it is watched for 2 × that calm and a control
//!   window more, and the row says how many changes the watch saw (the
//!   target: none, docs/decisions.md §7); `--settle-watch-calms N` watches
//!   N × that calm instead;
//! - `give-back-stop`, `give-back-steady`: `pptune` with the settle policy
//!   grows B for the workload; once it made no change for
//!   `--pptune-quiet-secs`, the workload stops (`-stop`) or is replaced
//!   by one steady TCP stream (`-steady`), and B is watched for 2 ×
//!   calm_before_shrink + the policy's evaluation + a control window;
//!   `give-back-spill` is `-steady` with one spill `--spill-at` (a
//!   fraction, by default half) through the first calm: three streams
//!   send 2.5 MB each once and are drained
//!   together, a burst past the grown ring in one window (a long
//!   stationary load's rare spill: one window over the shrink threshold
//!   must not start the calm again, docs/decisions.md §7).
//!   A `give-back` row (not a `tuned` one) gives the grown ring and pool
//!   memory (`inflight-mem`, mean of one control window), the timeline of
//!   the watch (`[end s, ring, ring_full share, pool memory]`) and the ring
//!   and memory at its end (docs/decisions.md §7: a grown pool gives its
//!   memory back).
//!
//! (the ring_full share is `policy::signals::recycle_miss_share`: F / (F + K).)
//! Every measured row carries `age_s`, the seconds its traffic had run
//! when its window began. `--age-secs A` compares rows at equal age: a
//! static point warms up A (instead of `--warmup-secs`), and a tuned run is
//! measured at A (later only when it has not settled by then, which its
//! `age_s` shows: its control windows do not run past A), so a ring's
//! figure is not read against another's taken earlier in its traffic's
//! life (TCP's windows, the sender's pacing and the receiver's queues
//! settle over tens of seconds), nor in another phase of a load with
//! phases.
//! A tuned run ends once it made no change for `--quiet-secs`
//! (`--pptune-quiet-secs` for pptune: its policy's cooldown + evaluation),
//! or after `--max-run-secs`; then one window of twice `--window-secs` is
//! measured as a static point (one run against a sweep's rounds). With
//! mice (workload `mice`) every window also carries their messages'
//! delivery delay (`delay_us`: n, p50, p99, max), the figure that grows
//! when frames wait in a big ring. Every measured window records, from B's page pools (netlink, in
//! `pp-rx`, summed over every pool that existed in the window:
//! `PoolLedger`), B's qstats, `/proc/stat`, pp-tx's `/proc/net/snmp` and
//! pptraffic's byte count, taken together at `mark`s of the traffic
//! program: slow-path allocations, ring_full and the recycle split per
//! 1,000 frames B received, pool memory (`inflight-mem`, sampled every
//! 0.5 s: mean and max), delivered application bytes per 10^9 busy guest
//! instructions (busy jiffies × 10^7 under `--icount`), the application
//! rate, B's overruns and the sender's retransmits; each row also carries
//! the receiving netns's snmp/netstat deltas over the whole pptraffic run
//! (`rx_snmp_run`: TCP's collapse, prune, out-of-order counts). A tuned row
//! also carries its control windows' timeline (`[end s, ring, ring_full
//! share]`) and the times of its first and last change: with
//! `--ctl-window-secs 1` and the shipped policy (`wire-outcome.sh
//! --remedy`) the report reads the time to remedy from them; with
//! `--onset-seed N` each pptune run starts its traffic a random offset
//! (`onset_offset_s`) into pptune's sampling interval. One JSON line
//! per measurement on stdout; `benches/wire_report.py` makes the tables.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench binary
#![allow(clippy::cast_precision_loss)] // figures from counters far below 2^52

#[path = "shared/vm_outcome.rs"]
mod shared;

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use netlink::Client;
use netlink::netdev::PagePool;
use policy::signals::{recycle_miss_share, slow_refills};
use policy::snapshot::PoolStats;
use pptune_tests::ppsim::Ppsim;
use pptune_tests::wire::{
    PoolLedger, RX_NS, TX_NS, Wire, client_in, cpu_jiffies, dmesg_mark, kernel_trouble_since,
    snmp_in,
};
use serde_json::{Value, json};
use shared::{Daemon, GROW_AT, arg, naive_next};
use tokio::time::Instant;

const SWEEP: &str = "256,362,512,724,1024,1448,2048,2896,4096,5793,8192,11585,16384";
const START_RING: u32 = 256;
const HOME: Duration = Duration::from_secs(30);
const PORT: &str = "5400";

#[derive(Debug)]
struct Workload {
    name: &'static str,
    /// pptraffic's arguments (besides --control, --seed, --port), in
    /// groups.
    args: &'static [&'static [&'static str]],
    /// A stationary bursty load: the settle check (tuner `settle`) runs
    /// on it.
    stationary: bool,
    /// Received through devmem TCP: B is a devmem device with header
    /// split, a [`DEVMEM_MB`] udmabuf bound to its RX queue (the kernel's
    /// dma-buf memory provider), pptraffic `--devmem` (the devmem
    /// profile only).
    devmem: bool,
}

/// MiB of the dma-buf a devmem workload binds, the same at every ring:
/// the provider's gen_pool has a chunk per sg entry of it (a page each
/// for a udmabuf), so its size is part of what a provider refill or
/// release costs. 256 MiB holds ring 16384's posted buffers, the pool's
/// ring and five drains' tokens; udmabuf's own limit (64 MiB by default)
/// is raised to it.
const DEVMEM_MB: u64 = 256;
const UDMABUF_LIMIT: &str = "/sys/module/udmabuf/parameters/size_limit_mb";

/// B for workload `w` at `ring`: `--queues` RX queues (the flows spread
/// over them by RSS); a devmem workload's B is a devmem device of one
/// queue with header split on.
fn build_wire(o: &Opts, p: &Ppsim, w: &Workload, ring: u32) -> Wire {
    if !w.devmem {
        return Wire::build(p, o.queues, ring);
    }
    let limit: u64 = std::fs::read_to_string(UDMABUF_LIMIT)
        .unwrap_or_else(|e| {
            panic!("{UDMABUF_LIMIT}: {e} (the devmem profile's kernel has udmabuf)")
        })
        .trim()
        .parse()
        .expect("udmabuf size_limit_mb");
    if limit < DEVMEM_MB {
        std::fs::write(UDMABUF_LIMIT, DEVMEM_MB.to_string()).expect("udmabuf size_limit_mb");
    }
    Wire::build_devmem(p, 1, ring)
}

/// The rare workloads' one stream, into a 4 MiB receive buffer.
const RARE: &[&str] = &["--tcp", "1", "--rcvbuf", "4194304"];

/// `rare-stall`'s reader: it stops for 300 ms every 5 s, then reads its
/// whole receive buffer at once.
const STALL: &[&str] = &[
    "--pattern",
    "stall",
    "--pause-ms",
    "300",
    "--stall-every-ms",
    "5000",
];

/// 16 mice beside the streams: 2 KiB messages every 10 ms each.
const MICE: &[&str] = &[
    "--mice",
    "16",
    "--mice-bytes",
    "2048",
    "--mice-gap-ms",
    "10",
];

/// Four 10 MB/s UDP flows into 4 MiB receive buffers, no TCP stream: the
/// senders of `udp` and `varying-bursts`, which differ in how they read.
const UDP4: &[&str] = &[
    "--tcp",
    "0",
    "--udp",
    "4",
    "--udp-rate",
    "10000000",
    "--rcvbuf",
    "4194304",
];

const WORKLOADS: &[Workload] = &[
    // Bursty: four receivers pause 50 ms in step, then drain to EAGAIN;
    // TCP's receive autotuning grows the bursts over the run.
    Workload {
        name: "drain",
        args: &[pptune_tests::wire::DRAIN],
        stationary: false,
        devmem: false,
    },
    // The same drains with the receive buffers pinned (no autotuning): the
    // bursts stop growing, a stationary bursty load.
    Workload {
        name: "drain-pinned",
        args: &[pptune_tests::wire::DRAIN_PINNED],
        stationary: true,
        devmem: false,
    },
    // One stream read continuously: a big ring should not help.
    Workload {
        name: "steady",
        args: &[&["--tcp", "1", "--pattern", "steady"]],
        stationary: false,
        devmem: false,
    },
    // A slow consumer: one stream read at 20 MB/s, its socket full; the
    // pages it holds stay out, but what it reads comes back as fast as
    // the ring refills: no slow path on this wire, nothing to tune.
    Workload {
        name: "slow",
        args: &[&["--tcp", "1", "--pattern", "slow", "--read-rate", "20000000"]],
        stationary: false,
        devmem: false,
    },
    // A proxy's zero-copy path: one stream spliced through a pipe, whose
    // page references make the pool release every fragment page to the
    // allocator (`released_refcnt`): a slow path from held pages, which
    // no ring fixes.
    Workload {
        name: "splice",
        args: &[&["--tcp", "1", "--pattern", "splice"]],
        stationary: false,
        devmem: false,
    },
    // Many small flows beside one elephant: 16 mice send 2 KiB messages
    // every 10 ms over the elephant's queue; their delivery delay is the
    // price of frames waiting in a big ring.
    Workload {
        name: "mice",
        args: &[&["--tcp", "1", "--pattern", "steady"], MICE],
        stationary: false,
        devmem: false,
    },
    // UDP: four 10 MB/s flows, receivers draining every 50 ms in step.
    Workload {
        name: "udp",
        args: &[UDP4, pptune_tests::wire::DRAIN_READS],
        stationary: true,
        devmem: false,
    },
    // Devmem TCP: the pinned drains received through the kernel's dma-buf
    // memory provider (B's payload buffers are net_iovs of a udmabuf),
    // each receiver returning a drain's tokens only when it ends, 128 per
    // SO_DEVMEM_DONTNEED call, as NCCL returns a completed chunk's: what
    // a full pool ring cannot take goes back to the provider's gen_pool,
    // and the refills come from it.
    Workload {
        name: "devmem",
        args: &[pptune_tests::wire::DRAIN_PINNED, &["--devmem-hold", "0"]],
        stationary: true,
        devmem: true,
    },
    // The same with the tokens of four later drains still out when a
    // drain's go back (NCCL's pipeline keeps several chunks in flight):
    // the provider's gen_pool has that many more buffers allocated, and
    // its first-fit allocation and its free walk past them.
    Workload {
        name: "devmem-a2a",
        args: &[pptune_tests::wire::DRAIN_PINNED, &["--devmem-hold", "4"]],
        stationary: true,
        devmem: true,
    },
    // A rare huge burst among many small returns, on one queue: one
    // stream drained every 5 s (longer than the bench policy's 3 s window,
    // so most windows see no burst) from a 4 MiB receive buffer, beside 16
    // mice whose 2 KiB messages every 10 ms come back a few pages at a
    // time: the small returns dilute ring_full's share of the returns,
    // and the burst seldom makes a streak of windows.
    Workload {
        name: "rare-burst",
        args: &[RARE, &["--pattern", "drain", "--pause-ms", "5000"], MICE],
        stationary: true,
        devmem: false,
    },
    // The same burst, meant to be out for less than a sample: one stream
    // read every millisecond, but every 5 s not for 300 ms, so its 4 MiB
    // receive buffer fills and comes back at once, beside the same mice.
    // Measured (BENCHMARKS §3.E): the stream's own reads between the
    // stalls outnumber the burst, and ring 256 frees only 0.5-0.9 % of
    // returns, under the grow threshold; not yet a rare, huge burst.
    Workload {
        name: "rare-stall",
        args: &[RARE, STALL, MICE],
        stationary: true,
        devmem: false,
    },
    // `rare-stall` read slowly between its stalls (5 MB/s, its queue
    // full): ~17,000 small returns per 5 s beside the stall's drain of the
    // 4 MiB receive buffer, ~2,900 pages at once. The small returns
    // dilute ring_full / recycle_ring, so the excess line alone reads the
    // burst low (docs/decisions.md §4).
    Workload {
        name: "rare-stall-slow",
        args: &[RARE, STALL, &["--read-rate", "5000000"], MICE],
        stationary: true,
        devmem: false,
    },
    // Widely varying bursts: four 10 MB/s UDP flows whose receivers each
    // pause between 20 ms and 1 s, uniform in the logarithm and not in
    // step (pptraffic `--pause-max-ms`), so a drain returns anything from
    // ~50 to the 4 MiB receive buffer's ~1,000 pages: a return-weighted
    // mean and a sampled maximum see different bursts, and the tail is
    // what frees.
    Workload {
        name: "varying-bursts",
        args: &[
            UDP4,
            &[
                "--pattern",
                "drain",
                "--pause-ms",
                "20",
                "--pause-max-ms",
                "1000",
            ],
        ],
        stationary: true,
        devmem: false,
    },
    // On/off phases: the udp load sends for 4 s, then stops for 16 s
    // (pptraffic `--on-off-ms`). The evaluation of a growth made in an on
    // phase (10 s under the bench policy) falls mostly into the off phase
    // after it, with few returns or none to judge on; the next on phase
    // must still grow the ring if it needs more.
    Workload {
        name: "on-off",
        args: &[
            UDP4,
            pptune_tests::wire::DRAIN_READS,
            &["--on-off-ms", "4000,16000"],
        ],
        stationary: false,
        devmem: false,
    },
    // The drains, not in step: the returns overlap.
    Workload {
        name: "drain-async",
        args: &[&["--tcp", "4", "--pattern", "drain", "--pause-ms", "50"]],
        stationary: false,
        devmem: false,
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tuner {
    MaxOnce,
    Doubling,
    OneShot,
    Naive,
    Pptune,
    /// pptune with the settle policy: converges, then is watched for 2 ×
    /// its `calm_before_shrink` (stationary workloads only).
    Settle,
    /// pptune with the settle policy grows the ring; then the load stops
    /// (`give-back-stop`) or turns to one steady stream
    /// (`give-back-steady`, `give-back-spill` with one spill halfway
    /// through the calm), and the memory it gives back is watched.
    GiveBack(Then),
    /// B starts at the device's maximum (`.link RxBufferSize=max`), set
    /// before pptune starts; pptune runs the settle policy with
    /// `rings.right_size: true` and right-sizes it down.
    RightSize,
}

/// `give-back-spill`'s spill: three streams each send 2.5 MB once into a
/// 4 MiB receive buffer (8 MiB of truesize: it all fits), drained together
/// a second after they start, so their ~5,000 pages come back in one burst
/// past a ring grown for `drain-pinned`'s 1 MiB drains (about 1,100).
/// Measured (BENCHMARKS §3.E): its window freed 1.49 % of returns, over
/// the shrink threshold, but at half of a 20 s calm it was also 0.37 % of
/// the calm's returns, over the priced threshold (0.27 % under
/// iommu-strict), so it ended the calm: to be one window's spill among
/// many it must come later in the calm or be smaller.
const SPILL: Workload = Workload {
    name: "spill",
    args: &[&[
        "--tcp",
        "3",
        "--pattern",
        "drain",
        "--sync",
        "--pause-ms",
        "1000",
        "--rcvbuf",
        "4194304",
        "--bytes",
        "2500000",
    ]],
    stationary: true,
    devmem: false,
};

/// What the load does once pptune has grown the ring (`give-back-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Stop,
    Steady,
    /// Steady, and one burst past the grown ring halfway through the calm.
    Spill,
}

impl Tuner {
    fn parse(s: &str) -> Self {
        match s {
            "max-once" => Self::MaxOnce,
            "doubling" => Self::Doubling,
            "one-shot" => Self::OneShot,
            "naive" => Self::Naive,
            "pptune" => Self::Pptune,
            "settle" => Self::Settle,
            "give-back-stop" => Self::GiveBack(Then::Stop),
            "give-back-steady" => Self::GiveBack(Then::Steady),
            "give-back-spill" => Self::GiveBack(Then::Spill),
            "right-size" => Self::RightSize,
            _ => panic!("unknown tuner {s}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::MaxOnce => "max-once",
            Self::Doubling => "doubling",
            Self::OneShot => "one-shot",
            Self::Naive => "naive",
            Self::Pptune => "pptune",
            Self::Settle => "settle",
            Self::GiveBack(Then::Stop) => "give-back-stop",
            Self::GiveBack(Then::Steady) => "give-back-steady",
            Self::GiveBack(Then::Spill) => "give-back-spill",
            Self::RightSize => "right-size",
        }
    }

    /// The ring after a control window with counters `d` at `ring`
    /// (`None`: no change). `acted`: the one-shot already acted.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a ring: 0 < to <= max
    fn next(self, ring: u32, d: &PoolStats, max: u32, acted: bool) -> Option<u32> {
        let share = recycle_miss_share(d).unwrap_or(0.0);
        if share < GROW_AT || ring >= max {
            return None;
        }
        let to = match self {
            Self::MaxOnce | Self::Pptune | Self::Settle | Self::GiveBack(_) | Self::RightSize => {
                return None;
            }
            Self::Doubling => ring.saturating_mul(2).min(max),
            Self::Naive => naive_next(ring, max),
            Self::OneShot if acted => return None,
            Self::OneShot => {
                let landed = d.recycle_cached + d.recycle_ring;
                let f = d.recycle_ring_full as f64 / landed.max(1) as f64;
                let to = (f64::from(ring) * (1.0 + f) * 1.25).ceil();
                // Saturates: a NaN or an overflow becomes the device's max.
                u32::try_from(to.min(f64::from(max)) as u64).unwrap_or(max)
            }
        };
        Some(to)
    }
}

#[derive(Debug)]
struct Opts {
    pptraffic: String,
    pptune: String,
    policy: String,
    sweep: Vec<u32>,
    rounds: u32,
    /// `--repeats N`: every tuner runs N times, one per pass of the sweep
    /// (interleaved with its rounds, the tuners' order rotated each pass).
    repeats: u32,
    warmup: f64,
    window: f64,
    ctl_window: u64,
    quiet: f64,
    pptune_quiet: f64,
    max_run: f64,
    tuners: Vec<Tuner>,
    workloads: Vec<String>,
    /// `settle`: the policy directory (`--policy` with
    /// `timing.calm_before_shrink` overridden) and that calm.
    settle_policy: String,
    settle_calm: f64,
    /// `settle`: calms watched after convergence.
    settle_watch_calms: f64,
    /// `give-back-spill`: when the spill starts, as a fraction of the calm
    /// after the switch.
    spill_at: f64,
    /// The settle policy's `timing.evaluation`, in seconds.
    settle_eval: f64,
    /// `right-size`: the settle policy with `rings.right_size: true`.
    right_size_policy: String,
    /// `--onset-seed N`: each pptune run starts its traffic a uniformly
    /// random offset in [0, the policy's interval) after the daemon, drawn
    /// from N and the run's number ([`onset_offset`]), so the onset falls
    /// at any phase of pptune's sampling, not where the start-up puts it.
    onset_seed: Option<u64>,
    /// `--trace-provider`: after a devmem workload's sweep, one traced
    /// point per ring ([`provider_trace_point`]).
    trace_provider: bool,
    /// `--age-secs A`: every static point and tuned run measured at the
    /// same age of its traffic, A (a tuned run not settled by then, later).
    age: Option<f64>,
    /// `--queues N`: B's RX queues (default 1).
    queues: u32,
    /// `--passes K,L,...`: only these passes run (default all), each as it
    /// would in the whole run (its sweep direction, its tuners' rotation,
    /// its `round` and `repeat`), so one run's passes can be split across
    /// VMs or runs and their rows concatenated.
    passes: Option<Vec<u32>>,
}

/// The onset offset of the `run`-th pptune run (0-based) under
/// `--onset-seed seed`: splitmix64 of both, as a fraction of `interval`.
fn onset_offset(seed: u64, run: u64, interval: f64) -> f64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(run.wrapping_add(1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 * interval
}

/// pptune runs started so far (the `run` of [`onset_offset`]).
static PPTUNE_RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn num<T: std::str::FromStr>(name: &str, default: T) -> T {
    arg(name).map_or(default, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("{name}: not a number: {s}"))
    })
}

/// The sampling interval of the policy pptune runs with, in seconds (the
/// unit the time to remedy is judged in).
fn policy_interval(path: &str) -> f64 {
    let loaded = config::load(Some(std::path::Path::new(path)))
        .unwrap_or_else(|e| panic!("{path}: {}", config::render(&e)));
    loaded.policy.timing.interval.as_secs_f64()
}

fn opts() -> Opts {
    let list = |name: &str, default: &str| -> Vec<String> {
        arg(name)
            .unwrap_or_else(|| default.into())
            .split(',')
            .map(str::to_owned)
            .collect()
    };
    Opts {
        pptraffic: arg("--pptraffic").expect("--pptraffic PATH"),
        pptune: arg("--pptune").expect("--pptune PATH"),
        policy: arg("--policy").expect("--policy FILE"),
        sweep: list("--sweep", SWEEP)
            .iter()
            .map(|s| s.parse().expect("a ring"))
            .collect(),
        rounds: num("--rounds", 2),
        repeats: num("--repeats", 1),
        warmup: num("--warmup-secs", 2.0),
        window: num("--window-secs", 3.0),
        ctl_window: num("--ctl-window-secs", 3),
        quiet: num("--quiet-secs", 9.0),
        pptune_quiet: num("--pptune-quiet-secs", 30.0),
        max_run: num("--max-run-secs", 90.0),
        tuners: list("--tuners", "max-once,doubling,one-shot,naive,pptune")
            .iter()
            .filter(|s| *s != "none")
            .map(|s| Tuner::parse(s))
            .collect(),
        workloads: list("--workloads", "drain,steady"),
        settle_policy: String::new(),
        settle_calm: num("--settle-calm-secs", 30.0),
        settle_watch_calms: num("--settle-watch-calms", 2.0),
        spill_at: {
            // Inside the watch (two calms), so the spill is seen.
            let f: f64 = num("--spill-at", 0.5);
            assert!(
                (0.0..2.0).contains(&f),
                "--spill-at {f}: a fraction of the calm in [0, 2)"
            );
            f
        },
        settle_eval: 0.0,
        right_size_policy: String::new(),
        onset_seed: arg("--onset-seed").map(|s| s.parse().expect("--onset-seed N")),
        trace_provider: std::env::args().any(|a| a == "--trace-provider"),
        age: arg("--age-secs").map(|s| s.parse().expect("--age-secs A")),
        queues: num("--queues", 1),
        passes: arg("--passes").map(|s| {
            s.split(',')
                .map(|k| {
                    k.parse()
                        .unwrap_or_else(|_| panic!("--passes: not a pass: {k}"))
                })
                .collect()
        }),
    }
}

/// The settle policy: `--policy` as `policy.yaml` of a directory whose
/// drop-in overrides only `timing.calm_before_shrink`, so the settle check
/// runs the outcome policy and nothing else differs.
fn settle_policy(o: &mut Opts) {
    let dir = std::env::temp_dir().join("pptune-wire-settle");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("policy.d")).expect("settle policy dir");
    std::fs::copy(&o.policy, dir.join("policy.yaml")).expect("settle policy");
    std::fs::write(
        dir.join("policy.d/settle.yaml"),
        format!("timing:\n  calm_before_shrink: {}s\n", o.settle_calm),
    )
    .expect("settle drop-in");
    o.settle_policy = dir.display().to_string();
    let loaded = config::load(Some(&dir));
    o.settle_eval = loaded
        .as_ref()
        .map_or(0.0, |l| l.policy.timing.evaluation.as_secs_f64());
    let calm = loaded
        .unwrap_or_else(|e| panic!("{}: {}", dir.display(), config::render(&e)))
        .policy
        .timing
        .calm_before_shrink
        .as_secs_f64();
    assert!((calm - o.settle_calm).abs() < 1e-9, "settle calm {calm}");
    // The right-size policy: the same, with right-sizing on.
    let rs = std::env::temp_dir().join("pptune-wire-right-size");
    let _ = std::fs::remove_dir_all(&rs);
    std::fs::create_dir_all(rs.join("policy.d")).expect("right-size policy dir");
    std::fs::copy(&o.policy, rs.join("policy.yaml")).expect("right-size policy");
    std::fs::copy(
        dir.join("policy.d/settle.yaml"),
        rs.join("policy.d/settle.yaml"),
    )
    .expect("right-size drop-in");
    std::fs::write(
        rs.join("policy.d/right-size.yaml"),
        "rings:\n  right_size: true\n",
    )
    .expect("right-size drop-in");
    let loaded = config::load(Some(&rs))
        .unwrap_or_else(|e| panic!("{}: {}", rs.display(), config::render(&e)));
    assert!(loaded.policy.rings.right_size, "right-size policy");
    o.right_size_policy = rs.display().to_string();
}

/// A `pptraffic --control` run: its stdin, and its stdout's JSON lines.
struct Traffic {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
}

impl Traffic {
    fn start(o: &Opts, w: &Workload, wire: &Wire) -> Self {
        Self::start_on(o, w, PORT, wire)
    }

    fn start_on(o: &Opts, w: &Workload, port: &str, wire: &Wire) -> Self {
        let mb = DEVMEM_MB.to_string();
        let devmem = [
            "--devmem",
            wire.b.name(),
            "--devmem-queue",
            "0",
            "--devmem-mb",
            &mb,
        ];
        let mut child = Command::new(&o.pptraffic)
            .args(["--control", "--duration-ms", "36000000", "--seed", "29"])
            .args(["--port", port])
            .args(w.args.concat())
            .args(if w.devmem { &devmem[..] } else { &[] })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", o.pptraffic));
        let stdin = child.stdin.take().expect("stdin");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                let v = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    /// A `mark`: bytes the receivers read so far, bytes delivered (read +
    /// held in order, unread, in their sockets), and the mice messages'
    /// delivery delay since the last mark (`null` without mice).
    fn mark(&mut self) -> (u64, u64, Value) {
        writeln!(self.stdin, "mark").expect("pptraffic's stdin");
        loop {
            let v = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .expect("pptraffic answers a mark");
            match v["type"].as_str() {
                Some("mark") => {
                    let read = v["received"].as_u64().expect("received");
                    let app = read + v["queued"].as_u64().expect("queued");
                    return (read, app, v["delay_us"].clone());
                }
                Some("error") => panic!("pptraffic: {v}"),
                _ => {}
            }
        }
    }

    /// Stops the senders, waits for the end; the summary line, with
    /// `devmem` (a devmem workload): the token returns of every stream
    /// summed over the run.
    fn stop(mut self) -> Value {
        // A run with `--bytes` ends by itself once its streams are read:
        // its stdin is gone, and its summary is on its stdout.
        if let Err(e) = writeln!(self.stdin, "stop") {
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "pptraffic's stdin: {e}");
        }
        drop(self.stdin);
        let st = self.child.wait().expect("pptraffic");
        let mut devmem: Option<[u64; 5]> = None;
        let summary = self.lines.iter().find(|v| {
            let d = &v["devmem"];
            if v["type"] == "flow" && d.is_object() {
                let n = |k: &str| d[k].as_u64().unwrap_or(0);
                let acc = devmem.get_or_insert([0; 5]);
                acc[0] += n("dontneed_calls");
                acc[1] += n("tokens_returned");
                acc[2] += n("dontneed_ns");
                acc[3] = acc[3].max(n("dontneed_max_ns"));
                acc[4] += n("dmabuf_bytes");
            }
            v["type"] == "summary"
        });
        let mut summary =
            summary.unwrap_or_else(|| panic!("pptraffic ended ({st}) without a summary"));
        assert!(st.success(), "pptraffic: {st}: {summary}");
        if let Some([calls, tokens, ns, max_ns, bytes]) = devmem {
            summary["devmem"] = json!({"dontneed_calls": calls, "tokens": tokens,
                "dontneed_ns_per_call": ns as f64 / calls.max(1) as f64,
                "dontneed_max_ns": max_ns, "dmabuf_bytes": bytes});
        }
        summary
    }
}

/// Everything a window is measured from, taken at one instant.
struct Snap {
    t: Instant,
    read: u64,
    app: u64,
    /// The mice's delay since the previous mark (pptraffic's `delay_us`).
    delay: Value,
    busy: u64,
    total: u64,
    ledger: PoolLedger,
    frames: u64,
    overruns: u64,
    retrans: u64,
}

async fn snap(c: &Client, ifx: u32, ledger: &mut PoolLedger, tr: &mut Traffic) -> Snap {
    let t = Instant::now();
    let (read, app, delay) = tr.mark();
    let (busy, total) = cpu_jiffies();
    ledger.refresh(c).await;
    let q = c.qstats(Some(ifx), 0).await.expect("qstats-get");
    let q = q.first().map(|q| q.counters).unwrap_or_default();
    Snap {
        t,
        read,
        app,
        delay,
        busy,
        total,
        ledger: ledger.clone(),
        frames: q.rx_packets.unwrap_or(0),
        overruns: q.rx_hw_drop_overruns.unwrap_or(0),
        retrans: snmp_in(TX_NS, "Tcp.RetransSegs"),
    }
}

async fn rx_ring(c: &Client, ifx: u32) -> u32 {
    c.rings(ifx, None).await.expect("rings-get").rx.unwrap_or(0)
}

/// Pool memory now: `inflight-mem` of every pool `pp-rx` lists (attached
/// and detached: B's only device there), of those without a memory
/// provider (host pages; a provider pool's net_iovs are the dma-buf's,
/// pinned by the binding whatever the ring), and the listing itself.
async fn pool_mem(c: &Client) -> (u64, u64, Vec<PagePool>) {
    let pools = c.page_pools().await.expect("page-pool-get");
    let all = pools.iter().filter_map(|p| p.inflight_mem).sum();
    let host = pools
        .iter()
        .filter(|p| p.dmabuf.is_none())
        .filter_map(|p| p.inflight_mem)
        .sum();
    (all, host, pools)
}

/// One measured window of `secs` at the ring B has now.
async fn measure(
    c: &Client,
    wire: &Wire,
    ifx: u32,
    ledger: &mut PoolLedger,
    tr: &mut Traffic,
    secs: f64,
) -> Value {
    let q0 = wire.b.queues().expect("B's queues");
    let s0 = snap(c, ifx, ledger, tr).await;
    let mut mem = Vec::new();
    let mut host = Vec::new();
    let mut listed = Vec::new();
    while s0.t.elapsed().as_secs_f64() + 0.5 <= secs {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (m, h, pools) = pool_mem(c).await;
        mem.push(m);
        host.push(h);
        listed = pools;
        ledger.refresh(c).await;
    }
    let end = s0.t + Duration::from_secs_f64(secs);
    tokio::time::sleep_until(end).await;
    let s1 = snap(c, ifx, ledger, tr).await;
    let q1 = wire.b.queues().expect("B's queues");
    let provider = listed.iter().any(|p| p.dmabuf.is_some());
    let mut row = figures(&s0, &s1, &mem, provider, rx_ring(c, ifx).await);
    row["host_mem_mean"] = json!(host.iter().sum::<u64>() as f64 / host.len().max(1) as f64);
    if provider || q1.len() > 1 {
        // Per pool (header split: the provider's and the header pages';
        // several queues: each queue's): what each counted in the window,
        // and its inflight at the last memory sample.
        let pools: Vec<Value> = s1
            .ledger
            .each_since(&s0.ledger)
            .map(|(id, d)| {
                let p = listed.iter().find(|p| p.id == Some(id));
                json!({"id": id, "provider": p.is_some_and(|p| p.dmabuf.is_some()),
                       "inflight": p.and_then(|p| p.inflight),
                       "ring_full": d.recycle_ring_full, "cached": d.recycle_cached,
                       "ring": d.recycle_ring, "released": d.recycle_released_refcnt,
                       "empty": d.alloc_empty, "slow": d.alloc_slow, "fast": d.alloc_fast,
                       "refill": d.alloc_refill})
            })
            .collect();
        row["pools"] = json!(pools);
    }
    // The provider's refills in the window (B's one queue; the counters
    // of a queue rebuilt in the window start again at 0).
    let sum = |q: &[pptune_tests::ppsim::QueueState]| {
        q.iter()
            .fold((0, 0), |(n, ns), q| (n + q.mp_allocs, ns + q.mp_alloc_ns))
    };
    let ((n0, ns0), (n1, ns1)) = (sum(&q0), sum(&q1));
    if n1 > 0 {
        let (n, ns) = if n1 >= n0 {
            (n1 - n0, ns1 - ns0)
        } else {
            (n1, ns1)
        };
        row["mp_allocs"] = json!(n);
        row["mp_alloc_ns_mean"] = json!(ns as f64 / n.max(1) as f64);
        row["mp_alloc_max_ns"] = json!(q1.iter().map(|q| q.mp_alloc_max_ns).max());
    }
    row
}

/// `provider`: B's pools have a memory provider, whose refills
/// `slow_per_k` counts (`policy::signals::slow_refills`).
fn figures(s0: &Snap, s1: &Snap, mem: &[u64], provider: bool, ring: u32) -> Value {
    let d = s1.ledger.since(&s0.ledger);
    let frames = s1.frames - s0.frames;
    let per_k = |n: u64| n as f64 * 1000.0 / frames.max(1) as f64;
    let secs = (s1.t - s0.t).as_secs_f64();
    let app = s1.app - s0.app;
    let busy = s1.busy - s0.busy;
    json!({
        "ring": ring,
        "secs": secs,
        "frames": frames,
        // delivered in order to the receiving sockets (read or queued)
        "app_bytes": app,
        "read_bytes": s1.read - s0.read,
        "busy_jiffies": busy,
        "total_jiffies": s1.total - s0.total,
        // busy jiffies x 10^7 instructions (icount shift=0, USER_HZ 100)
        "bytes_per_gi": app as f64 * 100.0 / busy.max(1) as f64,
        "app_mb_s": app as f64 / secs / 1e6,
        "slow_per_k": per_k(slow_refills(&d, provider) + d.alloc_slow_high_order),
        "provider": provider,
        "ring_full_per_k": per_k(d.recycle_ring_full),
        "cached_per_k": per_k(d.recycle_cached),
        "ring_per_k": per_k(d.recycle_ring),
        "released_per_k": per_k(d.recycle_released_refcnt),
        "ring_full_share": recycle_miss_share(&d),
        "mem_mean": mem.iter().sum::<u64>() as f64 / mem.len().max(1) as f64,
        "mem_max": mem.iter().max().copied().unwrap_or(0),
        "overruns": s1.overruns - s0.overruns,
        "retrans": s1.retrans - s0.retrans,
        // the mice's messages completed in the window (the mark at its
        // start reset pptraffic's count): {n, p50, p99, max} in µs
        "delay_us": s1.delay,
    })
}

/// Ends a point: the traffic, then the wire (every pool must vanish).
fn finish(wire: Wire, tr: Traffic) -> Value {
    let summary = tr.stop();
    wire.teardown(HOME)
        .unwrap_or_else(|p| panic!("pools outlived the wire: {p:#?}"));
    summary
}

fn emit(mut row: Value, extra: Value) {
    if let (Some(r), Value::Object(e)) = (row.as_object_mut(), extra) {
        r.extend(e);
    }
    println!("{row}");
}

async fn static_point(o: &Opts, p: &Ppsim, w: &Workload, ring: u32, round: u32) {
    let wire = build_wire(o, p, w, ring);
    let ifx = wire.b_ifindex();
    let c = client_in(RX_NS).await;
    let mut tr = Traffic::start(o, w, &wire);
    let age = o.age.unwrap_or(o.warmup);
    tokio::time::sleep(Duration::from_secs_f64(age)).await;
    let mut ledger = PoolLedger::default();
    let m = measure(&c, &wire, ifx, &mut ledger, &mut tr, o.window).await;
    drop(c);
    let summary = finish(wire, tr);
    emit(
        m,
        json!({"kind": "static", "workload": w.name, "config": ring.to_string(), "round": round,
               "age_s": age, "intact": summary["intact"], "rx_snmp_run": summary["snmp"],
               "devmem_run": summary["devmem"]}),
    );
}

/// The dma-buf provider's two operations (`net/core/devmem.c`, called
/// through the pool's `mp_ops`, so never inlined): a refill (a gen_pool
/// allocation) and a release (`gen_pool_has_addr` and `gen_pool_free`).
const PROVIDER_OPS: [&str; 2] = [
    "mp_dmabuf_devmem_alloc_netmems",
    "mp_dmabuf_devmem_release_page",
];

fn tracefs(file: &str, value: &str) {
    let path = pptune_tests::vm::tracefs().join(file);
    std::fs::write(&path, value).unwrap_or_else(|e| panic!("{} <- {value:?}: {e}", path.display()));
}

/// `--trace-provider`: a devmem workload's point at `ring`, its window
/// measured with the kernel's function_graph tracer on the provider's
/// two operations (depth 1: each call's duration, callees included, not
/// traced themselves). Under `--icount` a guest ns is an instruction;
/// the tracer's own entry and exit cost is in each duration. The
/// traffic's figures are not kept: tracing slows it.
async fn provider_trace_point(o: &Opts, p: &Ppsim, w: &Workload, ring: u32) {
    let wire = build_wire(o, p, w, ring);
    let tr = Traffic::start(o, w, &wire);
    tokio::time::sleep(Duration::from_secs_f64(o.warmup)).await;
    tracefs("tracing_on", "0");
    tracefs("current_tracer", "nop");
    tracefs("set_ftrace_filter", &PROVIDER_OPS.join(" "));
    tracefs("max_graph_depth", "1");
    tracefs("buffer_size_kb", "32768");
    tracefs("current_tracer", "function_graph");
    tracefs("trace", "");
    tracefs("tracing_on", "1");
    tokio::time::sleep(Duration::from_secs_f64(o.window)).await;
    tracefs("tracing_on", "0");
    let text = std::fs::read_to_string(pptune_tests::vm::tracefs().join("trace")).expect("trace");
    tracefs("current_tracer", "nop");
    tracefs("set_ftrace_filter", "");
    tracefs("max_graph_depth", "0");
    let mut ns: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((left, right)) = line.split_once('|') else {
            continue;
        };
        let Some(f) = PROVIDER_OPS
            .iter()
            .find(|f| right.trim() == format!("{f}();"))
        else {
            continue;
        };
        let us = left
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .find(|p| p[1] == "us")
            .and_then(|p| p[0].parse::<f64>().ok());
        if let Some(us) = us {
            ns.entry(f).or_default().push(us * 1000.0);
        }
    }
    let stats: serde_json::Map<String, Value> = ns
        .into_iter()
        .map(|(f, mut v)| {
            v.sort_by(f64::total_cmp);
            // The nearest rank below: (n - 1) * pct / 100.
            let q = |pct: usize| v[(v.len() - 1) * pct / 100];
            (
                f.to_owned(),
                json!({"n": v.len(), "mean_ns": v.iter().sum::<f64>() / v.len() as f64,
                       "p50_ns": q(50), "p90_ns": q(90), "p99_ns": q(99), "max_ns": q(100)}),
            )
        })
        .collect();
    finish(wire, tr);
    emit(
        json!({"kind": "provider-trace", "workload": w.name, "config": ring.to_string(),
               "ring": ring, "secs": o.window}),
        json!({"ops": stats}),
    );
}

/// A tuned run's controller state.
#[derive(Debug, Default)]
struct Ctl {
    ring: u32,
    changes: u32,
    first_change_s: Option<f64>,
    last_change_s: f64,
    acted: bool,
    timeline: Vec<Value>,
    /// Every change's time, in order.
    at: Vec<f64>,
}

impl Ctl {
    fn changed(&mut self, ring: u32, t: f64) {
        self.ring = ring;
        self.changes += 1;
        self.first_change_s.get_or_insert(t);
        self.last_change_s = t;
        self.acted = true;
        self.at.push(t);
    }

    /// Seconds from `since` to the first change after it (0 when none).
    fn first_after(&self, since: f64) -> f64 {
        self.at
            .iter()
            .find(|&&t| t >= since)
            .map_or(0.0, |t| t - since)
    }
}

/// One control window: refresh the ledger each second (pptune: note its
/// changes), then apply the tuner's rule to the window's counters.
#[allow(clippy::too_many_arguments)]
async fn control_window(
    o: &Opts,
    tuner: Tuner,
    c: &Client,
    ifx: u32,
    wire: &Wire,
    ledger: &mut PoolLedger,
    ctl: &mut Ctl,
    t0: Instant,
    max: u32,
) {
    let start = ledger.clone();
    for _ in 0..o.ctl_window {
        tokio::time::sleep(Duration::from_secs(1)).await;
        ledger.refresh(c).await;
        let ring = rx_ring(c, ifx).await;
        if ring != ctl.ring {
            ctl.changed(ring, t0.elapsed().as_secs_f64());
        }
    }
    let d = ledger.since(&start);
    let t = t0.elapsed().as_secs_f64();
    ctl.timeline.push(json!([
        (t * 10.0).round() / 10.0,
        ctl.ring,
        recycle_miss_share(&d)
    ]));
    if let Some(to) = tuner.next(ctl.ring, &d, max, ctl.acted) {
        wire.set_b_ring(to);
        let now = rx_ring(c, ifx).await;
        ctl.changed(now, t0.elapsed().as_secs_f64());
    }
}

fn spawn_pptune(o: &Opts, w: &Workload, policy: &str) -> Daemon {
    // A fresh runtime dir per run: B is `ppsim1` in every run, and a shared
    // state file would hand this run an earlier run's change history.
    let dir = std::env::temp_dir().join(format!("pptune-wire-{}-{}", std::process::id(), w.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("runtime dir");
    // One log per run (`pptune-wire-drain-1.log`, `-2`, …): a workload's
    // runs share a VM, and a log named for the workload alone kept only
    // the last of them.
    let log = std::env::var_os("PPTUNE_VM_OUT").map_or_else(Stdio::null, |out| {
        let out = std::path::Path::new(&out);
        (1u32..)
            .map(|n| out.join(format!("pptune-wire-{}-{n}.log", w.name)))
            .find(|p| !p.exists())
            .and_then(|p| std::fs::File::create(p).ok())
            .map_or_else(Stdio::null, Stdio::from)
    });
    let child = Command::new("ip")
        .args(["netns", "exec", RX_NS, &o.pptune, "--config", policy, "run"])
        .env("RUNTIME_DIRECTORY", &dir)
        .env("STATE_DIRECTORY", &dir)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("pptune");
    Daemon(child)
}

async fn tuned_run(o: &Opts, p: &Ppsim, w: &Workload, tuner: Tuner, repeat: u32) {
    let wire = build_wire(o, p, w, START_RING);
    let ifx = wire.b_ifindex();
    let c = client_in(RX_NS).await;
    let rings = c.rings(ifx, None).await.expect("rings-get");
    let max = rings.rx_max.expect("rx max");
    let daemon = match tuner {
        Tuner::Pptune => Some(spawn_pptune(o, w, &o.policy)),
        Tuner::Settle => Some(spawn_pptune(o, w, &o.settle_policy)),
        Tuner::GiveBack(_) => unreachable!("give_back_run"),
        Tuner::RightSize => {
            wire.set_b_ring(max);
            Some(spawn_pptune(o, w, &o.right_size_policy))
        }
        _ => None,
    };
    // `settle`: once converged, watched for 2 × calm_before_shrink and a
    // control window more; (converged at, changes then).
    let watch = o.settle_watch_calms * o.settle_calm
        + f64::from(u32::try_from(o.ctl_window).unwrap_or(u32::MAX));
    let mut converged: Option<(f64, u32)> = None;
    let mut ctl = Ctl {
        ring: rx_ring(&c, ifx).await,
        ..Ctl::default()
    };
    // A random onset: the traffic (and the run's clock) starts this long
    // after the daemon.
    let onset_offset_s = match (tuner, o.onset_seed) {
        (Tuner::Pptune, Some(seed)) => {
            let run = PPTUNE_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let off = onset_offset(seed, run, policy_interval(&o.policy));
            tokio::time::sleep(Duration::from_secs_f64(off)).await;
            Some(off)
        }
        _ => None,
    };
    let t0 = Instant::now();
    let (quiet, min_run) = match tuner {
        Tuner::MaxOnce => {
            wire.set_b_ring(max);
            ctl.changed(rx_ring(&c, ifx).await, 0.0);
            (o.warmup, o.warmup)
        }
        Tuner::Pptune | Tuner::Settle | Tuner::GiveBack(_) => (o.pptune_quiet, o.pptune_quiet),
        // Right-sizing waits a calm for each step: quiet for a calm, an
        // evaluation and the cooldown after the last one.
        Tuner::RightSize => {
            let q = o.settle_calm + o.settle_eval + o.pptune_quiet;
            (q, q)
        }
        _ => (o.quiet, o.quiet),
    };
    let min_run = o.age.map_or(min_run, |a| min_run.max(a));
    let mut tr = Traffic::start(o, w, &wire);
    let mut ledger = PoolLedger::default();
    ledger.refresh(&c).await;
    loop {
        let t = t0.elapsed().as_secs_f64();
        let settled = t >= min_run && t >= ctl.last_change_s + quiet;
        if tuner == Tuner::Settle {
            if settled && converged.is_none() {
                converged = Some((t, ctl.changes));
            }
            if converged.is_some_and(|(at, _)| t >= at + watch) || t >= o.max_run + watch {
                break;
            }
        } else if t >= o.max_run || settled {
            break;
        }
        // A run that will be settled at the age, and whose next control
        // window would end past it, waits out the rest instead: it is
        // measured at the age, as a static point is, not up to a window
        // later (a phase later, on a load with phases). A change in the
        // wait is seen, and the run goes on.
        let gap = min_run - t;
        if tuner != Tuner::Settle
            && o.age.is_some()
            && gap > 0.0
            && gap < Duration::from_secs(o.ctl_window).as_secs_f64()
            && min_run >= ctl.last_change_s + quiet
            && min_run < o.max_run
        {
            tokio::time::sleep(Duration::from_secs_f64(gap)).await;
            ledger.refresh(&c).await;
            let ring = rx_ring(&c, ifx).await;
            if ring != ctl.ring {
                ctl.changed(ring, t0.elapsed().as_secs_f64());
            }
            continue;
        }
        control_window(o, tuner, &c, ifx, &wire, &mut ledger, &mut ctl, t0, max).await;
    }
    let run_s = t0.elapsed().as_secs_f64();
    let stopped_by_max = run_s < ctl.last_change_s + quiet;
    let before = ctl.ring;
    // Twice a static point's window: one run against a sweep's rounds.
    let m = measure(&c, &wire, ifx, &mut ledger, &mut tr, 2.0 * o.window).await;
    let changed_in_window = m["ring"].as_u64() != Some(u64::from(before));
    let daemon_cpu = daemon.as_ref().and_then(Daemon::cpu_secs);
    drop(daemon);
    drop(c);
    let summary = finish(wire, tr);
    emit(
        m,
        json!({"kind": "tuned", "workload": w.name, "config": tuner.name(), "repeat": repeat, "changes": ctl.changes,
               "first_change_s": ctl.first_change_s, "last_change_s": ctl.last_change_s, "run_s": run_s, "age_s": run_s, "max_ring": max,
               "changed_in_window": changed_in_window, "stopped_by_max": stopped_by_max, "daemon_cpu_s": daemon_cpu,
               "onset_offset_s": onset_offset_s,
               "settle": converged.map(|(at, n)| json!({"converged_s": at, "watch_s": run_s - at,
                   "calm_before_shrink_s": o.settle_calm, "changes_in_watch": ctl.changes - n})),
               "intact": summary["intact"], "rx_snmp_run": summary["snmp"],
               "devmem_run": summary["devmem"], "timeline": ctl.timeline}),
    );
}

/// The mean pool memory over `secs` seconds, sampled each second, while
/// the ledger and the ring are followed (`ctl`: a change is noted).
async fn mem_over(
    c: &Client,
    ifx: u32,
    ledger: &mut PoolLedger,
    ctl: &mut Ctl,
    t0: Instant,
    secs: u64,
) -> f64 {
    let mut mem = Vec::new();
    for _ in 0..secs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        ledger.refresh(c).await;
        mem.push(pool_mem(c).await.0);
        let ring = rx_ring(c, ifx).await;
        if ring != ctl.ring {
            ctl.changed(ring, t0.elapsed().as_secs_f64());
        }
    }
    mem.iter().sum::<u64>() as f64 / mem.len().max(1) as f64
}

/// `give-back-stop` / `give-back-steady`: pptune (the settle policy) grows
/// B for `w`; once it made no change for `--pptune-quiet-secs`, the load
/// stops or turns to one steady stream, and B is watched for 2 ×
/// calm_before_shrink + the evaluation + a control window.
async fn give_back_run(o: &Opts, p: &Ppsim, w: &Workload, then: Then) {
    let wire = build_wire(o, p, w, START_RING);
    let ifx = wire.b_ifindex();
    let c = client_in(RX_NS).await;
    let daemon = spawn_pptune(o, w, &o.settle_policy);
    let mut ctl = Ctl {
        ring: START_RING,
        ..Ctl::default()
    };
    let t0 = Instant::now();
    let tr = Traffic::start(o, w, &wire);
    let mut ledger = PoolLedger::default();
    ledger.refresh(&c).await;
    loop {
        let t = t0.elapsed().as_secs_f64();
        let quiet = ctl.changes > 0 && t >= ctl.last_change_s + o.pptune_quiet;
        if quiet || t >= o.max_run {
            break;
        }
        control_window(
            o,
            Tuner::Settle,
            &c,
            ifx,
            &wire,
            &mut ledger,
            &mut ctl,
            t0,
            u32::MAX,
        )
        .await;
    }
    let (grown_ring, grown_changes) = (ctl.ring, ctl.changes);
    let mem_grown = mem_over(&c, ifx, &mut ledger, &mut ctl, t0, o.ctl_window).await;
    let switch_s = t0.elapsed().as_secs_f64();
    let first = tr.stop();
    let steady = WORKLOADS
        .iter()
        .find(|w| w.name == "steady")
        .expect("steady");
    let after = match then {
        Then::Stop => None,
        Then::Steady | Then::Spill => Some(Traffic::start_on(o, steady, "5410", &wire)),
    };
    let watch = 2.0 * o.settle_calm + o.settle_eval + o.ctl_window as f64;
    let mut timeline = Vec::new();
    let mut mem_end = mem_grown;
    // `give-back-spill`: (when it started, after the switch; the spill
    // while it runs, then its summary).
    let mut spill: Option<(f64, Option<Traffic>)> = None;
    let mut spill_summary = None;
    while t0.elapsed().as_secs_f64() < switch_s + watch {
        let t = t0.elapsed().as_secs_f64() - switch_s;
        match &mut spill {
            None if then == Then::Spill && t >= o.settle_calm * o.spill_at => {
                spill = Some((t, Some(Traffic::start_on(o, &SPILL, "5420", &wire))));
            }
            // Its one drain is at 1 s, the end of its bytes at the next.
            Some((at, running)) if t >= *at + 3.0 => {
                spill_summary = running.take().map(Traffic::stop);
            }
            _ => {}
        }
        let start = ledger.clone();
        mem_end = mem_over(&c, ifx, &mut ledger, &mut ctl, t0, o.ctl_window).await;
        let d = ledger.since(&start);
        let t = t0.elapsed().as_secs_f64() - switch_s;
        timeline.push(json!([
            (t * 10.0).round() / 10.0,
            ctl.ring,
            recycle_miss_share(&d),
            mem_end
        ]));
    }
    let daemon_cpu = daemon.cpu_secs();
    drop(daemon);
    let second = after.map(Traffic::stop);
    drop(c);
    wire.teardown(HOME)
        .unwrap_or_else(|p| panic!("pools outlived the wire: {p:#?}"));
    let gave_back = ctl.changes > grown_changes;
    emit(
        json!({"kind": "give-back", "workload": w.name, "config": Tuner::GiveBack(then).name(),
               "start_ring": START_RING, "grown_ring": grown_ring, "grown_changes": grown_changes,
               "grown_mem": mem_grown, "switch_s": switch_s}),
        json!({"watch_s": t0.elapsed().as_secs_f64() - switch_s,
               "calm_before_shrink_s": o.settle_calm, "evaluation_s": o.settle_eval,
               "ring": ctl.ring, "mem": mem_end, "changes_in_watch": ctl.changes - grown_changes,
               "first_give_back_s": gave_back.then_some(ctl.first_after(switch_s)),
               "spill_s": spill.as_ref().map(|s| s.0),
               "spill_intact": spill_summary.map(|s| s["intact"].clone()),
               "ring_ratio": f64::from(ctl.ring) / f64::from(START_RING),
               "mem_ratio": mem_end / mem_grown.max(1.0), "daemon_cpu_s": daemon_cpu,
               "intact": first["intact"], "steady_intact": second.map(|s| s["intact"].clone()),
               "timeline": timeline}),
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut o = opts();
    if o.tuners
        .iter()
        .any(|t| matches!(t, Tuner::Settle | Tuner::GiveBack(_) | Tuner::RightSize))
    {
        settle_policy(&mut o);
    }
    let passes = o.rounds.max(o.repeats);
    if let Some(k) = o.passes.iter().flatten().find(|&&k| k >= passes) {
        panic!("--passes: pass {k} is past the run's {passes} (passes 0 to {passes} - 1)");
    }
    let mark = dmesg_mark();
    let p = Ppsim::load().expect("ppsim loads");
    println!(
        "{}",
        json!({"kind": "meta", "clock": std::env::var("PPTUNE_VM_CLOCK").ok(),
               "profile": std::env::var("PPTUNE_VM_PROFILE").ok(),
               "cpus": std::thread::available_parallelism().map_or(0, usize::from),
               "sweep": o.sweep, "rounds": o.rounds, "repeats": o.repeats, "warmup_secs": o.warmup, "age_secs": o.age, "queues": o.queues, "passes": o.passes,
               "window_secs": o.window, "ctl_window_secs": o.ctl_window, "quiet_secs": o.quiet,
               "pptune_quiet_secs": o.pptune_quiet, "max_run_secs": o.max_run,
               "policy": o.policy, "start_ring": START_RING, "settle_calm_secs": o.settle_calm,
               "policy_interval_s": policy_interval(&o.policy)})
    );
    for name in &o.workloads {
        let w = WORKLOADS
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("unknown workload {name}"));
        println!(
            "{}",
            json!({"kind": "workload", "workload": w.name, "args": w.args.concat()})
        );
        // Pass k: round k of the sweep (ascending in even rounds, descending
        // in odd ones), then repeat k of every tuner, their order rotated
        // by k, so neither a tuner nor a ring owns one end of the run.
        for pass in 0..passes {
            if o.passes.as_ref().is_some_and(|ps| !ps.contains(&pass)) {
                continue;
            }
            if pass < o.rounds {
                let mut sweep = o.sweep.clone();
                if pass % 2 == 1 {
                    sweep.reverse();
                }
                for ring in sweep {
                    static_point(&o, &p, w, ring, pass).await;
                }
            }
            // After the last round (in the first pass when there is no
            // sweep), before that pass's tuners.
            if pass == o.rounds.saturating_sub(1) && o.trace_provider && w.devmem {
                for &ring in &o.sweep {
                    provider_trace_point(&o, &p, w, ring).await;
                }
            }
            if pass >= o.repeats {
                continue;
            }
            let mut tuners = o.tuners.clone();
            let k = pass as usize % tuners.len().max(1);
            tuners.rotate_left(k);
            for t in tuners {
                match t {
                    Tuner::GiveBack(then) => give_back_run(&o, &p, w, then).await,
                    Tuner::Settle if !w.stationary => {}
                    _ => tuned_run(&o, &p, w, t, pass).await,
                }
            }
        }
    }
    let trouble = kernel_trouble_since(mark);
    println!("{}", json!({"kind": "kernel", "trouble": trouble}));
    assert!(trouble.is_empty(), "the kernel log reports trouble");
}
