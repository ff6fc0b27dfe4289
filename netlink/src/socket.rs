//! Async netlink sockets: one request in flight per request socket, and
//! separate receive-only sockets for multicast notifications.
//!
//! Written on `netlink-sys` directly rather than through `netlink-proto`'s
//! `Connection` because we need (a) the raw bytes of every reply (fixtures,
//! extack), (b) ENOBUFS on a notification socket surfaced as an event rather
//! than swallowed, and (c) the request bytes kept to name the attribute an
//! extack offset points at.

use std::sync::atomic::{AtomicU32, Ordering};

use netlink_sys::{AsyncSocket, AsyncSocketExt, SocketAddr, TokioSocket};

use crate::error::{CodecError, Error, KernelError};
use crate::frame::{self, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP, NLMSG_OVERRUN};

/// How long one request may wait for the kernel's complete answer. Dumps
/// take RTNL and can be slow on a busy host, but never this slow; the
/// bound keeps a stuck socket from stalling the daemon's loop forever.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Receive buffer asked for on notification sockets: a driver rebuilding
/// every queue sends a burst of page-pool notifications (capped by
/// `net.core.rmem_max`; an overflow is still reported, never silent).
pub const NOTIFY_RCVBUF: usize = 1 << 20;

/// `NETLINK_ROUTE`.
pub const NETLINK_ROUTE: isize = 0;
/// `NETLINK_GENERIC`.
pub const NETLINK_GENERIC: isize = 16;

/// Everything the kernel sent back for one request, verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The request as sent.
    pub request: Vec<u8>,
    /// Every message with our sequence number, in order, including the
    /// terminating `NLMSG_DONE` or `NLMSG_ERROR`. Each element is a stream
    /// of one or more whole messages (what one received datagram held of
    /// ours): a dump of thousands of pools then costs one allocation per
    /// datagram rather than one per message. Read them with
    /// [`frame::split`].
    pub messages: Vec<Vec<u8>>,
}

/// What an exchange ended with.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// Replies (payloads of the data messages, headers included).
    Replies(Vec<frame::Msg<'a>>),
    /// The kernel refused (the replies before the error are dropped).
    Refused(KernelError),
}

impl Exchange {
    /// Sort the messages into replies or a refusal.
    pub fn outcome(&self) -> Result<Outcome<'_>, CodecError> {
        let mut replies = Vec::new();
        for m in &self.messages {
            for msg in frame::split(m) {
                let msg = msg?;
                match msg.header.kind {
                    NLMSG_ERROR => {
                        if let Some(e) = frame::parse_error(&msg.header, msg.payload)? {
                            return Ok(Outcome::Refused(e));
                        }
                    }
                    NLMSG_DONE => {
                        if let Some(e) = frame::parse_done(&msg.header, msg.payload)? {
                            return Ok(Outcome::Refused(e));
                        }
                    }
                    NLMSG_NOOP | NLMSG_OVERRUN => {}
                    _ => replies.push(msg),
                }
            }
        }
        Ok(Outcome::Replies(replies))
    }

    /// The kernel flagged the dump inconsistent (`NLM_F_DUMP_INTR`: the
    /// set changed while it was being walked); the caller should re-dump.
    #[must_use]
    pub fn interrupted(&self) -> bool {
        self.messages.iter().any(|m| {
            frame::split(m)
                .filter_map(Result::ok)
                .any(|msg| msg.header.flags & frame::NLM_F_DUMP_INTR != 0)
        })
    }

    /// All messages concatenated: the on-disk fixture format.
    #[must_use]
    pub fn reply_bytes(&self) -> Vec<u8> {
        self.messages.concat()
    }

    /// Rebuild from fixture bytes (a stream of messages).
    pub fn from_reply_bytes(request: Vec<u8>, bytes: &[u8]) -> Result<Self, CodecError> {
        let messages = frame::split(bytes)
            .map(|m| m.map(|m| m.bytes.to_vec()))
            .collect::<Result<_, _>>()?;
        Ok(Self { request, messages })
    }
}

/// A request socket for one netlink protocol.
pub struct RequestSocket {
    name: &'static str,
    sock: tokio::sync::Mutex<TokioSocket>,
    seq: AtomicU32,
}

fn open(proto: isize, name: &'static str) -> Result<TokioSocket, Error> {
    let wrap = |source| Error::OpenSocket {
        family: name,
        source,
    };
    let mut s = TokioSocket::new(proto).map_err(wrap)?;
    s.socket_mut().bind_auto().map_err(wrap)?;
    // Extended acks carry the kernel's reason; CAP_ACK keeps error replies
    // short (we keep our own copy of the request).
    s.socket_ref().set_ext_ack(true).map_err(wrap)?;
    s.socket_ref().set_cap_ack(true).map_err(wrap)?;
    Ok(s)
}

impl std::fmt::Debug for RequestSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestSocket")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for NotifySocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifySocket")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl RequestSocket {
    /// Open a request socket in the calling thread's network namespace.
    pub fn open(proto: isize, name: &'static str) -> Result<Self, Error> {
        let sock = open(proto, name)?;
        sock.socket_ref()
            .connect(&SocketAddr::new(0, 0))
            .map_err(|source| Error::OpenSocket {
                family: name,
                source,
            })?;
        Ok(Self {
            name,
            sock: tokio::sync::Mutex::new(sock),
            seq: AtomicU32::new(1),
        })
    }

    /// Send one request and collect every message answering it.
    ///
    /// `payload` is what follows the `nlmsghdr`. A dump (`NLM_F_DUMP`) ends
    /// at `NLMSG_DONE`; anything else is sent with `NLM_F_ACK` and ends at
    /// the ack or error.
    pub async fn exchange(&self, kind: u16, flags: u16, payload: &[u8]) -> Result<Exchange, Error> {
        let dump = flags & frame::NLM_F_DUMP == frame::NLM_F_DUMP;
        let flags = frame::NLM_F_REQUEST | flags | if dump { 0 } else { frame::NLM_F_ACK };
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let request = frame::request(kind, flags, seq, payload);
        let sock = self.sock.lock().await;
        match tokio::time::timeout(REQUEST_TIMEOUT, collect(&sock, &request, seq, self.name)).await
        {
            Ok(r) => r.map(|messages| Exchange { request, messages }),
            Err(_) => Err(Error::Io {
                family: self.name,
                source: std::io::Error::from(std::io::ErrorKind::TimedOut),
            }),
        }
    }

    /// Make `mut` access for socket options (e.g. strict checking).
    pub async fn with_socket<R>(&self, f: impl FnOnce(&mut TokioSocket) -> R) -> R {
        let mut s = self.sock.lock().await;
        f(&mut s)
    }
}

/// Send `request` and gather the messages with sequence number `seq` up to
/// and including the terminating `NLMSG_DONE` / `NLMSG_ERROR`.
async fn collect(
    sock: &TokioSocket,
    request: &[u8],
    seq: u32,
    name: &'static str,
) -> Result<Vec<Vec<u8>>, Error> {
    let io_err = |source| Error::Io {
        family: name,
        source,
    };
    sock.send(request).await.map_err(io_err)?;
    let mut messages = Vec::new();
    loop {
        let (mut buf, _addr) = sock.recv_from_full().await.map_err(io_err)?;
        // Where our messages sit in the datagram (offset, aligned length),
        // and whether anything else (replies to an earlier, abandoned
        // request whose future was dropped mid-dump or timed out) is mixed
        // in and must be skipped.
        let mut ours: Vec<(usize, usize)> = Vec::new();
        let mut foreign = false;
        let mut done = false;
        for m in frame::split(&buf) {
            let m = m.map_err(|source| Error::Decode { op: name, source })?;
            if m.header.seq != seq {
                foreign = true;
                continue;
            }
            let at = m.bytes.as_ptr().addr() - buf.as_ptr().addr();
            ours.push((at, crate::attr::align(m.bytes.len())));
            // A do request ends at its ack (or error); a dump at DONE (or
            // an error when the dump could not start).
            if matches!(m.header.kind, NLMSG_DONE | NLMSG_ERROR) {
                done = true;
                break;
            }
        }
        if !foreign && let Some(&(at, len)) = ours.last() {
            // The usual case: the datagram is all ours; keep it as it is
            // (no copy, no allocation per message).
            buf.truncate((at + len).min(buf.len()));
            messages.push(buf);
        } else if !ours.is_empty() {
            let mut kept = Vec::with_capacity(ours.iter().map(|(_, l)| l).sum());
            for (at, len) in ours {
                let part = buf.get(at..(at + len).min(buf.len())).unwrap_or_default();
                kept.extend_from_slice(part);
                // Keep the next message 4-byte aligned, as in the datagram.
                kept.resize(crate::attr::align(kept.len()), 0);
            }
            messages.push(kept);
        }
        if done {
            return Ok(messages);
        }
    }
}

/// What a notification socket delivered.
#[derive(Debug)]
pub enum Received {
    /// One datagram's messages (raw).
    Messages(Vec<Vec<u8>>),
    /// The socket buffer overflowed: notifications were lost.
    Overflow,
}

/// A receive-only socket subscribed to multicast groups.
pub struct NotifySocket {
    name: &'static str,
    sock: TokioSocket,
}

impl NotifySocket {
    /// Open in the calling thread's network namespace and join `groups`.
    pub fn open(proto: isize, name: &'static str, groups: &[u32]) -> Result<Self, Error> {
        let sock = open(proto, name)?;
        for g in groups {
            sock.socket_ref()
                .add_membership(*g)
                .map_err(|source| Error::OpenSocket {
                    family: name,
                    source,
                })?;
        }
        if let Err(e) = sock.socket_ref().set_rx_buf_sz(NOTIFY_RCVBUF) {
            tracing::debug!(socket = name, error = %e, "could not enlarge the receive buffer");
        }
        Ok(Self { name, sock })
    }

    /// Set `SO_RCVBUF` (the kernel doubles it and enforces a minimum).
    pub fn set_rx_buf(&self, bytes: usize) -> Result<(), Error> {
        self.sock
            .socket_ref()
            .set_rx_buf_sz(bytes)
            .map_err(|source| Error::OpenSocket {
                family: self.name,
                source,
            })
    }

    /// The socket's name (for overflow events).
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Wait for the next datagram.
    pub async fn recv(&mut self) -> Result<Received, Error> {
        match self.sock.recv_from_full().await {
            Ok((buf, _)) => {
                let msgs = frame::split(&buf)
                    .filter_map(Result::ok)
                    .map(|m| m.bytes.to_vec())
                    .collect();
                Ok(Received::Messages(msgs))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(Received::Overflow),
            Err(source) => Err(Error::Io {
                family: self.name,
                source,
            }),
        }
    }
}
