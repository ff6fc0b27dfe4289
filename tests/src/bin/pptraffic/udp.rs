//! The UDP flows: a sender paced to `--udp-rate` in ~1 ms ticks, a
//! receiver on a socket of its own that reads in `--pattern` and counts
//! what arrived, what is missing and what arrived wrong.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::socket::{setsockopt, sockopt};
use serde::Serialize;

use crate::pace::{Budget, Pauses, due, on_time, until_epoch};
use crate::{Args, Live, PERIOD, Pattern, Res, enter_netns, ns_since, stream_of};

/// A datagram's header: flow id (u32), sequence number (u64), send time
/// in ns since `t0` (u64), little-endian; the seeded bytes follow.
/// The senders' pacing tick: 997 µs, not 1 ms. The guest's CPU time
/// (/proc/stat, which the bench's figure divides by) is sampled at the
/// timer tick; senders waking on exact milliseconds wake in step with a
/// 1000 Hz tick, and every sample then lands on them running: the same
/// run read 62 or 290 busy jiffies of 300 depending on the phase its
/// start happened to have. A tick off the jiffy sweeps every phase.
const TICK: Duration = Duration::from_micros(997);

const HEADER: usize = 20;
/// The sequence number of the end markers.
const END: u64 = u64::MAX;
/// End markers a sender sends after its last datagram, and their spacing.
const MARKERS: u32 = 5;
const MARKER_GAP: Duration = Duration::from_millis(10);
/// After the senders' end, a receiver that hears nothing this long stops
/// (its markers were lost).
const QUIET: Duration = Duration::from_secs(2);
/// How long a blocking read waits before the receiver looks at the clock.
const POLL: Duration = Duration::from_millis(100);
/// The seeded stream of UDP flow `i` is `stream_of(seed, UDP_STREAM | i)`,
/// not a TCP stream's.
const UDP_STREAM: u32 = 0x4000_0000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    flow: u32,
    seq: u64,
    sent_ns: u64,
}

impl Header {
    fn encode(self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(&self.flow.to_le_bytes());
        buf[4..12].copy_from_slice(&self.seq.to_le_bytes());
        buf[12..HEADER].copy_from_slice(&self.sent_ns.to_le_bytes());
    }

    /// `None` when `buf` is shorter than a header.
    fn decode(buf: &[u8]) -> Option<Self> {
        Some(Self {
            flow: u32::from_le_bytes(buf.get(..4)?.try_into().ok()?),
            seq: u64::from_le_bytes(buf.get(4..12)?.try_into().ok()?),
            sent_ns: u64::from_le_bytes(buf.get(12..HEADER)?.try_into().ok()?),
        })
    }
}

/// The seeded bytes of datagram `seq` of `size` bytes: the flow's stream
/// (`stream`, twice over) at `seq × size` mod `PERIOD`.
fn payload(stream: &[u8], seq: u64, size: usize) -> &[u8] {
    let period = PERIOD as u64;
    let off = usize::try_from((seq % period) * (size as u64) % period).unwrap_or(0);
    &stream[off..off + size - HEADER]
}

/// Writes datagram `seq` of flow `flow` into `buf` (its whole length).
fn fill(buf: &mut [u8], flow: u32, seq: u64, sent_ns: u64, stream: &[u8]) {
    Header { flow, seq, sent_ns }.encode(buf);
    let size = buf.len();
    buf[HEADER..].copy_from_slice(payload(stream, seq, size));
}

/// Binds the receivers' sockets (in the calling thread's namespace, the
/// rx one): flow i on `--addr`, port `--port + 1 + i`.
pub fn bind(args: &Args) -> Res<Vec<UdpSocket>> {
    (0..args.udp)
        .map(|i| {
            let port = u16::try_from(u32::from(args.port) + 1 + i)?;
            let s = UdpSocket::bind(SocketAddrV4::new(args.addr, port))?;
            if args.rcvbuf > 0 {
                setsockopt(&s, sockopt::RcvBuf, &args.rcvbuf)?;
            }
            Ok(s)
        })
        .collect()
}

/// Sends `buf` to `to`. ENOBUFS (a full queue on the way out) is a drop on
/// the way, as the kernel counts it when it does not report it: the
/// datagram is counted as sent and the receiver misses it.
fn send_one(s: &UdpSocket, buf: &[u8], to: SocketAddrV4) -> Res<()> {
    loop {
        match s.send_to(buf, to) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOBUFS) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// UDP flow `flow`'s sender: enter the tx namespace; every [`TICK`], the
/// datagrams `--udp-rate` allows since the start that are not sent yet
/// (a tick late is made up in the next); at the deadline or `stop`, the
/// end markers. Returns the flow and the datagrams sent.
pub fn send(
    args: &Args,
    flow: u32,
    t0: Instant,
    deadline: Instant,
    live: &Live,
) -> Res<(u32, u64)> {
    enter_netns(&args.tx_netns)?;
    let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    let to = SocketAddrV4::new(args.addr, u16::try_from(u32::from(args.port) + 1 + flow)?);
    let stream = stream_of(args.seed, UDP_STREAM | flow);
    let mut buf = vec![0u8; args.udp_bytes];
    let size = buf.len() as u64;
    let over = || Instant::now() >= deadline || live.stop.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut seq = 0u64;
    'run: while !over() {
        let allowed = due(
            args.udp_rate,
            size,
            on_time(start.elapsed(), args.on_off_ms),
        );
        while seq < allowed {
            if over() {
                break 'run;
            }
            fill(&mut buf, flow, seq, ns_since(t0), &stream);
            send_one(&s, &buf, to)?;
            seq += 1;
        }
        thread::sleep(until_epoch(start, TICK));
    }
    for k in 0..MARKERS {
        if k > 0 {
            thread::sleep(MARKER_GAP);
        }
        let mut end = [0u8; HEADER];
        let sent_ns = ns_since(t0);
        Header {
            flow,
            seq: END,
            sent_ns,
        }
        .encode(&mut end);
        send_one(&s, &end, to)?;
    }
    Ok((flow, seq))
}

/// What one UDP receiver saw.
#[derive(Debug, Default, Serialize)]
pub struct UdpRx {
    pub flow: u32,
    /// Datagrams (end markers not included) and their bytes, headers
    /// included.
    pub received: u64,
    pub bytes: u64,
    /// The highest sequence number received.
    #[serde(skip)]
    highest: Option<u64>,
    /// Datagrams of the wrong size or flow, and (`--verify`) with wrong
    /// seeded bytes.
    pub corrupted: u64,
}

/// What [`UdpRx::take`] made of a datagram.
#[derive(Debug, PartialEq, Eq)]
enum Taken {
    Data,
    End,
}

impl UdpRx {
    /// Counts datagram `d` (`size` bytes expected), checks its seeded
    /// bytes against `stream` when given.
    fn take(&mut self, d: &[u8], size: usize, stream: Option<&[u8]>) -> Taken {
        let h = Header::decode(d);
        if h.is_some_and(|h| h.flow == self.flow && h.seq == END && d.len() == HEADER) {
            return Taken::End;
        }
        self.received += 1;
        self.bytes += d.len() as u64;
        match h {
            Some(h) if h.flow == self.flow && d.len() == size && h.seq != END => {
                self.highest = self.highest.max(Some(h.seq));
                if stream.is_some_and(|st| d[HEADER..] != *payload(st, h.seq, size)) {
                    self.corrupted += 1;
                }
            }
            _ => self.corrupted += 1,
        }
        Taken::Data
    }

    /// Datagrams missing below the highest sequence number received
    /// (reordered ones are not missing once they arrive; those after the
    /// last one received are not counted).
    pub fn lost(&self) -> u64 {
        self.highest
            .map_or(0, |h| h.saturating_add(1).saturating_sub(self.received))
    }
}

/// When a receiver stops without an end marker: `QUIET` without a
/// datagram once the senders' end has come.
#[derive(Debug)]
struct Quiet {
    last: Instant,
    end_seen: Option<Instant>,
}

impl Quiet {
    fn new(now: Instant) -> Self {
        Self {
            last: now,
            end_seen: None,
        }
    }

    fn heard(&mut self, now: Instant) {
        self.last = now;
    }

    /// Whether to stop, at `now`, `ended` saying whether the senders'
    /// end (deadline or `stop`) has come.
    fn over(&mut self, ended: bool, now: Instant) -> bool {
        if !ended {
            return false;
        }
        let since = self.last.max(*self.end_seen.get_or_insert(now));
        now.saturating_duration_since(since) >= QUIET
    }
}

/// What a receiver carries from datagram to datagram.
#[derive(Debug)]
struct Rx<'a> {
    r: UdpRx,
    size: usize,
    stream: Option<Vec<u8>>,
    quiet: Quiet,
    live: &'a Live,
}

impl Rx<'_> {
    /// Counts datagram `d`: in `live` at once, unless it is an end marker
    /// (`true`).
    fn take(&mut self, d: &[u8]) -> bool {
        self.quiet.heard(Instant::now());
        if self.r.take(d, self.size, self.stream.as_deref()) == Taken::End {
            return true;
        }
        self.live
            .received
            .fetch_add(d.len() as u64, Ordering::Relaxed);
        false
    }
}

/// UDP flow `flow`'s receiver on `s`: reads in `--pattern` until an end
/// marker, or [`QUIET`] after the senders' end; each datagram's bytes are
/// counted in `live` at once.
pub fn receive(
    args: &Args,
    s: &UdpSocket,
    flow: u32,
    t0: Instant,
    deadline: Instant,
    live: &Live,
) -> Res<UdpRx> {
    let mut rx = Rx {
        r: UdpRx {
            flow,
            ..UdpRx::default()
        },
        size: args.udp_bytes,
        stream: args.verify.then(|| stream_of(args.seed, UDP_STREAM | flow)),
        quiet: Quiet::new(Instant::now()),
        live,
    };
    let ended = || Instant::now() >= deadline || live.stop.load(Ordering::Relaxed);
    let mut buf = vec![0u8; 65_536];
    match args.pattern {
        // `validate` refuses splice and stall with UDP flows.
        Pattern::Steady | Pattern::Slow | Pattern::Splice | Pattern::Stall => {
            s.set_read_timeout(Some(POLL))?;
            let mut budget = (args.pattern == Pattern::Slow).then(|| Budget::new(args.read_rate));
            loop {
                match s.recv(&mut buf) {
                    Ok(n) => {
                        if rx.take(&buf[..n]) {
                            break;
                        }
                        if let Some(b) = &mut budget {
                            b.took(n);
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(e.into()),
                }
                if rx.quiet.over(ended(), Instant::now()) {
                    break;
                }
            }
        }
        Pattern::Drain => {
            s.set_nonblocking(true)?;
            let mut pauses = Pauses::new(
                args.pause_ms,
                args.pause_max_ms,
                args.sync.then_some(t0),
                args.seed,
                flow,
            );
            'run: loop {
                thread::sleep(pauses.next());
                loop {
                    match s.recv(&mut buf) {
                        Ok(n) => {
                            if rx.take(&buf[..n]) {
                                break 'run;
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                if rx.quiet.over(ended(), Instant::now()) {
                    break;
                }
            }
        }
    }
    Ok(rx.r)
}

#[cfg(test)]
mod tests {
    use super::{END, HEADER, Header, QUIET, Quiet, Taken, UdpRx, fill, payload};
    use crate::stream_of;
    use std::time::{Duration, Instant};

    #[test]
    fn a_header_decodes_to_what_was_encoded() {
        let h = Header {
            flow: 0x0102_0304,
            seq: 0x1122_3344_5566_7788,
            sent_ns: 987_654_321,
        };
        let mut buf = [0u8; HEADER];
        h.encode(&mut buf);
        assert_eq!(buf[..4], [4, 3, 2, 1]);
        assert_eq!(Header::decode(&buf), Some(h));
        assert_eq!(Header::decode(&buf[..HEADER - 1]), None);
    }

    /// Datagram `seq` of flow 3, 100 bytes, from `stream`.
    fn dgram(stream: &[u8], seq: u64) -> Vec<u8> {
        let mut d = vec![0u8; 100];
        fill(&mut d, 3, seq, 5, stream);
        d
    }

    #[test]
    fn datagrams_carry_their_slice_of_the_flows_stream() {
        let st = stream_of(9, 3);
        let d = dgram(&st, 1000);
        assert_eq!(Header::decode(&d).map(|h| h.seq), Some(1000));
        assert_eq!(d[HEADER..], *payload(&st, 1000, 100));
        assert_ne!(payload(&st, 1000, 100), payload(&st, 1001, 100));
    }

    #[test]
    fn losses_are_the_gaps_below_the_highest_and_reordering_is_none() {
        let st = stream_of(9, 3);
        let mut r = UdpRx {
            flow: 3,
            ..UdpRx::default()
        };
        assert_eq!(r.lost(), 0);
        for seq in [0, 1, 3, 2, 6] {
            assert_eq!(r.take(&dgram(&st, seq), 100, Some(&st)), Taken::Data);
        }
        // 4 and 5 missing; 2 came late and is not.
        assert_eq!((r.received, r.bytes, r.lost(), r.corrupted), (5, 500, 2, 0));
        r.take(&dgram(&st, 4), 100, Some(&st));
        assert_eq!(r.lost(), 1);
        // A duplicate never makes the count negative.
        r.take(&dgram(&st, 4), 100, Some(&st));
        r.take(&dgram(&st, 4), 100, Some(&st));
        assert_eq!(r.lost(), 0);
    }

    #[test]
    fn wrong_bytes_size_or_flow_are_corrupt_and_markers_end() {
        let st = stream_of(9, 3);
        let mut r = UdpRx {
            flow: 3,
            ..UdpRx::default()
        };
        let mut bad = dgram(&st, 7);
        bad[60] ^= 1;
        r.take(&bad, 100, Some(&st));
        assert_eq!(r.corrupted, 1);
        // Without --verify the bytes are not looked at.
        r.take(&bad, 100, None);
        assert_eq!(r.corrupted, 1);
        r.take(&dgram(&st, 8)[..99], 100, None);
        let mut other = dgram(&st, 9);
        other[0] = 4;
        r.take(&other, 100, None);
        // Received, all four; seq 7 (twice) the highest to be trusted.
        assert_eq!((r.received, r.corrupted, r.lost()), (4, 3, 4));
        let mut end = [0u8; HEADER];
        Header {
            flow: 3,
            seq: END,
            sent_ns: 0,
        }
        .encode(&mut end);
        assert_eq!(r.take(&end, 100, None), Taken::End);
        assert_eq!(r.received, 4);
    }

    #[test]
    fn a_receiver_stops_after_quiet_once_the_senders_ended() {
        let t = Instant::now();
        let s = |ms| t + Duration::from_millis(ms);
        let mut q = Quiet::new(t);
        // Silence before the end is no reason to stop.
        assert!(!q.over(false, s(10_000)));
        // The end seen at 10 s: quiet counts from there, not from the start.
        assert!(!q.over(true, s(10_000)));
        assert!(!q.over(true, s(11_999)));
        // A datagram at 11.5 s restarts it.
        q.heard(s(11_500));
        assert!(!q.over(true, s(12_000)));
        assert!(q.over(true, s(11_500) + QUIET));
    }
}
