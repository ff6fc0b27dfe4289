//! The TCP streams: their senders, their receivers' read patterns, the
//! listener's accept loop.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::socket::{setsockopt, sockopt};
use serde::Serialize;

use crate::devmem::{DevmemRx, DevmemStats};
use crate::mice::{self, MOUSE, MouseRx};
use crate::pace::{Budget, Pauses};
use crate::{Args, Live, PERIOD, Pattern, Res, enter_netns, stream_of};

#[derive(Debug, Default)]
pub struct Sent {
    pub flow: u32,
    pub bytes: u64,
}

/// One sender: enter the tx namespace, connect, announce the flow id,
/// write the stream until the deadline or the byte limit.
pub fn send(args: &Args, flow: u32, deadline: Instant, live: &Live) -> Res<Sent> {
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
pub struct Received {
    pub flow: u32,
    pub bytes: u64,
    pub reads: u64,
    /// `drain`: read phases, and the most bytes one of them read.
    pub drains: u64,
    pub max_drain_bytes: u64,
    /// `--verify`: the stream offset of the first wrong byte.
    pub mismatch_at: Option<u64>,
    /// `--devmem`: what came through the memory provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devmem: Option<DevmemStats>,
}

/// How a stream's receiver reads: `read(2)`, or devmem TCP.
#[derive(Debug)]
pub enum Reader {
    Plain,
    Devmem(Box<DevmemRx>),
}

impl Reader {
    fn read(&mut self, s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain => s.read(buf),
            Self::Devmem(d) => d.read(s, buf),
        }
    }

    /// `buf.len()` bytes, or an error at EOF.
    fn read_exact(&mut self, s: &mut TcpStream, buf: &mut [u8]) -> Res<()> {
        let mut got = 0;
        while got < buf.len() {
            match self.read(s, &mut buf[got..]) {
                Ok(0) => return Err("EOF inside the flow header".into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// A drain ended: with `--devmem-hold`, its tokens go back.
    fn drained(&mut self, s: &TcpStream) -> std::io::Result<()> {
        match self {
            Self::Plain => Ok(()),
            Self::Devmem(d) => d.drained(s),
        }
    }

    /// The stream is done: the last tokens go back; its devmem figures.
    fn finish(self, s: &TcpStream) -> Res<Option<DevmemStats>> {
        match self {
            Self::Plain => Ok(None),
            Self::Devmem(mut d) => {
                d.finish(s)?;
                Ok(Some(d.stats.clone()))
            }
        }
    }
}

impl Received {
    /// Count `buf` (the next bytes of the flow) and check it.
    pub fn take(&mut self, buf: &[u8], data: Option<&[u8]>) -> Res<()> {
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

/// One read, counted in `live` at once (a drain can last seconds when the
/// sender keeps up, and a `mark` must not see its bytes all at its end):
/// `Some(n)` bytes, 0 at EOF; `None` when a non-blocking socket has
/// nothing. An interrupted read is retried.
fn read_counted(
    s: &mut TcpStream,
    rd: &mut Reader,
    buf: &mut [u8],
    r: &mut Received,
    data: Option<&[u8]>,
    live: &Live,
) -> Res<Option<usize>> {
    loop {
        match rd.read(s, buf) {
            Ok(0) => return Ok(Some(0)),
            Ok(n) => {
                r.take(&buf[..n], data)?;
                live.received.fetch_add(n as u64, Ordering::Relaxed);
                return Ok(Some(n));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Read until EAGAIN (`Ok(false)`) or EOF (`Ok(true)`).
fn drain_once(
    s: &mut TcpStream,
    rd: &mut Reader,
    buf: &mut [u8],
    r: &mut Received,
    data: Option<&[u8]>,
    live: &Live,
) -> Res<bool> {
    let before = r.bytes;
    let eof = loop {
        match read_counted(s, rd, buf, r, data, live)? {
            Some(0) => break true,
            Some(_) => {}
            None => break false,
        }
    };
    r.drains += 1;
    r.max_drain_bytes = r.max_drain_bytes.max(r.bytes - before);
    Ok(eof)
}

/// One non-blocking read (none when the socket has nothing: `Ok(false)`;
/// EOF: `Ok(true)`), then the [`Budget`]'s sleep.
fn read_once(
    s: &mut TcpStream,
    rd: &mut Reader,
    buf: &mut [u8],
    r: &mut Received,
    data: Option<&[u8]>,
    live: &Live,
    budget: &mut Budget,
) -> Res<bool> {
    match read_counted(s, rd, buf, r, data, live)? {
        Some(0) => Ok(true),
        Some(n) => {
            budget.took(n);
            Ok(false)
        }
        None => Ok(false),
    }
}

/// Blocking reads to EOF; `slow`: after each, the [`Budget`]'s sleep.
fn read_to_eof(
    s: &mut TcpStream,
    rd: &mut Reader,
    buf: &mut [u8],
    r: &mut Received,
    data: Option<&[u8]>,
    live: &Live,
    mut budget: Option<Budget>,
) -> Res<()> {
    loop {
        match read_counted(s, rd, buf, r, data, live)? {
            Some(0) => return Ok(()),
            Some(n) => {
                if let Some(b) = &mut budget {
                    b.took(n);
                }
            }
            // A blocking socket that would block (a receive timeout).
            None => return Err(std::io::Error::from(ErrorKind::WouldBlock).into()),
        }
    }
}

/// `splice`: moves the socket's bytes into a pipe and reads them out of
/// it, to EOF. `splice(2)` takes a page reference for each page of an
/// skb's fragments it puts in the pipe (the linear part it copies), and
/// the skb is freed once spliced whole: its page_pool pages then have a
/// second reference, the pool cannot recycle them and releases them to
/// the page allocator (`recycle.released_refcnt`); the read from the pipe
/// drops the last one. Every such page is a slow-path allocation later,
/// whatever the ring.
fn splice_to_eof(
    s: &TcpStream,
    buf: &mut [u8],
    r: &mut Received,
    data: Option<&[u8]>,
    live: &Live,
) -> Res<()> {
    use nix::errno::Errno;
    use nix::fcntl::{SpliceFFlags, splice};
    let (out, into) = nix::unistd::pipe()?;
    let mut out = std::fs::File::from(out);
    loop {
        let n = match splice(s, None, &into, None, buf.len(), SpliceFFlags::SPLICE_F_MOVE) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(format!("splice from the socket: {e}").into()),
        };
        let mut left = n;
        while left > 0 {
            let want = left.min(buf.len());
            let k = match out.read(&mut buf[..want]) {
                Ok(0) => return Err("the pipe ended with spliced bytes unread".into()),
                Ok(k) => k,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            r.take(&buf[..k], data)?;
            live.received.fetch_add(k as u64, Ordering::Relaxed);
            left -= k;
        }
    }
}

/// What a connection to the listener was, by its header: one of the
/// `--tcp` streams or a mouse.
#[derive(Debug)]
pub enum Rx {
    Flow(Received),
    Mouse(MouseRx),
}

/// Read the flow header of connection `s` (from remote port `from`) and
/// receive it as what it says it is.
fn receive(
    args: &Args,
    mut s: TcpStream,
    from: u16,
    t0: Instant,
    live: &Live,
    mut rd: Reader,
) -> Res<Rx> {
    let mut id = [0u8; 4];
    rd.read_exact(&mut s, &mut id)?;
    let id = u32::from_le_bytes(id);
    if id & MOUSE != 0 {
        live.mouse_port(from);
        return Ok(Rx::Mouse(mice::receive(args, s, id, t0, live)?));
    }
    receive_stream(args, s, id, t0, live, rd).map(Rx::Flow)
}

/// Stream `flow`'s receiver: reads to EOF in `--pattern`.
fn receive_stream(
    args: &Args,
    mut s: TcpStream,
    flow: u32,
    t0: Instant,
    live: &Live,
    mut rd: Reader,
) -> Res<Received> {
    let mut r = Received {
        flow,
        ..Received::default()
    };
    let data = args.verify.then(|| stream_of(args.seed, r.flow));
    let mut buf = vec![0u8; args.read_bytes.max(1)];
    match args.pattern {
        Pattern::Steady | Pattern::Slow => {
            let budget = (args.pattern == Pattern::Slow).then(|| Budget::new(args.read_rate));
            read_to_eof(
                &mut s,
                &mut rd,
                &mut buf,
                &mut r,
                data.as_deref(),
                live,
                budget,
            )?;
        }
        Pattern::Splice => splice_to_eof(&s, &mut buf, &mut r, data.as_deref(), live)?,
        Pattern::Stall => {
            s.set_nonblocking(true)?;
            let every = Duration::from_millis(args.stall_every_ms);
            let mut next = Instant::now() + every;
            // `--read-rate`: between stalls one read at a time, no faster
            // than the rate (the queue stays full, each read returns a
            // few pages); the drain after a stall is not limited, and the
            // rate counts again from its end.
            let paced = || (args.read_rate > 0).then(|| Budget::new(args.read_rate));
            let mut budget = paced();
            let mut drain = true;
            loop {
                let eof = match &mut budget {
                    Some(b) if !drain => {
                        read_once(&mut s, &mut rd, &mut buf, &mut r, data.as_deref(), live, b)?
                    }
                    _ => {
                        let eof =
                            drain_once(&mut s, &mut rd, &mut buf, &mut r, data.as_deref(), live)?;
                        budget = paced();
                        eof
                    }
                };
                rd.drained(&s)?;
                if eof {
                    break;
                }
                // Between stalls, a read every millisecond: small returns.
                drain = Instant::now() >= next;
                if drain {
                    thread::sleep(Duration::from_millis(args.pause_ms));
                    next += every;
                } else {
                    thread::sleep(Duration::from_millis(1));
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
                r.flow,
            );
            loop {
                thread::sleep(pauses.next());
                let eof = drain_once(&mut s, &mut rd, &mut buf, &mut r, data.as_deref(), live)?;
                // `--devmem-hold N`: the tokens of the drain N back go back.
                rd.drained(&s)?;
                if eof {
                    break;
                }
            }
        }
    }
    r.devmem = rd.finish(&s)?;
    Ok(r)
}

/// Accept the streams' and the mice's connections and start one receiver
/// each.
pub fn start_receivers(
    args: &Arc<Args>,
    l: &TcpListener,
    t0: Instant,
    live: &Arc<Live>,
    devmem: Option<&Arc<std::fs::File>>,
) -> Res<Vec<thread::JoinHandle<Res<Rx>>>> {
    let mut rx = Vec::new();
    // A sender that cannot connect must not leave the listener waiting.
    l.set_nonblocking(true)?;
    let give_up = Instant::now() + Duration::from_secs(30);
    let connections = u64::from(args.tcp) + u64::from(args.mice);
    while (rx.len() as u64) < connections {
        let (s, from) = match l.accept() {
            Ok((s, peer)) => (s, peer.port()),
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < give_up => {
                thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => return Err(format!("accepting flow {}: {e}", rx.len()).into()),
        };
        s.set_nonblocking(false)?;
        let a = Arc::clone(args);
        let live = Arc::clone(live);
        let rd = devmem.map_or(Reader::Plain, |m| {
            Reader::Devmem(Box::new(DevmemRx::new(
                Arc::clone(m),
                a.devmem_batch,
                a.devmem_hold,
                a.read_bytes,
            )))
        });
        rx.push(thread::spawn(move || receive(&a, s, from, t0, &live, rd)));
    }
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::Received;
    use crate::{PERIOD, stream_of};

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
}
