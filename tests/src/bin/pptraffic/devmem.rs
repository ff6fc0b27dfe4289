//! `--devmem IFNAME`: the streams are received through devmem TCP, the
//! kernel's dma-buf memory provider, as NCCL's devmem transport does.
//!
//! Set-up ([`Binding::bind`], in the receiving namespace): a memfd of
//! `--devmem-mb`, sealed against shrinking, becomes a dma-buf through
//! `/dev/udmabuf`; the netdev family's `bind-rx` binds it to RX queue
//! `--devmem-queue` of IFNAME. The binding lasts as long as the netlink
//! socket that made it, so [`Binding`] keeps that socket open until the
//! receivers are done. The device must have header split on (`ethtool -G
//! IFNAME tcp-data-split on hds-thresh 0`) and the flow must reach that
//! queue (ppsim: its `steer` rule).
//!
//! Receiving ([`DevmemRx::read`]): `recvmsg(MSG_SOCK_DEVMEM)`. A payload
//! the NIC put in the dma-buf is not copied: it comes as an
//! `SCM_DEVMEM_DMABUF` control message (offset into the dma-buf, size,
//! token); bytes the kernel did put in host memory (an skb's linear part)
//! are copied into the buffer as usual, each run announced by an
//! `SCM_DEVMEM_LINEAR` message. The reader puts the stream back in order,
//! taking each fragment's bytes from the memfd at its offset (the pages
//! the "NIC" wrote), so `--verify` checks what went through the provider.
//! Each fragment's token is returned with `SO_DEVMEM_DONTNEED`, in batches
//! of `--devmem-batch` (at most the kernel's 128 per call), the rest at
//! the end of the stream: the netmems go back to the page pool only then.
//! With `--devmem-hold N` (`--pattern drain`) a receiver keeps a drain's
//! tokens until N more drains have ended, then returns them all at once,
//! call after call ([`DevmemRx::drained`]): as NCCL returns a chunk's
//! tokens once the GPU consumed it, with up to N later chunks in flight
//! (its pipeline's steps). The returns come to the pool in one burst,
//! and N drains' buffers stay out of it meanwhile (0: a drain's tokens go
//! back when it ends). Each call's time is counted
//! (`dontneed_ns`, `dontneed_max_ns`: under the testbed's `--icount` a
//! guest nanosecond is a guest instruction): what the pool's recycling
//! or the provider's `gen_pool_free` costs the receiving thread.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use netlink::socket::{NETLINK_GENERIC, RequestSocket};
use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use serde::Serialize;

use crate::Res;

/// `MSG_SOCK_DEVMEM` (include/linux/socket.h).
const MSG_SOCK_DEVMEM: libc::c_int = 0x0200_0000;
/// `SO_DEVMEM_LINEAR`, `SO_DEVMEM_DMABUF`, `SO_DEVMEM_DONTNEED`
/// (include/uapi/asm-generic/socket.h; the cmsg types are the same).
const SCM_DEVMEM_LINEAR: libc::c_int = 78;
const SCM_DEVMEM_DMABUF: libc::c_int = 79;
const SO_DEVMEM_DONTNEED: libc::c_int = 80;
/// The most tokens one `SO_DEVMEM_DONTNEED` takes (net/core/sock.c
/// `MAX_DONTNEED_TOKENS`).
pub const MAX_BATCH: usize = 128;
/// `UDMABUF_CREATE`: `_IOW('u', 0x42, struct udmabuf_create)`.
const UDMABUF_CREATE: libc::c_ulong = 0x4018_7542;
const UDMABUF_FLAGS_CLOEXEC: u32 = 1;
/// netdev family: `NETDEV_CMD_BIND_RX`, `NETDEV_A_DMABUF_*`,
/// `NETDEV_A_QUEUE_*`, `NETDEV_QUEUE_TYPE_RX`.
const NETDEV_A_DMABUF_IFINDEX: u16 = 1;
const NETDEV_A_DMABUF_QUEUES: u16 = 2;
const NETDEV_A_DMABUF_FD: u16 = 3;
const NETDEV_A_DMABUF_ID: u16 = 4;
const NETDEV_A_QUEUE_ID: u16 = 1;
const NETDEV_A_QUEUE_TYPE: u16 = 3;
const NETDEV_QUEUE_TYPE_RX: u32 = 0;
/// Bytes of one `struct dmabuf_cmsg`.
const DMABUF_CMSG_LEN: usize = 24;

/// `struct udmabuf_create`.
#[repr(C)]
struct UdmabufCreate {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}

/// `struct dmabuf_token`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct DmabufToken {
    token_start: u32,
    token_count: u32,
}

/// A dma-buf bound to an RX queue; dropping it unbinds (the netlink
/// socket closes).
#[derive(Debug)]
pub struct Binding {
    /// The memfd behind the dma-buf: where the fragments' bytes are read.
    pub memfd: Arc<File>,
    /// The binding's id (`NETDEV_A_DMABUF_ID`, the page pool's `dmabuf`).
    pub id: u32,
    _dmabuf: OwnedFd,
    _sock: RequestSocket,
    _rt: tokio::runtime::Runtime,
}

impl Binding {
    /// A `mb` MiB udmabuf bound to RX queue `queue` of `ifname` (in the
    /// calling thread's netns).
    pub fn bind(ifname: &str, queue: u32, mb: u64) -> Res<Self> {
        let size = mb << 20;
        let fd = memfd_create(
            "pptraffic-devmem",
            MFdFlags::MFD_ALLOW_SEALING | MFdFlags::MFD_CLOEXEC,
        )
        .map_err(|e| format!("memfd_create: {e}"))?;
        let memfd = File::from(fd);
        memfd.set_len(size)?;
        fcntl(
            memfd.as_fd(),
            FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK),
        )
        .map_err(|e| format!("sealing the memfd: {e}"))?;
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/udmabuf")
            .map_err(|e| format!("/dev/udmabuf: {e}"))?;
        let create = UdmabufCreate {
            memfd: u32::try_from(memfd.as_raw_fd())?,
            flags: UDMABUF_FLAGS_CLOEXEC,
            offset: 0,
            size,
        };
        // SAFETY: UDMABUF_CREATE reads one struct udmabuf_create, which
        // `create` is (repr(C), the uapi layout), alive for the call.
        let raw = unsafe { libc::ioctl(dev.as_raw_fd(), UDMABUF_CREATE, &raw const create) };
        if raw < 0 {
            return Err(format!("UDMABUF_CREATE: {}", std::io::Error::last_os_error()).into());
        }
        // SAFETY: on success the ioctl returns a new file descriptor that
        // nothing else owns.
        let dmabuf = unsafe { OwnedFd::from_raw_fd(raw) };
        let ifindex =
            nix::net::if_::if_nametoindex(ifname).map_err(|e| format!("{ifname}: {e}"))?;

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (sock, id) = rt.block_on(async {
            let client = netlink::Client::connect().await?;
            let family = client
                .netdev_family()
                .ok_or("the kernel has no netdev genl family")?
                .clone();
            // The binding belongs to the socket that asked for it.
            let sock = RequestSocket::open(NETLINK_GENERIC, "netdev-bind")?;
            let mut q = netlink::attr::Writer::new();
            q.u32(NETDEV_A_QUEUE_ID, queue);
            q.u32(NETDEV_A_QUEUE_TYPE, NETDEV_QUEUE_TYPE_RX);
            let mut w = netlink::attr::Writer::new();
            w.u32(NETDEV_A_DMABUF_IFINDEX, ifindex);
            w.u32(NETDEV_A_DMABUF_FD, u32::try_from(dmabuf.as_raw_fd())?);
            w.nest(NETDEV_A_DMABUF_QUEUES, q);
            let payload =
                netlink::frame::genl_payload(netlink::netdev::cmd::BIND_RX, 1, &w.into_bytes());
            let ex = sock.exchange(family.id, 0, &payload).await?;
            let id = match ex.outcome()? {
                netlink::socket::Outcome::Refused(e) => {
                    return Err(format!("bind-rx {ifname} queue {queue}: {e}").into());
                }
                netlink::socket::Outcome::Replies(msgs) => msgs
                    .iter()
                    .find_map(|m| {
                        let (_, _, attrs) = netlink::frame::genl_split(m.payload).ok()?;
                        netlink::attr::Attrs::new(attrs)
                            .filter_map(Result::ok)
                            .find(|a| a.kind == NETDEV_A_DMABUF_ID)
                            .and_then(|a| a.u32("dmabuf-id").ok())
                    })
                    .ok_or("bind-rx: no dmabuf id in the reply")?,
            };
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((sock, id))
        })?;
        Ok(Self {
            memfd: Arc::new(memfd),
            id,
            _dmabuf: dmabuf,
            _sock: sock,
            _rt: rt,
        })
    }
}

/// What a devmem receiver saw, per stream.
#[derive(Debug, Default, Clone, Serialize)]
pub struct DevmemStats {
    /// Payload bytes that came in the dma-buf (`SCM_DEVMEM_DMABUF`).
    pub dmabuf_bytes: u64,
    /// Fragments (tokens) received, and returned with `SO_DEVMEM_DONTNEED`.
    pub frags: u64,
    pub tokens_returned: u64,
    pub dontneed_calls: u64,
    /// Time in `SO_DEVMEM_DONTNEED` calls, in all and the longest call.
    pub dontneed_ns: u64,
    pub dontneed_max_ns: u64,
    /// Bytes copied from host memory (`SCM_DEVMEM_LINEAR`).
    pub linear_bytes: u64,
    /// Bytes of readable skbs (not through the provider: a flow that
    /// missed the bound queue).
    pub readable_bytes: u64,
}

/// One stream's devmem receiving side.
#[derive(Debug)]
pub struct DevmemRx {
    memfd: Arc<File>,
    batch: usize,
    /// `--devmem-hold N`: tokens wait for [`DevmemRx::drained`], which
    /// returns those of the drain N drains back.
    hold: Option<usize>,
    pending: Vec<DmabufToken>,
    /// The held drains' tokens, oldest first.
    held: std::collections::VecDeque<Vec<DmabufToken>>,
    scratch: Vec<u8>,
    cmsg: Vec<u8>,
    pub stats: DevmemStats,
}

impl DevmemRx {
    pub fn new(memfd: Arc<File>, batch: usize, hold: Option<usize>, read_bytes: usize) -> Self {
        Self {
            memfd,
            batch: batch.clamp(1, MAX_BATCH),
            hold,
            pending: Vec::with_capacity(MAX_BATCH),
            held: std::collections::VecDeque::new(),
            scratch: vec![0; read_bytes.max(1)],
            cmsg: vec![0; 64 * 1024],
            stats: DevmemStats::default(),
        }
    }

    /// One `recvmsg(MSG_SOCK_DEVMEM)` (blocking or not as the socket is):
    /// the stream's next bytes into `buf`, in order, as `read` gives them
    /// (`Ok(0)` at EOF). The fragments' tokens go back in batches.
    pub fn read(&mut self, s: &impl AsRawFd, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min(self.scratch.len());
        // (type, dma-buf offset, size, token) of each devmem message.
        let mut parts: Vec<(libc::c_int, u64, usize, u32)> = Vec::new();
        let n = {
            let mut iov = [IoSliceMut::new(&mut self.scratch[..want])];
            let flags = MsgFlags::from_bits_retain(MSG_SOCK_DEVMEM);
            let msg = recvmsg::<()>(
                s.as_raw_fd(),
                &mut iov,
                Some(self.cmsg.as_mut_slice()),
                flags,
            )?;
            if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
                return Err(std::io::Error::other("devmem: control messages truncated"));
            }
            for c in msg.cmsgs()? {
                let ControlMessageOwned::Unknown(u) = c else {
                    continue;
                };
                let d = &u.data_bytes;
                if u.cmsg_header.cmsg_level != libc::SOL_SOCKET || d.len() < DMABUF_CMSG_LEN {
                    continue;
                }
                let word = |r: std::ops::Range<usize>| d.get(r).unwrap_or(&[]).to_vec();
                let off = u64::from_ne_bytes(word(0..8).try_into().map_err(|_| short())?);
                let size = u32::from_ne_bytes(word(8..12).try_into().map_err(|_| short())?);
                let token = u32::from_ne_bytes(word(12..16).try_into().map_err(|_| short())?);
                parts.push((u.cmsg_header.cmsg_type, off, size as usize, token));
            }
            msg.bytes
        };
        let mut pos = 0usize;
        let mut lin = 0usize;
        let mut tokens = Vec::new();
        let mut devmem = false;
        for (kind, off, size, token) in parts {
            if pos + size > buf.len() {
                return Err(std::io::Error::other("devmem: more bytes than asked for"));
            }
            match kind {
                SCM_DEVMEM_LINEAR => {
                    devmem = true;
                    let src = self
                        .scratch
                        .get(lin..lin + size)
                        .ok_or_else(|| std::io::Error::other("devmem: linear run past the data"))?;
                    buf[pos..pos + size].copy_from_slice(src);
                    lin += size;
                    self.stats.linear_bytes += size as u64;
                }
                SCM_DEVMEM_DMABUF => {
                    devmem = true;
                    self.memfd.read_exact_at(&mut buf[pos..pos + size], off)?;
                    self.stats.dmabuf_bytes += size as u64;
                    self.stats.frags += 1;
                    tokens.push(token);
                }
                _ => continue,
            }
            pos += size;
        }
        if !devmem {
            // Readable skbs: copied as by read(2).
            buf[..n].copy_from_slice(&self.scratch[..n]);
            self.stats.readable_bytes += n as u64;
            pos = n;
        }
        for t in tokens {
            self.pending.push(DmabufToken {
                token_start: t,
                token_count: 1,
            });
            if self.hold.is_none() && self.pending.len() >= self.batch {
                let p = std::mem::take(&mut self.pending);
                self.give_back(s, &p)?;
            }
        }
        Ok(pos)
    }

    /// A drain ended: with `--devmem-hold N`, its tokens join the held
    /// drains, and those of the drain N back go back to the kernel.
    pub fn drained(&mut self, s: &impl AsRawFd) -> std::io::Result<()> {
        let Some(n) = self.hold else {
            return Ok(());
        };
        self.held.push_back(std::mem::take(&mut self.pending));
        while self.held.len() > n {
            if let Some(t) = self.held.pop_front() {
                self.give_back(s, &t)?;
            }
        }
        Ok(())
    }

    /// The stream ended: every token still out goes back.
    pub fn finish(&mut self, s: &impl AsRawFd) -> std::io::Result<()> {
        while let Some(t) = self.held.pop_front() {
            self.give_back(s, &t)?;
        }
        let p = std::mem::take(&mut self.pending);
        self.give_back(s, &p)
    }

    /// Return `tokens`, `--devmem-batch` per `SO_DEVMEM_DONTNEED` call,
    /// each call timed.
    fn give_back(&mut self, s: &impl AsRawFd, tokens: &[DmabufToken]) -> std::io::Result<()> {
        for chunk in tokens.chunks(self.batch) {
            let len = libc::socklen_t::try_from(std::mem::size_of_val(chunk))
                .map_err(std::io::Error::other)?;
            let t0 = std::time::Instant::now();
            // SAFETY: `chunk` is a live array of `struct dmabuf_token`
            // (repr(C), the uapi layout) of `len` bytes; the kernel only
            // reads it.
            let r = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    SO_DEVMEM_DONTNEED,
                    chunk.as_ptr().cast(),
                    len,
                )
            };
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let freed = u64::try_from(r).unwrap_or(0);
            if freed != chunk.len() as u64 {
                return Err(std::io::Error::other(format!(
                    "SO_DEVMEM_DONTNEED returned {freed} of {} tokens",
                    chunk.len()
                )));
            }
            self.stats.tokens_returned += freed;
            self.stats.dontneed_calls += 1;
            self.stats.dontneed_ns += ns;
            self.stats.dontneed_max_ns = self.stats.dontneed_max_ns.max(ns);
        }
        Ok(())
    }
}

fn short() -> std::io::Error {
    std::io::Error::other("devmem: short control message")
}
