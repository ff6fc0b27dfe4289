//! `pptraffic`: TCP streams from one network namespace to another, over
//! whatever joins them (the ppsim wire in `tests/tests/vm_wire.rs`), with
//! the receivers' read pattern under control, so that the pages a real
//! stack holds and returns follow a known shape.
//!
//! One process: the listener is created in `--rx-netns` (the main thread
//! enters it), each sender in `--tx-netns` (its thread enters it; a socket
//! keeps the namespace it was created in). Each sender writes a seeded
//! stream; with `--verify` each receiver checks every byte. Receivers read
//! `steady` (continuously) or `drain` (nothing for `--pause-ms`, then
//! everything to EAGAIN; `--sync` aligns the pauses of all receivers, so
//! the sockets return their pages together, the analogue of ppsim's
//! bursts). Senders stop after `--duration-ms` (or `--bytes` per flow);
//! receivers read to EOF. With `--control` a driver steers the run over
//! stdin: each `mark` line makes the program print a `mark` line (bytes
//! read so far over all flows; bytes the receiving sockets hold in order
//! and unread, from `/proc/net/tcp`; ms since the start), so a bench can
//! take the kernel's counters at the same instant; `stop` (or the end of
//! stdin) makes the senders stop writing.
//!
//! Output: JSON lines on stdout. The first echoes every parameter (and the
//! receiving namespace's `tcp_rmem`/`tcp_wmem`); then one line per flow
//! (bytes sent and received, verification); then a summary with the
//! receiving namespace's `/proc/net/snmp` and `/proc/net/netstat` deltas
//! (non-zero ones). Exit status 1 when a flow lost or corrupted a byte.
#![forbid(unsafe_code)]
// A plain program: std's monotonic clock (the disallowed type is meant for
// the daemon, whose tests pause tokio's clock).
#![allow(clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::error::Error;
use std::fs::File;
use std::io::{BufRead, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
}

#[derive(Debug, Clone, Parser, Serialize)]
#[command(
    name = "pptraffic",
    about = "TCP streams between two netns, seeded and checked"
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
    /// `drain`: how long a receiver does not read.
    #[arg(long, default_value_t = 100)]
    pause_ms: u64,
    /// `drain`: every receiver drains at the same multiples of
    /// `--pause-ms` since the start.
    #[arg(long)]
    sync: bool,
    /// Check every received byte against the seeded stream.
    #[arg(long)]
    verify: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Senders stop writing after this long.
    #[arg(long, default_value_t = 2000)]
    duration_ms: u64,
    /// Senders stop after this many bytes per flow (0 = no limit).
    #[arg(long, default_value_t = 0)]
    bytes: u64,
    /// Bytes per write (at most 65521).
    #[arg(long, default_value_t = 65_521)]
    msg_bytes: usize,
    /// Bytes per read.
    #[arg(long, default_value_t = 65_536)]
    read_bytes: usize,
    /// SO_RCVBUF of the listener (inherited by the receivers); 0 = autotuning.
    #[arg(long, default_value_t = 0)]
    rcvbuf: usize,
    /// SO_SNDBUF of the senders; 0 = autotuning.
    #[arg(long, default_value_t = 0)]
    sndbuf: usize,
    /// Read `mark` / `stop` commands from stdin (see the module docs).
    #[arg(long)]
    control: bool,
}

/// What the flows share with the control thread: bytes received so far
/// over all flows, and whether the senders must stop.
#[derive(Debug, Default)]
struct Live {
    received: AtomicU64,
    stop: AtomicBool,
}

/// Bytes the established sockets on local `port` of this thread's netns
/// hold in order and unread: `rx_queue` of `/proc/net/tcp` (`rcv_nxt −
/// copied_seq`; the listener's field is its accept backlog, left out).
/// Read + queued is what TCP delivered, whatever the readers' phase.
fn queued(port: u16) -> u64 {
    std::fs::read_to_string("/proc/thread-self/net/tcp").map_or(0, |t| queued_in(&t, port))
}

/// [`queued`] over the text of a `/proc/net/tcp`.
fn queued_in(text: &str, port: u16) -> u64 {
    let want = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, state, queues) = (f.get(1)?, f.get(3)?, f.get(4)?);
            (local.ends_with(&want) && *state != "0A").then_some(())?;
            u64::from_str_radix(queues.split_once(':')?.1, 16).ok()
        })
        .sum()
}

impl Live {
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
                    println!(
                        "{}",
                        json!({
                            "type": "mark",
                            "n": n,
                            "received": received,
                            "queued": queued(port),
                            "elapsed_ms": t0.elapsed().as_millis(),
                        })
                    );
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

#[derive(Debug, Default)]
struct Sent {
    flow: u32,
    bytes: u64,
}

/// One sender: enter the tx namespace, connect, announce the flow id,
/// write the stream until the deadline or the byte limit.
fn send(args: &Args, flow: u32, deadline: Instant, live: &Live) -> Res<Sent> {
    enter_netns(&args.tx_netns)?;
    let mut s = TcpStream::connect(SocketAddrV4::new(args.addr, args.port))?;
    if args.sndbuf > 0 {
        setsockopt(&s, sockopt::SndBuf, &args.sndbuf)?;
    }
    s.write_all(&flow.to_le_bytes())?;
    let data = stream_of(args.seed, flow);
    let msg = args.msg_bytes.clamp(1, PERIOD);
    let mut sent = 0u64;
    while Instant::now() < deadline
        && !live.stop.load(Ordering::Relaxed)
        && (args.bytes == 0 || sent < args.bytes)
    {
        let off = usize::try_from(sent % PERIOD as u64)?;
        let mut len = msg;
        if args.bytes > 0 {
            len = len.min(usize::try_from(args.bytes - sent).unwrap_or(usize::MAX));
        }
        s.write_all(&data[off..off + len])?;
        sent += len as u64;
    }
    s.shutdown(Shutdown::Write)?;
    Ok(Sent { flow, bytes: sent })
}

#[derive(Debug, Default, Serialize)]
struct Received {
    flow: u32,
    bytes: u64,
    reads: u64,
    /// `drain`: read phases, and the most bytes one of them read.
    drains: u64,
    max_drain_bytes: u64,
    /// `--verify`: the stream offset of the first wrong byte.
    mismatch_at: Option<u64>,
}

impl Received {
    /// Count `buf` (the next bytes of the flow) and check it.
    fn take(&mut self, buf: &[u8], data: Option<&[u8]>) -> Res<()> {
        if let (Some(data), None) = (data, self.mismatch_at) {
            let mut done = 0;
            while done < buf.len() {
                let off = usize::try_from((self.bytes + done as u64) % PERIOD as u64)?;
                let k = (buf.len() - done).min(PERIOD);
                if buf[done..done + k] != data[off..off + k] {
                    let bad = (0..k)
                        .find(|&i| buf[done + i] != data[off + i])
                        .unwrap_or(0);
                    self.mismatch_at = Some(self.bytes + (done + bad) as u64);
                    break;
                }
                done += k;
            }
        }
        self.bytes += buf.len() as u64;
        self.reads += 1;
        Ok(())
    }
}

/// Read until EAGAIN (`Ok(false)`) or EOF (`Ok(true)`).
/// Each read is counted in `live` at once: a drain can last seconds when
/// the sender keeps up, and a `mark` must not see its bytes all at its end.
fn drain_once(
    s: &mut TcpStream,
    buf: &mut [u8],
    r: &mut Received,
    data: Option<&[u8]>,
    live: &Live,
) -> Res<bool> {
    let before = r.bytes;
    let eof = loop {
        match s.read(buf) {
            Ok(0) => break true,
            Ok(n) => {
                r.take(&buf[..n], data)?;
                live.received.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    };
    r.drains += 1;
    r.max_drain_bytes = r.max_drain_bytes.max(r.bytes - before);
    Ok(eof)
}

/// The time until the next multiple of `pause` since `t0` (`--sync`).
fn until_epoch(t0: Instant, pause: Duration) -> Duration {
    let p = pause.as_nanos().max(1);
    let since = t0.elapsed().as_nanos();
    let next = (since / p + 1) * p;
    Duration::from_nanos(u64::try_from(next - since).unwrap_or(u64::MAX))
}

fn receive(args: &Args, mut s: TcpStream, t0: Instant, live: &Live) -> Res<Received> {
    let mut id = [0u8; 4];
    s.read_exact(&mut id)?;
    let mut r = Received {
        flow: u32::from_le_bytes(id),
        ..Received::default()
    };
    let data = args.verify.then(|| stream_of(args.seed, r.flow));
    let mut buf = vec![0u8; args.read_bytes.max(1)];
    match args.pattern {
        Pattern::Steady => loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    r.take(&buf[..n], data.as_deref())?;
                    live.received.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        },
        Pattern::Drain => {
            s.set_nonblocking(true)?;
            let pause = Duration::from_millis(args.pause_ms);
            loop {
                thread::sleep(if args.sync {
                    until_epoch(t0, pause)
                } else {
                    pause
                });
                if drain_once(&mut s, &mut buf, &mut r, data.as_deref(), live)? {
                    break;
                }
            }
        }
    }
    Ok(r)
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

/// Accept the flows' connections and start one receiver each.
fn start_receivers(
    args: &Arc<Args>,
    l: &TcpListener,
    t0: Instant,
    live: &Arc<Live>,
) -> Res<Vec<thread::JoinHandle<Res<Received>>>> {
    let mut rx = Vec::new();
    // A sender that cannot connect must not leave the listener waiting.
    l.set_nonblocking(true)?;
    let give_up = Instant::now() + Duration::from_secs(30);
    while rx.len() < args.tcp as usize {
        let s = match l.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < give_up => {
                thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => return Err(format!("accepting flow {}: {e}", rx.len()).into()),
        };
        s.set_nonblocking(false)?;
        let a = Arc::clone(args);
        let live = Arc::clone(live);
        rx.push(thread::spawn(move || receive(&a, s, t0, &live)));
    }
    Ok(rx)
}

fn run(args: Args) -> Res<bool> {
    let args = Arc::new(args);
    enter_netns(&args.rx_netns)?;
    println!("{}", params_line(&args)?);
    let l = TcpListener::bind(SocketAddrV4::new(args.addr, args.port))?;
    if args.rcvbuf > 0 {
        setsockopt(&l, sockopt::RcvBuf, &args.rcvbuf)?;
    }
    let snmp0 = read_snmp()?;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_millis(args.duration_ms);
    let live = Arc::new(Live::default());
    if args.control {
        // Not joined: it blocks on stdin until the driver stops the run.
        let live = Arc::clone(&live);
        let port = args.port;
        thread::spawn(move || live.serve(t0, port));
    }
    let tx: Vec<_> = (0..args.tcp)
        .map(|flow| {
            let a = Arc::clone(&args);
            let live = Arc::clone(&live);
            thread::spawn(move || send(&a, flow, deadline, &live))
        })
        .collect();
    let rx = start_receivers(&args, &l, t0, &live)?;
    let mut sent = BTreeMap::new();
    for h in tx {
        let s = h.join().map_err(|_| "a sender panicked")??;
        sent.insert(s.flow, s.bytes);
    }
    let mut ok = true;
    let (mut total_sent, mut total_rx) = (0u64, 0u64);
    for h in rx {
        let r = h.join().map_err(|_| "a receiver panicked")??;
        let s = sent.get(&r.flow).copied().unwrap_or(0);
        let intact = r.bytes == s && r.mismatch_at.is_none();
        ok &= intact;
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
    let elapsed = t0.elapsed();
    let snmp1 = read_snmp()?;
    let deltas: BTreeMap<&String, i64> = snmp1
        .iter()
        .map(|(k, v)| (k, v - snmp0.get(k).copied().unwrap_or(0)))
        .filter(|(_, d)| *d != 0)
        .collect();
    println!(
        "{}",
        json!({
            "type": "summary",
            "elapsed_ms": elapsed.as_millis(),
            "flows": args.tcp,
            "sent": total_sent,
            "received": total_rx,
            "intact": ok,
            "snmp": deltas,
        })
    );
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
    use super::{PERIOD, Received, queued_in, stream_of, until_epoch};
    use std::time::{Duration, Instant};

    /// The first `n` bytes of flow `flow`'s stream.
    fn bytes(seed: u64, flow: u32, n: usize) -> Vec<u8> {
        let twice = stream_of(seed, flow);
        (0..n).map(|i| twice[i % PERIOD]).collect()
    }

    /// Feeds `data` to a verifying receiver in reads of `chunk` bytes.
    fn check(data: &[u8], chunk: usize) -> Received {
        let expect = stream_of(5, 1);
        let mut r = Received::default();
        for c in data.chunks(chunk) {
            r.take(c, Some(&expect)).unwrap();
        }
        r
    }

    #[test]
    fn an_intact_stream_verifies_in_any_read_size() {
        let data = bytes(5, 1, 3 * PERIOD + 777);
        for chunk in [1, 1448, 65_536, PERIOD, 200_000] {
            let r = check(&data, chunk);
            assert_eq!(r.mismatch_at, None, "read size {chunk}");
            assert_eq!(r.bytes, data.len() as u64);
        }
    }

    #[test]
    fn a_flipped_byte_is_found_where_it_is() {
        let mut data = bytes(5, 1, 2 * PERIOD);
        data[PERIOD + 12_345] ^= 0x40;
        assert_eq!(
            check(&data, 1448).mismatch_at,
            Some((PERIOD + 12_345) as u64)
        );
    }

    #[test]
    fn a_lost_or_repeated_segment_is_found() {
        let data = bytes(5, 1, 4 * PERIOD);
        let mut lost = data[..70_000].to_vec();
        lost.extend_from_slice(&data[70_000 + 1448..]);
        assert!(
            check(&lost, 4096)
                .mismatch_at
                .is_some_and(|at| at >= 70_000)
        );
        let mut twice = data[..70_000 + 1448].to_vec();
        twice.extend_from_slice(&data[70_000..]);
        assert!(
            check(&twice, 4096)
                .mismatch_at
                .is_some_and(|at| at >= 70_000)
        );
    }

    #[test]
    fn another_flow_or_seed_is_another_stream() {
        let a = bytes(5, 1, 4096);
        assert_ne!(a, bytes(5, 2, 4096));
        assert_ne!(a, bytes(6, 1, 4096));
        assert_eq!(check(&bytes(5, 2, 4096), 512).mismatch_at, Some(0));
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
        assert_eq!(queued_in(text, 5400), 0x1_0000 + 0x100);
        assert_eq!(queued_in(text, 5401), 0x400);
        assert_eq!(queued_in(text, 5402), 0);
    }

    #[test]
    fn sync_waits_for_the_next_multiple_of_the_pause() {
        let pause = Duration::from_millis(50);
        let w = until_epoch(Instant::now(), pause);
        assert!(w > Duration::ZERO && w <= pause, "{w:?}");
    }
}
