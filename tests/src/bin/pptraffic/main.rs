//! `pptraffic`: TCP streams from one network namespace to another, over
//! whatever joins them (the ppsim wire in `tests/tests/vm_wire.rs`), with
//! the receivers' read pattern under control, so that the pages a real
//! stack holds and returns follow a known shape; beside them, optionally,
//! mice (small timed messages) and UDP flows.
//!
//! One process: the listener is created in `--rx-netns` (the main thread
//! enters it), each sender in `--tx-netns` (its thread enters it; a socket
//! keeps the namespace it was created in). Each sender writes a seeded
//! stream; with `--verify` each receiver checks every byte. Receivers read
//! `steady` (continuously), `drain` (nothing for `--pause-ms`, then
//! everything to EAGAIN; `--sync` aligns the pauses of all receivers, so
//! the sockets return their pages together, the analogue of ppsim's
//! bursts; `--pause-max-ms` draws each pause between the two, so the
//! bursts vary), `stall` (continuously, but every `--stall-every-ms`
//! nothing for `--pause-ms`, then everything to EAGAIN: a rare burst that
//! is out for less than a second among a stream's small returns) or
//! `slow` (blocking reads, but after a read that puts a
//! receiver's bytes since its first one ahead of `--read-rate` × the time
//! since, one sleep until they are not: the socket's queue stays full and
//! the pages it holds are not returned) or `splice` (the socket's bytes
//! spliced into a pipe and read out of it, a proxy's zero-copy path: the
//! pipe takes a reference on every page it is given, so when the stack
//! frees the skb its page_pool pages are still referenced and the pool
//! releases them to the page allocator, `recycle.released_refcnt`: a slow
//! path no ring fixes). Senders stop after
//! `--duration-ms` (or `--bytes` per stream); receivers read to EOF.
//!
//! Mice (`--mice N`): N more TCP connections to the same listener, told
//! apart by their header (flow id `0x8000_0000 | i`). Each writes one
//! `--mice-bytes` message (its send time in ns since the start, then
//! seeded bytes), sleeps `--mice-gap-ms`, and so on until the senders'
//! end; its receiver reads whole messages steadily, whatever `--pattern`,
//! and records each one's delay: receive time − send time, one clock (the
//! process's), in µs. The price of a frame waiting behind a stream, in an
//! RX ring or a socket. Their bytes are not in `received` or `queued`.
//!
//! UDP flows (`--udp N`): flow i sends `--udp-bytes` datagrams (header:
//! flow, sequence number, send time; then seeded bytes) to port `--port` +
//! 1 + i, paced to `--udp-rate` bytes per second in 997 µs ticks; its
//! receiver reads in `--pattern` (`drain`: to EAGAIN after each pause).
//! After the senders' end each sender sends 5 end markers 10 ms apart; a
//! receiver stops at the first, or 2 s after the end without a datagram.
//! Lost datagrams are those missing below the highest sequence number
//! received (late ones are not lost; those after the last received are
//! only in `sent − received`).
//!
//! With `--control` a driver steers the run over stdin: each `mark` line
//! makes the program print a `mark` line (`received`: bytes read so far
//! over all streams and UDP flows; `queued`: bytes the streams' receiving
//! sockets hold in order and unread, from `/proc/net/tcp`, the UDP
//! sockets' unread datagrams not in it; `elapsed_ms`: ms since the start;
//! with mice `delay_us`: `{n, p50, p99, max}` of the messages received
//! since the previous mark, nearest-rank percentiles, `null` when `n` is
//! 0), so a bench can take the kernel's counters at the same instant;
//! `stop` (or the end of stdin) makes the senders stop writing.
//!
//! Output: JSON lines on stdout. The first echoes every parameter (and the
//! receiving namespace's `tcp_rmem`/`tcp_wmem`); then one line per stream
//! (`flow`: bytes sent and received, verification); with mice one `mice`
//! line (`flows`, messages `sent` and `received`, message `bytes`,
//! `broken`: mice that did not receive every message they sent, intact,
//! `intact`, `delay_us` over the run); one `udp_flow` line per UDP flow
//! (`flow`, datagrams `sent` and `received`, their `bytes`, `lost`,
//! `corrupted`: wrong size, flow or, with `--verify`, bytes); then a
//! summary (the streams' `sent` and `received`; with mice `mice_sent`,
//! `mice_received`, `delay_us`; with UDP `udp_sent`, `udp_received`,
//! `udp_lost`) with the receiving namespace's `/proc/net/snmp` and
//! `/proc/net/netstat` deltas (non-zero ones). Exit status 1 when a stream
//! lost or corrupted a byte (with `--devmem`: or had a byte that missed
//! the provider, or a token it did not return), a mouse a message, or a
//! UDP flow received a corrupted datagram (lost datagrams are UDP's right).
//!
//! Devmem (`--devmem IFNAME`): the streams are received through devmem
//! TCP, the dma-buf memory provider bound to RX queue `--devmem-queue`,
//! tokens returned in batches of `--devmem-batch` (`devmem.rs`); each
//! `flow` line then has a `devmem` object (bytes from the dma-buf, tokens
//! received and returned, bytes that did not come through the provider)
//! and the summary the binding's `dmabuf_id`. Not with mice or `splice`.
// Unsafe code only in devmem.rs (two uapi calls std and nix do not have).
// A plain program: std's monotonic clock (the disallowed type is meant for
// the daemon, whose tests pause tokio's clock).
#![allow(clippy::disallowed_types)]

mod delay;
mod devmem;
mod mice;
mod pace;
mod tcp;
mod udp;

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::fs::File;
use std::io::BufRead;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use nix::sched::{CloneFlags, setns};
use nix::sys::socket::{setsockopt, sockopt};
use serde::Serialize;
use serde_json::json;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// The stream's period: a prime, so no segment, GSO or read size lines up
/// with it and a misplaced chunk is caught.
const PERIOD: usize = 65_521;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Pattern {
    /// Read continuously.
    Steady,
    /// Pause, then read to EAGAIN; repeat.
    Drain,
    /// Read continuously (with `--read-rate`, no faster than it), but
    /// every `--stall-every-ms` pause for `--pause-ms`, then read to
    /// EAGAIN.
    Stall,
    /// Read continuously, but never more than `--read-rate` bytes per
    /// second since the first byte: the socket's queue stays full.
    Slow,
    /// Splice the socket's bytes into a pipe and read them out of it (a
    /// proxy's zero-copy path): the pipe holds a reference on each page,
    /// so the pool cannot take its pages back (TCP only).
    Splice,
}

#[derive(Debug, Clone, Parser, Serialize)]
#[command(
    name = "pptraffic",
    about = "TCP streams, mice and UDP flows between two netns, seeded and checked"
)]
struct Args {
    /// Namespace of the senders (`ip netns` name, /run/netns/NAME).
    #[arg(long, default_value = "pp-tx")]
    tx_netns: String,
    /// Namespace of the listener and receivers.
    #[arg(long, default_value = "pp-rx")]
    rx_netns: String,
    /// Address the listener binds and the senders connect to.
    #[arg(long, default_value = "10.77.0.2")]
    addr: Ipv4Addr,
    #[arg(long, default_value_t = 5201)]
    port: u16,
    /// TCP streams.
    #[arg(long, default_value_t = 1)]
    tcp: u32,
    #[arg(long, value_enum, default_value = "steady")]
    pattern: Pattern,
    /// `drain`, `stall`: how long a receiver does not read.
    #[arg(long, default_value_t = 100)]
    pause_ms: u64,
    /// `stall`: how often a receiver that reads continuously stops for
    /// `--pause-ms`.
    #[arg(long, default_value_t = 0)]
    stall_every_ms: u64,
    /// `drain`: every receiver drains at the same multiples of
    /// `--pause-ms` since the start.
    #[arg(long)]
    sync: bool,
    /// `drain`: each pause drawn between `--pause-ms` and this, uniform in
    /// its logarithm (bursts that vary widely), seeded by `--seed` and the
    /// flow; 0: every pause is `--pause-ms`.
    #[arg(long, default_value_t = 0)]
    pause_max_ms: u64,
    /// Check every received byte (streams, mice, datagrams) against the
    /// seeded stream.
    #[arg(long)]
    verify: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Senders stop writing after this long.
    #[arg(long, default_value_t = 2000)]
    duration_ms: u64,
    /// Stream senders stop after this many bytes per flow (0 = no limit).
    #[arg(long, default_value_t = 0)]
    bytes: u64,
    /// Bytes per write (at most 65521).
    #[arg(long, default_value_t = 65_521)]
    msg_bytes: usize,
    /// Bytes per read of a stream's receiver.
    #[arg(long, default_value_t = 65_536)]
    read_bytes: usize,
    /// SO_RCVBUF of the listener (inherited by the receivers, the mice's
    /// too) and of the UDP receivers; 0 = autotuning (UDP: rmem_default).
    #[arg(long, default_value_t = 0)]
    rcvbuf: usize,
    /// SO_SNDBUF of the stream senders; 0 = autotuning.
    #[arg(long, default_value_t = 0)]
    sndbuf: usize,
    /// Read `mark` / `stop` commands from stdin (see the module docs).
    #[arg(long)]
    control: bool,
    /// `slow`: bytes per second each receiver reads at most, counted from
    /// its first byte (required, > 0, with `--pattern slow`); `stall`:
    /// between stalls, counted from the end of the last stall's drain.
    #[arg(long, default_value_t = 0)]
    read_rate: u64,
    /// Mice: TCP connections of their own to the same listener, beside
    /// the `--tcp` streams, each writing one `--mice-bytes` message every
    /// `--mice-gap-ms`; their receivers read steadily whatever the
    /// pattern, and measure each message's delay.
    #[arg(long, default_value_t = 0)]
    mice: u32,
    /// Bytes of a mouse message: its send time (8), then seeded bytes;
    /// 16 to 65521.
    #[arg(long, default_value_t = 2048)]
    mice_bytes: usize,
    /// Sleep of a mouse after each message.
    #[arg(long, default_value_t = 10)]
    mice_gap_ms: u64,
    /// UDP flows: flow i from a socket in the tx namespace to one of its
    /// own on `--addr`, port `--port` + 1 + i, read in `--pattern`.
    #[arg(long, default_value_t = 0)]
    udp: u32,
    /// Bytes of a datagram's UDP payload: a 20-byte header (flow, sequence
    /// number, send time), then seeded bytes; 32 to 1472 (one frame).
    #[arg(long, default_value_t = 1400)]
    udp_bytes: usize,
    /// Bytes per second of each UDP flow's sender (required, > 0, with
    /// `--udp`).
    #[arg(long, default_value_t = 0)]
    udp_rate: u64,
    /// UDP senders: send only in on phases, `ON,OFF` milliseconds
    /// alternating from the start, on first (a load whose returns stop
    /// for a while and come back); `--udp-rate` holds within an on phase.
    #[arg(long, value_name = "ON,OFF", value_parser = pace::parse_phases)]
    on_off_ms: Option<(u64, u64)>,
    /// Receive the streams through devmem TCP: a udmabuf bound to RX queue
    /// `--devmem-queue` of this interface (in the rx namespace) with the
    /// netdev family's bind-rx.
    #[arg(long)]
    devmem: Option<String>,
    #[arg(long, default_value_t = 0)]
    devmem_queue: u32,
    /// Tokens per SO_DEVMEM_DONTNEED call: 1 to 128 (the kernel's limit);
    /// 128 is NCCL's.
    #[arg(long, default_value_t = 128)]
    devmem_batch: usize,
    /// `--pattern drain`: keep a drain's tokens until N more drains have
    /// ended, then return them all, call after call (as NCCL returns a
    /// consumed chunk's, with N later chunks in flight); 0: at its end.
    #[arg(long, value_name = "N")]
    devmem_hold: Option<usize>,
    /// Size of the dma-buf, MiB.
    #[arg(long, default_value_t = 64)]
    devmem_mb: u64,
}

/// The combinations of parameters the program refuses, with why.
fn validate(args: &Args) -> Res<()> {
    if args.pattern == Pattern::Slow && args.read_rate == 0 {
        return Err("--pattern slow needs --read-rate BYTES_PER_SEC > 0".into());
    }
    if args.read_rate > 0 && !matches!(args.pattern, Pattern::Slow | Pattern::Stall) {
        return Err("--read-rate: only with --pattern slow or stall".into());
    }
    if (args.pattern == Pattern::Stall) != (args.stall_every_ms > 0) {
        return Err("--stall-every-ms: with --pattern stall, and it needs it".into());
    }
    if args.pattern == Pattern::Stall && args.stall_every_ms <= args.pause_ms {
        return Err("--stall-every-ms must be above --pause-ms".into());
    }
    if args.pause_max_ms > 0 {
        if args.pattern != Pattern::Drain || args.sync {
            return Err("--pause-max-ms: only with --pattern drain, without --sync".into());
        }
        if args.pause_max_ms <= args.pause_ms || args.pause_ms == 0 {
            return Err("--pause-max-ms must be above --pause-ms (> 0)".into());
        }
    }
    if args.udp > 0 {
        let tcp_only = match args.pattern {
            Pattern::Splice => Some("splice"),
            Pattern::Stall => Some("stall"),
            _ => None,
        };
        if let Some(p) = tcp_only {
            return Err(format!("--pattern {p} is for TCP streams: not with --udp").into());
        }
    }
    if !(16..=PERIOD).contains(&args.mice_bytes) {
        return Err(format!("--mice-bytes must be 16 to {PERIOD}").into());
    }
    if args.mice >= mice::MOUSE {
        return Err("--mice: too many".into());
    }
    if !(32..=1472).contains(&args.udp_bytes) {
        return Err("--udp-bytes must be 32 to 1472".into());
    }
    if args.udp > 0 && args.udp_rate == 0 {
        return Err("--udp needs --udp-rate BYTES_PER_SEC > 0".into());
    }
    if args.on_off_ms.is_some() && args.udp == 0 {
        return Err("--on-off-ms paces the UDP senders: it needs --udp".into());
    }
    if args.devmem.is_some() {
        if args.pattern == Pattern::Splice {
            return Err(
                "--devmem: not with --pattern splice (a dma-buf's pages cannot be spliced)".into(),
            );
        }
        if args.mice > 0 {
            return Err("--devmem: not with --mice (they share the streams' port)".into());
        }
        if !(1..=devmem::MAX_BATCH).contains(&args.devmem_batch) {
            return Err(format!("--devmem-batch must be 1 to {}", devmem::MAX_BATCH).into());
        }
        if args.devmem_mb == 0 {
            return Err("--devmem-mb must be > 0".into());
        }
        if args.devmem_hold.is_some() && args.pattern != Pattern::Drain {
            return Err(
                "--devmem-hold: only with --pattern drain (it returns at a drain's end)".into(),
            );
        }
    }
    if u32::from(args.port) + args.udp > u32::from(u16::MAX) {
        return Err("--port + --udp must be at most 65535".into());
    }
    Ok(())
}

/// What the flows share with the control thread: bytes received so far
/// over all streams, whether the senders must stop, the mice's delays.
#[derive(Debug, Default)]
struct Live {
    received: AtomicU64,
    stop: AtomicBool,
    /// `--mice` > 0: the delays of the mice messages.
    delays: Option<Mutex<delay::Delays>>,
    /// The mice connections' remote ports, left out of `queued`.
    mice_ports: Mutex<BTreeSet<u16>>,
}

/// Bytes the established sockets on local `port` of this thread's netns
/// hold in order and unread: `rx_queue` of `/proc/net/tcp` (`rcv_nxt −
/// copied_seq`; the listener's field is its accept backlog, left out),
/// except those whose remote port is in `skip` (the mice).
/// Read + queued is what TCP delivered, whatever the readers' phase.
fn queued(port: u16, skip: &BTreeSet<u16>) -> u64 {
    std::fs::read_to_string("/proc/thread-self/net/tcp").map_or(0, |t| queued_in(&t, port, skip))
}

/// [`queued`] over the text of a `/proc/net/tcp`.
fn queued_in(text: &str, port: u16, skip: &BTreeSet<u16>) -> u64 {
    let want = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, remote) = (f.get(1)?, f.get(2)?);
            let (state, queues) = (f.get(3)?, f.get(4)?);
            (local.ends_with(&want) && *state != "0A").then_some(())?;
            let from = u16::from_str_radix(remote.split_once(':')?.1, 16).ok()?;
            (!skip.contains(&from)).then_some(())?;
            u64::from_str_radix(queues.split_once(':')?.1, 16).ok()
        })
        .sum()
}

/// `lock`, whether or not another thread panicked holding it (the data
/// are counters, valid at any point).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// ns since `t0`: the clock of the mice's and the datagrams' send times
/// (one process, one `Instant` for every thread).
fn ns_since(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Live {
    fn new(args: &Args) -> Self {
        Self {
            delays: (args.mice > 0).then(Mutex::default),
            ..Self::default()
        }
    }

    /// Records a mouse message's delay.
    fn delay(&self, us: u64) {
        if let Some(d) = &self.delays {
            lock(d).record(us);
        }
    }

    /// The delays since the previous mark (`None` without mice).
    fn delay_window(&self) -> Option<delay::Stats> {
        self.delays.as_ref().map(|d| lock(d).take_window())
    }

    /// The delays over the run (`None` without mice).
    fn delay_all(&self) -> Option<delay::Stats> {
        self.delays.as_ref().map(|d| lock(d).all())
    }

    /// Leaves the connection from remote `port` (a mouse) out of `queued`.
    fn mouse_port(&self, port: u16) {
        lock(&self.mice_ports).insert(port);
    }

    /// `--control`: answer `mark` lines on stdin with a `mark` line on
    /// stdout; `stop` or the end of stdin stops the senders.
    fn serve(&self, t0: Instant, port: u16) {
        let mut n = 0u64;
        for line in std::io::stdin().lock().lines() {
            match line.as_deref().map(str::trim) {
                Ok("mark") => {
                    n += 1;
                    // The count first: a read between the two is then in
                    // neither, never in both.
                    let received = self.received.load(Ordering::Relaxed);
                    let skip = lock(&self.mice_ports).clone();
                    let mut v = json!({
                        "type": "mark",
                        "n": n,
                        "received": received,
                        "queued": queued(port, &skip),
                        "elapsed_ms": t0.elapsed().as_millis(),
                    });
                    if let (Some(d), Some(o)) = (self.delay_window(), v.as_object_mut()) {
                        o.insert("delay_us".into(), json!(d));
                    }
                    println!("{v}");
                }
                Ok("stop") | Err(_) => break,
                Ok(_) => {}
            }
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The seeded stream of one flow, twice over so any window of up to
/// `PERIOD` bytes is one slice.
fn stream_of(seed: u64, flow: u32) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed ^ (u64::from(flow) << 32) ^ 0x7070_7475_6e65);
    let block: Vec<u8> = (0..PERIOD).map(|_| rng.u8(..)).collect();
    let mut twice = block.clone();
    twice.extend_from_slice(&block);
    twice
}

fn enter_netns(name: &str) -> Res<()> {
    let path = format!("/run/netns/{name}");
    let f = File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
    setns(&f, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns {path}: {e}"))?;
    Ok(())
}

/// `/proc/net/snmp` and `/proc/net/netstat` of the calling thread's
/// namespace, as `Group.Name` → value.
fn read_snmp() -> Res<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for file in ["snmp", "netstat"] {
        let text = std::fs::read_to_string(format!("/proc/thread-self/net/{file}"))?;
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.chunks(2) {
            let [names, values] = pair else { continue };
            let (group, names) = names.split_once(':').ok_or("snmp: no group")?;
            let (_, values) = values.split_once(':').ok_or("snmp: no group")?;
            for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
                if let Ok(v) = v.parse::<i64>() {
                    out.insert(format!("{group}.{n}"), v);
                }
            }
        }
    }
    Ok(out)
}

fn sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn params_line(args: &Args) -> Res<String> {
    let mut v = serde_json::to_value(args)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("type".into(), json!("params"));
        o.insert("rx_tcp_rmem".into(), json!(sysctl("tcp_rmem")));
        o.insert("rx_tcp_wmem".into(), json!(sysctl("tcp_wmem")));
        o.insert("rx_tcp_mem".into(), json!(sysctl("tcp_mem")));
    }
    Ok(v.to_string())
}

/// One thread per flow `0..n`, each running `f(args, flow, live)` with
/// its own handles on the shared parameters and counters.
fn spawn_each<T: Send + 'static>(
    n: u32,
    args: &Arc<Args>,
    live: &Arc<Live>,
    f: impl Fn(&Args, u32, &Live) -> T + Copy + Send + 'static,
) -> Vec<thread::JoinHandle<T>> {
    (0..n)
        .map(|flow| {
            let a = Arc::clone(args);
            let live = Arc::clone(live);
            thread::spawn(move || f(&a, flow, &live))
        })
        .collect()
}

fn run(args: Args) -> Res<bool> {
    validate(&args)?;
    let args = Arc::new(args);
    enter_netns(&args.rx_netns)?;
    println!("{}", params_line(&args)?);
    let binding = match &args.devmem {
        Some(ifname) => Some(devmem::Binding::bind(
            ifname,
            args.devmem_queue,
            args.devmem_mb,
        )?),
        None => None,
    };
    let l = TcpListener::bind(SocketAddrV4::new(args.addr, args.port))?;
    if args.rcvbuf > 0 {
        setsockopt(&l, sockopt::RcvBuf, &args.rcvbuf)?;
    }
    let udp_socks = udp::bind(&args)?;
    let snmp0 = read_snmp()?;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_millis(args.duration_ms);
    let live = Arc::new(Live::new(&args));
    if args.control {
        // Not joined: it blocks on stdin until the driver stops the run.
        let live = Arc::clone(&live);
        let port = args.port;
        thread::spawn(move || live.serve(t0, port));
    }
    let tx = spawn_each(args.tcp, &args, &live, move |a, flow, live| {
        tcp::send(a, flow, deadline, live)
    });
    let mice_tx = spawn_each(args.mice, &args, &live, move |a, i, live| {
        mice::send(a, i, t0, deadline, live)
    });
    let udp_rx: Vec<_> = (0..args.udp)
        .zip(udp_socks)
        .map(|(flow, s)| {
            let a = Arc::clone(&args);
            let live = Arc::clone(&live);
            // The socket comes back open: markers that arrive after the
            // first must not draw port unreachables into the snmp deltas.
            thread::spawn(move || udp::receive(&a, &s, flow, t0, deadline, &live).map(|r| (r, s)))
        })
        .collect();
    let udp_tx = spawn_each(args.udp, &args, &live, move |a, flow, live| {
        udp::send(a, flow, t0, deadline, live)
    });
    let memfd = binding.as_ref().map(|b| Arc::clone(&b.memfd));
    let rx = tcp::start_receivers(&args, &l, t0, &live, memfd.as_ref())?;
    let mut sent = BTreeMap::new();
    for h in tx {
        let s = h.join().map_err(|_| "a sender panicked")??;
        sent.insert(s.flow, s.bytes);
    }
    let mut mice_sent = BTreeMap::new();
    for h in mice_tx {
        let (id, n) = h.join().map_err(|_| "a mouse panicked")??;
        mice_sent.insert(id, n);
    }
    let mut udp_sent = BTreeMap::new();
    for h in udp_tx {
        let (flow, n) = h.join().map_err(|_| "a UDP sender panicked")??;
        udp_sent.insert(flow, n);
    }
    let mut ok = true;
    let (mut total_sent, mut total_rx) = (0u64, 0u64);
    let mut mice_rx = Vec::new();
    for h in rx {
        let r = match h.join().map_err(|_| "a receiver panicked")?? {
            tcp::Rx::Flow(r) => r,
            tcp::Rx::Mouse(m) => {
                mice_rx.push(m);
                continue;
            }
        };
        let s = sent.get(&r.flow).copied().unwrap_or(0);
        let intact = r.bytes == s && r.mismatch_at.is_none();
        ok &= intact;
        // Devmem: every byte past the flow header through the provider
        // (none readable), every token returned.
        if let Some(d) = &r.devmem {
            ok &= d.readable_bytes == 0 && d.dmabuf_bytes > 0 && d.tokens_returned == d.frags;
        }
        total_sent += s;
        total_rx += r.bytes;
        let mut v = serde_json::to_value(&r)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), json!("flow"));
            o.insert("sent".into(), json!(s));
            o.insert("intact".into(), json!(intact));
        }
        println!("{v}");
    }
    let mut extra = serde_json::Map::new();
    if let Some(all) = live.delay_all() {
        let t = mice::tally(&mice_rx, &mice_sent);
        ok &= t.broken == 0;
        println!("{}", mice::line(&args, &t, json!(all)));
        extra.insert("mice_sent".into(), json!(t.sent));
        extra.insert("mice_received".into(), json!(t.received));
        extra.insert("delay_us".into(), json!(all));
    }
    let (mut sent_n, mut rx_n, mut lost_n) = (0u64, 0u64, 0u64);
    let mut udp_open = Vec::new();
    for h in udp_rx {
        let (r, sock) = h.join().map_err(|_| "a UDP receiver panicked")??;
        udp_open.push(sock);
        let s = udp_sent.get(&r.flow).copied().unwrap_or(0);
        ok &= r.corrupted == 0;
        (sent_n, rx_n, lost_n) = (sent_n + s, rx_n + r.received, lost_n + r.lost());
        let mut v = serde_json::to_value(&r)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), json!("udp_flow"));
            o.insert("sent".into(), json!(s));
            o.insert("lost".into(), json!(r.lost()));
        }
        println!("{v}");
    }
    if let Some(b) = &binding {
        extra.insert("dmabuf_id".into(), json!(b.id));
    }
    if args.udp > 0 {
        extra.insert("udp_sent".into(), json!(sent_n));
        extra.insert("udp_received".into(), json!(rx_n));
        extra.insert("udp_lost".into(), json!(lost_n));
    }
    let elapsed = t0.elapsed();
    let snmp1 = read_snmp()?;
    drop(udp_open);
    let deltas: BTreeMap<&String, i64> = snmp1
        .iter()
        .map(|(k, v)| (k, v - snmp0.get(k).copied().unwrap_or(0)))
        .filter(|(_, d)| *d != 0)
        .collect();
    let mut summary = json!({
        "type": "summary",
        "elapsed_ms": elapsed.as_millis(),
        "flows": args.tcp,
        "sent": total_sent,
        "received": total_rx,
        "intact": ok,
        "snmp": deltas,
    });
    if let Some(o) = summary.as_object_mut() {
        o.extend(extra);
    }
    println!("{summary}");
    // The receivers are done: the dma-buf is unbound (its socket closes).
    drop(binding);
    Ok(ok)
}

fn main() -> std::process::ExitCode {
    match run(Args::parse()) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            println!("{}", json!({"type": "error", "error": e.to_string()}));
            eprintln!("pptraffic: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Args, Pattern, queued_in, validate};
    use clap::Parser;
    use std::collections::BTreeSet;

    fn args(line: &[&str]) -> Args {
        Args::parse_from(std::iter::once("pptraffic").chain(line.iter().copied()))
    }

    #[test]
    fn queued_sums_the_unread_bytes_of_the_ports_connections_only() {
        // Kernel 7.3's format: the listener (0A) on 5400 with a backlog of
        // 2, two established flows on 5400, one on another port.
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 02004D0A:1518 00000000:0000 0A 00000000:00000002 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 02004D0A:1518 01004D0A:9C40 01 00000000:00010000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
   2: 02004D0A:1518 01004D0A:9C42 08 00000000:00000100 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1
   3: 02004D0A:1519 01004D0A:9C44 01 00000000:00000400 00:00000000 00000000     0        0 4 1 0 20 4 30 10 -1
";
        let none = BTreeSet::new();
        assert_eq!(queued_in(text, 5400, &none), 0x1_0000 + 0x100);
        assert_eq!(queued_in(text, 5401, &none), 0x400);
        assert_eq!(queued_in(text, 5402, &none), 0);
        // A mouse's connection (remote port 0x9C42) is left out.
        let mouse = BTreeSet::from([0x9C42]);
        assert_eq!(queued_in(text, 5400, &mouse), 0x1_0000);
    }

    #[test]
    fn slow_needs_a_read_rate() {
        let slow = args(&["--pattern", "slow"]);
        assert_eq!(slow.pattern, Pattern::Slow);
        let e = validate(&slow).unwrap_err().to_string();
        assert!(e.contains("--read-rate"), "{e}");
        validate(&args(&["--pattern", "slow", "--read-rate", "2000000"])).unwrap();
        validate(&args(&[])).unwrap();
    }

    #[test]
    fn devmem_refuses_what_it_cannot_receive() {
        validate(&args(&["--devmem", "ppsim1"])).unwrap();
        validate(&args(&[
            "--devmem",
            "ppsim1",
            "--pattern",
            "drain",
            "--devmem-batch",
            "1",
            "--devmem-hold",
            "4",
        ]))
        .unwrap();
        for (bad, why) in [
            (&["--devmem-hold", "0"][..], "--devmem-hold"),
            (&["--pattern", "splice"][..], "splice"),
            (&["--mice", "1"][..], "--mice"),
            (&["--devmem-batch", "129"][..], "--devmem-batch"),
            (&["--devmem-batch", "0"][..], "--devmem-batch"),
            (&["--devmem-mb", "0"][..], "--devmem-mb"),
        ] {
            let mut a = vec!["--devmem", "ppsim1"];
            a.extend_from_slice(bad);
            let e = validate(&args(&a)).unwrap_err().to_string();
            assert!(e.contains(why), "{a:?}: {e}");
        }
    }

    #[test]
    fn splice_is_for_tcp_streams() {
        let splice = args(&["--pattern", "splice"]);
        assert_eq!(splice.pattern, Pattern::Splice);
        validate(&splice).unwrap();
        let udp = args(&["--pattern", "splice", "--udp", "1", "--udp-rate", "1000"]);
        let e = validate(&udp).unwrap_err().to_string();
        assert!(e.contains("not with --udp"), "{e}");
    }

    #[test]
    fn a_stall_needs_its_period_and_a_tcp_stream() {
        let ok = [
            "--pattern",
            "stall",
            "--stall-every-ms",
            "5000",
            "--pause-ms",
            "300",
        ];
        assert_eq!(args(&ok).pattern, Pattern::Stall);
        validate(&args(&ok)).unwrap();
        for bad in [
            &["--pattern", "stall"][..],
            &[
                "--pattern",
                "stall",
                "--stall-every-ms",
                "300",
                "--pause-ms",
                "300",
            ][..],
            &["--stall-every-ms", "5000"][..],
        ] {
            let e = validate(&args(bad)).unwrap_err().to_string();
            assert!(e.contains("--stall-every-ms"), "{bad:?}: {e}");
        }
        let mut udp = ok.to_vec();
        udp.extend(["--udp", "1", "--udp-rate", "1000"]);
        let e = validate(&args(&udp)).unwrap_err().to_string();
        assert!(e.contains("stall is for TCP streams"), "{e}");
        // Read slowly between stalls; a rate means nothing to a drain.
        let mut slow = ok.to_vec();
        slow.extend(["--read-rate", "5000000"]);
        validate(&args(&slow)).unwrap();
        let e = validate(&args(&["--pattern", "drain", "--read-rate", "5000000"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--read-rate"), "{e}");
    }

    #[test]
    fn mice_messages_hold_a_send_time_and_seeded_bytes() {
        validate(&args(&["--mice", "4", "--mice-bytes", "16"])).unwrap();
        validate(&args(&["--mice", "4", "--mice-bytes", "65521"])).unwrap();
        for bad in ["15", "65522"] {
            let e = validate(&args(&["--mice", "4", "--mice-bytes", bad])).unwrap_err();
            assert!(e.to_string().contains("--mice-bytes"), "{bad}: {e}");
        }
    }

    #[test]
    fn udp_needs_a_rate_a_frames_size_and_its_ports() {
        let e = validate(&args(&["--udp", "2"])).unwrap_err().to_string();
        assert!(e.contains("--udp-rate"), "{e}");
        validate(&args(&["--udp", "2", "--udp-rate", "5000000"])).unwrap();
        validate(&args(&["--tcp", "0", "--udp", "1", "--udp-rate", "1"])).unwrap();
        for (size, ok) in [("31", false), ("32", true), ("1472", true), ("1473", false)] {
            let a = args(&["--udp", "1", "--udp-rate", "9", "--udp-bytes", size]);
            assert_eq!(validate(&a).is_ok(), ok, "{size}");
        }
        let near_the_top = ["--udp", "2", "--udp-rate", "9", "--port", "65533"];
        validate(&args(&near_the_top)).unwrap();
        let over = ["--udp", "3", "--udp-rate", "9", "--port", "65533"];
        assert!(validate(&args(&over)).is_err());
    }
}
