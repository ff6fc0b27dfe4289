//! The mice: small messages on TCP connections of their own beside the
//! streams, to the same listener, each stamped with its send time, so that
//! the time a message waits behind the streams (in the RX ring, the
//! backlog, the socket) is measured at the receiver.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddrV4, TcpStream};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::delay::delay_us;
use crate::tcp::Received;
use crate::{Args, Live, PERIOD, Res, enter_netns, ns_since, stream_of};

/// The top bit of a flow header marks a mouse (`MOUSE | i`); the streams'
/// ids are below it.
pub const MOUSE: u32 = 0x8000_0000;

/// Bytes of a message's send time (ns since `t0`, little-endian) at its
/// start; the rest is the mouse's seeded stream.
const STAMP: usize = 8;

/// Where in the mouse's stream the seeded bytes of message `k` start, when
/// each message carries `body` of them (`body` < `PERIOD`).
fn body_offset(k: u64, body: usize) -> usize {
    let period = PERIOD as u64;
    usize::try_from((k % period) * (body as u64) % period).unwrap_or(0)
}

/// Mouse `i`: enter the tx namespace, connect, announce `MOUSE | i`, then
/// until the deadline or `stop` one message, then `--mice-gap-ms` of
/// sleep. Returns the id and the messages written whole.
pub fn send(args: &Args, i: u32, t0: Instant, deadline: Instant, live: &Live) -> Res<(u32, u64)> {
    enter_netns(&args.tx_netns)?;
    let id = MOUSE | i;
    let mut s = TcpStream::connect(SocketAddrV4::new(args.addr, args.port))?;
    // A message is more than one segment: without this its tail would
    // wait for the ACK of its head (Nagle), a delay of TCP's, not the
    // path's.
    s.set_nodelay(true)?;
    s.write_all(&id.to_le_bytes())?;
    let data = stream_of(args.seed, id);
    let mut msg = vec![0u8; args.mice_bytes];
    let body = msg.len() - STAMP;
    let gap = Duration::from_millis(args.mice_gap_ms);
    let mut sent = 0u64;
    while Instant::now() < deadline && !live.stop.load(Ordering::Relaxed) {
        let off = body_offset(sent, body);
        msg[STAMP..].copy_from_slice(&data[off..off + body]);
        msg[..STAMP].copy_from_slice(&ns_since(t0).to_le_bytes());
        s.write_all(&msg)?;
        sent += 1;
        thread::sleep(gap.min(deadline.saturating_duration_since(Instant::now())));
    }
    s.shutdown(Shutdown::Write)?;
    Ok((id, sent))
}

/// How a message read ended.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    Whole,
    /// EOF before its first byte: the mouse's end.
    Eof,
    /// EOF inside it.
    Cut,
}

/// Fill `buf` with one message.
fn read_msg(r: &mut impl Read, buf: &mut [u8]) -> Res<Got> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(Got::Eof),
            Ok(0) => return Ok(Got::Cut),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Got::Whole)
}

/// What one mouse's receiver saw.
#[derive(Debug, Default)]
pub struct MouseRx {
    pub id: u32,
    pub messages: u64,
    /// The messages' seeded bytes, as a stream (`--verify` checks it).
    pub payload: Received,
    /// The connection ended inside a message.
    pub cut: bool,
}

/// Mouse `id`'s receiver: whole messages, read as they come, each one's
/// delay recorded in `live` (its bytes are not in `live.received`).
pub fn receive(args: &Args, mut s: TcpStream, id: u32, t0: Instant, live: &Live) -> Res<MouseRx> {
    let data = args.verify.then(|| stream_of(args.seed, id));
    let mut r = MouseRx {
        id,
        ..MouseRx::default()
    };
    let mut msg = vec![0u8; args.mice_bytes];
    loop {
        match read_msg(&mut s, &mut msg)? {
            Got::Eof => break,
            Got::Cut => {
                r.cut = true;
                break;
            }
            Got::Whole => {
                let now = ns_since(t0);
                let mut stamp = [0u8; STAMP];
                stamp.copy_from_slice(&msg[..STAMP]);
                live.delay(delay_us(u64::from_le_bytes(stamp), now));
                r.messages += 1;
                r.payload.take(&msg[STAMP..], data.as_deref())?;
            }
        }
    }
    Ok(r)
}

/// The mice over the run.
#[derive(Debug, PartialEq, Eq)]
pub struct Tally {
    pub sent: u64,
    pub received: u64,
    /// Mice that did not receive every message they sent, intact.
    pub broken: u64,
}

/// Tallies the receivers `rx` against the messages each mouse sent
/// (`sent`, by id); a mouse without a receiver is broken.
pub fn tally(rx: &[MouseRx], sent: &BTreeMap<u32, u64>) -> Tally {
    let by_id: BTreeMap<u32, &MouseRx> = rx.iter().map(|r| (r.id, r)).collect();
    let broken = sent
        .iter()
        .filter(|&(id, &s)| {
            by_id
                .get(id)
                .is_none_or(|r| r.messages != s || r.cut || r.payload.mismatch_at.is_some())
        })
        .count();
    Tally {
        sent: sent.values().sum(),
        received: rx.iter().map(|r| r.messages).sum(),
        broken: broken as u64,
    }
}

/// The `mice` line: the tally, the message bytes received, the delays
/// over the run.
pub fn line(args: &Args, t: &Tally, delays: Value) -> Value {
    json!({
        "type": "mice",
        "flows": args.mice,
        "sent": t.sent,
        "received": t.received,
        "bytes": t.received * args.mice_bytes as u64,
        "broken": t.broken,
        "intact": t.broken == 0,
        "delay_us": delays,
    })
}

#[cfg(test)]
mod tests {
    use super::{Got, MouseRx, PERIOD, Tally, body_offset, read_msg, tally};
    use std::collections::BTreeMap;
    use std::io::Read;

    /// Hands out its bytes at most `step` at a time.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.step).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn messages_are_read_whole_however_the_bytes_come() {
        let data: Vec<u8> = (0..=255).cycle().take(3 * 100).collect();
        for step in [1, 7, 100, 1000] {
            let mut r = Trickle { data: &data, step };
            let mut msg = [0u8; 100];
            for k in 0..3 {
                assert_eq!(read_msg(&mut r, &mut msg).unwrap(), Got::Whole);
                assert_eq!(msg[..], data[k * 100..(k + 1) * 100], "step {step}");
            }
            assert_eq!(read_msg(&mut r, &mut msg).unwrap(), Got::Eof);
        }
        let mut r = Trickle {
            data: &data[..150],
            step: 64,
        };
        let mut msg = [0u8; 100];
        assert_eq!(read_msg(&mut r, &mut msg).unwrap(), Got::Whole);
        assert_eq!(read_msg(&mut r, &mut msg).unwrap(), Got::Cut);
    }

    #[test]
    fn message_bodies_continue_the_stream() {
        assert_eq!(body_offset(0, 2040), 0);
        assert_eq!(body_offset(1, 2040), 2040);
        assert_eq!(body_offset(32, 2040), 32 * 2040);
        assert_eq!(body_offset(33, 2040), 33 * 2040 - PERIOD);
        // Huge counts do not overflow and stay in the period.
        let at = body_offset(u64::MAX, PERIOD - 1);
        assert!(at < PERIOD);
        assert_eq!(
            at as u64,
            (u64::MAX % PERIOD as u64) * (PERIOD as u64 - 1) % PERIOD as u64
        );
    }

    fn mouse(id: u32, messages: u64) -> MouseRx {
        MouseRx {
            id,
            messages,
            ..MouseRx::default()
        }
    }

    #[test]
    fn a_mouse_is_broken_by_a_missing_cut_or_wrong_message() {
        let sent = BTreeMap::from([(1, 10), (2, 10), (3, 10)]);
        let all = [mouse(1, 10), mouse(2, 10), mouse(3, 10)];
        assert_eq!(
            tally(&all, &sent),
            Tally {
                sent: 30,
                received: 30,
                broken: 0
            }
        );
        let short = [mouse(1, 10), mouse(2, 9), mouse(3, 10)];
        assert_eq!(tally(&short, &sent).broken, 1);
        let mut cut = [mouse(1, 10), mouse(2, 10), mouse(3, 10)];
        cut[0].cut = true;
        cut[2].payload.mismatch_at = Some(7);
        assert_eq!(tally(&cut, &sent).broken, 2);
        let missing = [mouse(1, 10), mouse(2, 10)];
        let t = tally(&missing, &sent);
        assert_eq!((t.sent, t.received, t.broken), (30, 20, 1));
    }
}
