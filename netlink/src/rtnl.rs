//! rtnetlink links, decoded with `netlink-packet-route`.

use netlink_packet_core::{Emitable, Parseable};
use netlink_packet_route::link::{
    InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage, State,
};

use crate::error::CodecError;

pub const RTM_NEWLINK: u16 = 16;
pub const RTM_DELLINK: u16 = 17;
pub const RTM_GETLINK: u16 = 18;
const IFINFOMSG_LEN: usize = 16;
/// `RTNLGRP_LINK`.
pub const RTNLGRP_LINK: u32 = 1;

/// `IF_OPER_*` (RFC 2863).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OperState {
    #[default]
    Unknown,
    NotPresent,
    Down,
    LowerLayerDown,
    Testing,
    Dormant,
    Up,
}

/// The link stats64 fields pptune reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats64 {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub rx_missed_errors: u64,
    pub rx_fifo_errors: u64,
}

/// One link as `RTM_NEWLINK` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Link {
    pub ifindex: u32,
    pub name: String,
    pub oper_state: OperState,
    /// `IFF_UP`.
    pub admin_up: bool,
    /// `IFLA_LINKINFO` / `IFLA_INFO_KIND` (`veth`, `netdevsim` …).
    pub kind: Option<String>,
    /// `IFLA_MASTER`.
    pub master: Option<u32>,
    pub mtu: Option<u32>,
    /// `IFLA_PARENT_DEV_NAME` (e.g. a PCI BDF).
    pub parent_dev: Option<String>,
    /// `IFLA_PARENT_DEV_BUS_NAME` (e.g. `pci`).
    pub parent_bus: Option<String>,
    /// `IFLA_PERM_ADDRESS`.
    pub perm_addr: Option<Vec<u8>>,
    /// `IFLA_NUM_RX_QUEUES`: allocated, not active.
    pub num_rx_queues: Option<u32>,
    pub num_tx_queues: Option<u32>,
    pub stats64: Option<LinkStats64>,
}

impl Link {
    /// Decode an `RTM_NEWLINK`/`RTM_DELLINK` payload.
    pub fn parse(payload: &[u8]) -> Result<Self, CodecError> {
        if payload.len() < IFINFOMSG_LEN {
            return Err(CodecError::Truncated {
                what: "ifinfomsg",
                need: IFINFOMSG_LEN,
                have: payload.len(),
            });
        }
        let msg = LinkMessage::parse(payload)
            .map_err(|e| CodecError::Unexpected(format!("link message: {e}")))?;
        Ok(Self::from_message(&msg))
    }

    fn from_message(msg: &LinkMessage) -> Self {
        let mut l = Self {
            ifindex: msg.header.index,
            admin_up: msg.header.flags.contains(LinkFlags::Up),
            ..Self::default()
        };
        for a in &msg.attributes {
            match a {
                LinkAttribute::IfName(n) => l.name.clone_from(n),
                LinkAttribute::OperState(s) => {
                    l.oper_state = match s {
                        State::NotPresent => OperState::NotPresent,
                        State::Down => OperState::Down,
                        State::LowerLayerDown => OperState::LowerLayerDown,
                        State::Testing => OperState::Testing,
                        State::Dormant => OperState::Dormant,
                        State::Up => OperState::Up,
                        _ => OperState::Unknown,
                    }
                }
                LinkAttribute::LinkInfo(infos) => {
                    for i in infos {
                        if let LinkInfo::Kind(k) = i {
                            l.kind = Some(kind_name(k));
                        }
                    }
                }
                LinkAttribute::Controller(m) => l.master = Some(*m),
                LinkAttribute::Mtu(m) => l.mtu = Some(*m),
                LinkAttribute::ParentDevName(p) => l.parent_dev = Some(p.clone()),
                LinkAttribute::ParentDevBusName(b) => l.parent_bus = Some(b.clone()),
                LinkAttribute::PermAddress(a) => l.perm_addr = Some(a.clone()),
                LinkAttribute::NumRxQueues(n) => l.num_rx_queues = Some(*n),
                LinkAttribute::NumTxQueues(n) => l.num_tx_queues = Some(*n),
                LinkAttribute::Stats64(s) => {
                    l.stats64 = Some(LinkStats64 {
                        rx_packets: s.rx_packets,
                        rx_bytes: s.rx_bytes,
                        rx_dropped: s.rx_dropped,
                        rx_missed_errors: s.rx_missed_errors,
                        rx_fifo_errors: s.rx_fifo_errors,
                    });
                }
                _ => {}
            }
        }
        l
    }

    /// The permanent MAC as lower-case hex with colons.
    #[must_use]
    pub fn perm_addr_string(&self) -> Option<String> {
        let a = self.perm_addr.as_ref()?;
        if a.is_empty() || a.iter().all(|b| *b == 0) {
            return None;
        }
        Some(
            a.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
        )
    }
}

fn kind_name(k: &InfoKind) -> String {
    k.to_string()
}

/// An `RTM_GETLINK` dump request payload (`ifinfomsg`, AF_UNSPEC).
#[must_use]
pub fn getlink_dump_payload() -> Vec<u8> {
    let msg = LinkMessage::default();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.emit(&mut buf);
    buf
}
