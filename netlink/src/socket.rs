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

/// Receive buffer of every socket, allocated once and reused for every
/// datagram. Offering the kernel a large buffer also makes it fill dump
/// datagrams up to its own cap (~32 KiB: it sizes them by the largest read
/// it has seen) rather than one page each. No reply or notification to
/// the requests made here comes near this size (one attribute is at most
/// 64 KiB); pages the kernel never writes are never touched.
pub const RECV_BUF: usize = 256 * 1024;

/// `NETLINK_ROUTE`.
pub const NETLINK_ROUTE: isize = 0;
/// `NETLINK_GENERIC`.
pub const NETLINK_GENERIC: isize = 16;

/// Everything the kernel sent back for one request, verbatim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exchange {
    /// The request as sent.
    pub request: Vec<u8>,
    /// Every message with our sequence number, in order, including the
    /// terminating `NLMSG_DONE` or `NLMSG_ERROR`. Each element is a stream
    /// of one or more whole, 4-byte aligned messages (a received exchange
    /// has one element holding all of them: a dump of thousands of pools
    /// costs a few allocations, not one per datagram or message). Read
    /// them with [`frame::split`].
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
        Ok(
            match self.for_each_reply(|m| {
                replies.push(m);
                Ok::<_, CodecError>(())
            })? {
                Some(e) => Outcome::Refused(e),
                None => Outcome::Replies(replies),
            },
        )
    }

    /// The kernel's refusal, if the exchange holds one (an `NLMSG_ERROR`
    /// with a non-zero error, or a `NLMSG_DONE` carrying one). Checks the
    /// framing of every message on the way.
    pub fn refusal(&self) -> Result<Option<KernelError>, CodecError> {
        self.for_each_reply(|_| Ok::<_, CodecError>(()))
    }

    /// Every data message (headers included), in order, to `f`, in one
    /// walk over the exchange. A refusal ends the walk: `Ok(Some(e))`,
    /// after `f` has seen the replies before it (a caller that keeps
    /// replies drops them). `f`'s first error, or a framing error, ends it
    /// too.
    pub fn for_each_reply<'a, E: From<CodecError>>(
        &'a self,
        mut f: impl FnMut(frame::Msg<'a>) -> Result<(), E>,
    ) -> Result<Option<KernelError>, E> {
        for m in &self.messages {
            for msg in frame::split(m) {
                let msg = msg?;
                let refused = match msg.header.kind {
                    NLMSG_ERROR => frame::parse_error(&msg.header, msg.payload)?,
                    NLMSG_DONE => frame::parse_done(&msg.header, msg.payload)?,
                    NLMSG_NOOP | NLMSG_OVERRUN => None,
                    _ => {
                        f(msg)?;
                        None
                    }
                };
                if refused.is_some() {
                    return Ok(refused);
                }
            }
        }
        Ok(None)
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
    conn: tokio::sync::Mutex<Conn>,
    seq: AtomicU32,
}

/// The socket and its receive buffer, reused across requests (one
/// request in flight at a time: both live behind the same lock).
struct Conn {
    sock: TokioSocket,
    rx: Vec<u8>,
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

/// Receive one datagram into `rx` (cleared first; its capacity is the
/// most that is read). `Ok(false)`: the datagram filled the buffer, so it
/// may have been cut short (netlink truncates silently).
async fn recv_datagram(sock: &TokioSocket, rx: &mut Vec<u8>) -> std::io::Result<bool> {
    rx.clear();
    let cap = rx.capacity();
    sock.recv(rx).await?;
    Ok(rx.len() < cap)
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
            conn: tokio::sync::Mutex::new(Conn {
                sock,
                rx: Vec::with_capacity(RECV_BUF),
            }),
            seq: AtomicU32::new(1),
        })
    }

    /// Send one request and collect every message answering it.
    ///
    /// `payload` is what follows the `nlmsghdr`. A dump (`NLM_F_DUMP`) ends
    /// at `NLMSG_DONE`; anything else is sent with `NLM_F_ACK` and ends at
    /// the ack or error.
    pub async fn exchange(&self, kind: u16, flags: u16, payload: &[u8]) -> Result<Exchange, Error> {
        let mut ex = Exchange::default();
        self.exchange_into(kind, flags, payload, &mut ex).await?;
        Ok(ex)
    }

    /// [`RequestSocket::exchange`] into `ex`, reusing its buffers: a pass
    /// that makes the same requests every few seconds allocates nothing
    /// for them once the buffers have grown to the largest answer. On an
    /// error `ex` holds no reply.
    pub async fn exchange_into(
        &self,
        kind: u16,
        flags: u16,
        payload: &[u8],
        ex: &mut Exchange,
    ) -> Result<(), Error> {
        let dump = flags & frame::NLM_F_DUMP == frame::NLM_F_DUMP;
        let flags = frame::NLM_F_REQUEST | flags | if dump { 0 } else { frame::NLM_F_ACK };
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        ex.request.clear();
        frame::request_into(&mut ex.request, kind, flags, seq, payload);
        // The reply stream's buffer, taken out and put back filled (or
        // empty on an error), so its capacity carries over.
        let mut out = ex.messages.pop().unwrap_or_default();
        ex.messages.clear();
        out.clear();
        let mut conn = self.conn.lock().await;
        let got = tokio::time::timeout(
            REQUEST_TIMEOUT,
            collect(&mut conn, &ex.request, seq, self.name, &mut out),
        )
        .await
        .map_err(|_| Error::Io {
            family: self.name,
            source: std::io::Error::from(std::io::ErrorKind::TimedOut),
        })
        .and_then(|r| r);
        let whole = match got {
            Ok(w) => w,
            Err(e) => {
                out.clear();
                ex.messages.push(out);
                return Err(e);
            }
        };
        if whole {
            ex.messages.push(out);
            return Ok(());
        }
        out.clear();
        ex.messages.push(out);
        // Never expected (see RECV_BUF); should it happen, fail this
        // request and make room so the next one fits.
        let need = conn.rx.capacity() * 2;
        conn.rx = Vec::with_capacity(need);
        Err(Error::Io {
            family: self.name,
            source: std::io::Error::other(
                "a reply datagram filled the receive buffer (may be cut short)",
            ),
        })
    }

    /// Make `mut` access for socket options (e.g. strict checking).
    pub async fn with_socket<R>(&self, f: impl FnOnce(&mut TokioSocket) -> R) -> R {
        let mut c = self.conn.lock().await;
        f(&mut c.sock)
    }
}

/// Send `request` and gather the messages with sequence number `seq` up to
/// and including the terminating `NLMSG_DONE` / `NLMSG_ERROR` into `out`,
/// as one stream of whole, 4-byte aligned messages, receiving every
/// datagram into the connection's one buffer and copying only our
/// messages out (no allocation per datagram or per message). `Ok(false)`:
/// a datagram filled the receive buffer, so it may have been cut short.
async fn collect(
    conn: &mut Conn,
    request: &[u8],
    seq: u32,
    name: &'static str,
    out: &mut Vec<u8>,
) -> Result<bool, Error> {
    let io_err = |source| Error::Io {
        family: name,
        source,
    };
    conn.sock.send(request).await.map_err(io_err)?;
    loop {
        let whole = recv_datagram(&conn.sock, &mut conn.rx)
            .await
            .map_err(io_err)?;
        if !whole {
            return Ok(false);
        }
        let buf = conn.rx.as_slice();
        let mut done = false;
        // Replies to an earlier, abandoned request (whose future was
        // dropped mid-dump or timed out) may be mixed in: skip them.
        for m in frame::split(buf) {
            let m = m.map_err(|source| Error::Decode { op: name, source })?;
            if m.header.seq != seq {
                continue;
            }
            let at = m.bytes.as_ptr().addr() - buf.as_ptr().addr();
            let end = (at + crate::attr::align(m.bytes.len())).min(buf.len());
            // Keep every message 4-byte aligned, as in the datagram.
            out.resize(crate::attr::align(out.len()), 0);
            out.extend_from_slice(buf.get(at..end).unwrap_or_default());
            // A do request ends at its ack (or error); a dump at DONE (or
            // an error when the dump could not start).
            if matches!(m.header.kind, NLMSG_DONE | NLMSG_ERROR) {
                done = true;
                break;
            }
        }
        if done {
            return Ok(true);
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
    rx: Vec<u8>,
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
        Ok(Self {
            name,
            sock,
            rx: Vec::with_capacity(RECV_BUF),
        })
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
        match recv_datagram(&self.sock, &mut self.rx).await {
            // A notification datagram that filled the buffer may have lost
            // its tail: as good as lost, so report it like an overflow (the
            // caller resyncs) and make room for the next one.
            Ok(false) => {
                let need = self.rx.capacity() * 2;
                self.rx = Vec::with_capacity(need);
                Ok(Received::Overflow)
            }
            Ok(true) => {
                let msgs = frame::split(&self.rx)
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
