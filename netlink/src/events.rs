//! Multicast notifications as typed events.
//!
//! Three receive-only sockets (netdev `page-pool` + `mgmt`, ethtool
//! `monitor`, rtnetlink `RTNLGRP_LINK`), none of which ever carries a
//! request's replies: when one overflows (ENOBUFS) the loss is reported as
//! [`Event::Overflow`] and no dump is affected.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ctrl::Family;
use crate::error::{CodecError, Error};
use crate::ethtool::{Channels, EthtoolBody, EthtoolMessage, Rings, reply};
use crate::frame;
use crate::genl::GenlPayload;
use crate::netdev::{Dev, NetdevBody, NetdevMessage, PagePool, cmd};
use crate::rtnl::{self, Link};
use crate::socket::{NETLINK_GENERIC, NETLINK_ROUTE, NotifySocket, Received};

/// What happened to a page pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolChange {
    Added,
    /// Detached with pages in flight, or orphaned to loopback.
    Changed,
    Deleted,
}

/// A notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// netdev page-pool-{add,change,del}-ntf with the full pool state.
    PagePool { change: PoolChange, pool: PagePool },
    /// netdev dev-{add,del,change}-ntf.
    Dev { cmd: u8, dev: Dev },
    /// ethtool RINGS_NTF with the full ring state.
    Rings(Rings),
    /// ethtool CHANNELS_NTF with the full channel state.
    Channels(Channels),
    /// RTM_NEWLINK: a link appeared or changed (rename, up/down, MTU).
    LinkNew(Link),
    /// RTM_DELLINK.
    LinkDel(Link),
    /// A notification socket overflowed; events were lost: resync.
    Overflow { source: &'static str },
}

/// The notification sockets' names: the `source` of an
/// [`Event::Overflow`] (netdev, ethtool, rtnetlink link).
pub const NOTIFY_SOURCES: [&str; 3] = [
    "netdev notifications",
    "ethtool notifications",
    "link notifications",
];

/// Which socket a datagram came from, to decode it.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// netdev notifications with this family id.
    Netdev(u16),
    /// ethtool notifications with this family id.
    Ethtool(u16),
    Route,
}

/// Decode one notification message (whole netlink message bytes).
/// Messages of other types (other ethtool NTFs) give `Ok(None)`.
pub fn decode(source: Source, msg_bytes: &[u8]) -> Result<Option<Event>, CodecError> {
    let Some(msg) = frame::split(msg_bytes).next().transpose()? else {
        return Ok(None);
    };
    match source {
        Source::Netdev(id) if msg.header.kind == id => {
            let m = NetdevMessage::from_genl_bytes(msg.payload)?;
            let change = match m.cmd {
                cmd::PAGE_POOL_ADD_NTF => PoolChange::Added,
                cmd::PAGE_POOL_CHANGE_NTF => PoolChange::Changed,
                cmd::PAGE_POOL_DEL_NTF => PoolChange::Deleted,
                c => {
                    return Ok(match m.body {
                        NetdevBody::Dev(dev) => Some(Event::Dev { cmd: c, dev }),
                        _ => None,
                    });
                }
            };
            Ok(match m.body {
                NetdevBody::PagePool(pool) => Some(Event::PagePool { change, pool }),
                _ => None,
            })
        }
        Source::Ethtool(id) if msg.header.kind == id => {
            let (c, _, _) = frame::genl_split(msg.payload)?;
            if c != reply::RINGS_NTF && c != reply::CHANNELS_NTF {
                return Ok(None);
            }
            let m = EthtoolMessage::from_genl_bytes(msg.payload)?;
            Ok(match m.body {
                EthtoolBody::Rings(r) => Some(Event::Rings(r)),
                EthtoolBody::Channels(ch) => Some(Event::Channels(ch)),
                EthtoolBody::Linkmodes(_) | EthtoolBody::Other(_) => None,
            })
        }
        Source::Route => match msg.header.kind {
            rtnl::RTM_NEWLINK => Ok(Some(Event::LinkNew(Link::parse(msg.payload)?))),
            rtnl::RTM_DELLINK => Ok(Some(Event::LinkDel(Link::parse(msg.payload)?))),
            _ => Ok(None),
        },
        _ => Ok(None),
    }
}

/// The stream of notifications. Dropping it closes the sockets.
#[derive(Debug)]
pub struct Notifications {
    rx: mpsc::Receiver<Event>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Notifications {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Notifications {
    /// Open the sockets for whichever families exist; must run inside a
    /// tokio runtime, in the network namespace to watch.
    pub fn open(netdev: Option<&Family>, ethtool: Option<&Family>) -> Result<Self, Error> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let mut socks = Vec::new();
        if let Some(f) = netdev {
            let groups: Vec<u32> = [crate::netdev::GROUP_PAGE_POOL, crate::netdev::GROUP_MGMT]
                .iter()
                .filter_map(|g| f.group(g))
                .collect();
            socks.push((
                NotifySocket::open(NETLINK_GENERIC, NOTIFY_SOURCES[0], &groups)?,
                Source::Netdev(f.id),
            ));
        }
        if let Some(f) = ethtool {
            let groups: Vec<u32> = f.group(crate::ethtool::GROUP_MONITOR).into_iter().collect();
            socks.push((
                NotifySocket::open(NETLINK_GENERIC, NOTIFY_SOURCES[1], &groups)?,
                Source::Ethtool(f.id),
            ));
        }
        socks.push((
            NotifySocket::open(NETLINK_ROUTE, NOTIFY_SOURCES[2], &[rtnl::RTNLGRP_LINK])?,
            Source::Route,
        ));
        let tasks = socks
            .into_iter()
            .map(|(sock, source)| tokio::spawn(pump(sock, source, tx.clone())))
            .collect();
        Ok(Self { rx, tasks })
    }

    /// The next event; `None` once every socket has failed for good.
    pub async fn next(&mut self) -> Option<Event> {
        self.rx.recv().await
    }
}

/// Events buffered between the sockets and the consumer. Beyond this the
/// consumer is too slow, and the loss is reported like a socket overflow.
const QUEUE: usize = 4096;

async fn pump(mut sock: NotifySocket, source: Source, tx: mpsc::Sender<Event>) {
    let mut lost = false;
    loop {
        let events = match sock.recv().await {
            Ok(Received::Overflow) => vec![Event::Overflow {
                source: sock.name(),
            }],
            Ok(Received::Messages(msgs)) => msgs
                .iter()
                .filter_map(|m| match decode(source, m) {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(socket = sock.name(), error = %e, "undecodable notification");
                        None
                    }
                })
                .collect(),
            Err(e) => {
                tracing::warn!(socket = sock.name(), error = %e, "notification socket failed");
                return;
            }
        };
        for e in events {
            if lost {
                match tx.try_send(Event::Overflow {
                    source: sock.name(),
                }) {
                    Ok(()) => lost = false,
                    Err(mpsc::error::TrySendError::Full(_)) => continue,
                    Err(mpsc::error::TrySendError::Closed(_)) => return,
                }
            }
            match tx.try_send(e) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => lost = true,
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
    }
}
