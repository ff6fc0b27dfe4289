//! rtnetlink links: the `RTM_NEWLINK` attributes pptune reads, decoded by
//! hand (checked against `netlink-packet-route` on recorded dumps).

use crate::attr::Attrs;
use crate::error::CodecError;

pub const RTM_NEWLINK: u16 = 16;
pub const RTM_DELLINK: u16 = 17;
pub const RTM_GETLINK: u16 = 18;
const IFINFOMSG_LEN: usize = 16;
const IFF_UP: u32 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_MASTER: u16 = 10;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_STATS64: u16 = 23;
const IFLA_NUM_TX_QUEUES: u16 = 31;
const IFLA_NUM_RX_QUEUES: u16 = 32;
const IFLA_PERM_ADDRESS: u16 = 54;
const IFLA_PARENT_DEV_NAME: u16 = 56;
const IFLA_PARENT_DEV_BUS_NAME: u16 = 57;
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

impl OperState {
    /// An `IF_OPER_*` value; an unknown one is [`OperState::Unknown`].
    #[must_use]
    pub fn from_kernel(v: u8) -> Self {
        match v {
            1 => Self::NotPresent,
            2 => Self::Down,
            3 => Self::LowerLayerDown,
            4 => Self::Testing,
            5 => Self::Dormant,
            6 => Self::Up,
            _ => Self::Unknown,
        }
    }
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

impl LinkStats64 {
    /// From a `struct rtnl_link_stats64` (u64s in host order). A shorter
    /// struct (an older kernel) reads as zero past its end, as
    /// `netlink-packet-route` did.
    fn parse(v: &[u8]) -> Self {
        let field = |i: usize| {
            v.get(i * 8..i * 8 + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_ne_bytes)
        };
        // rx_packets, tx_packets, rx_bytes, …, rx_dropped (6), …,
        // rx_fifo_errors (14), rx_missed_errors (15).
        Self {
            rx_packets: field(0),
            rx_bytes: field(2),
            rx_dropped: field(6),
            rx_fifo_errors: field(14),
            rx_missed_errors: field(15),
        }
    }
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
    ///
    /// Hand-written, reading only the attributes [`Link`] keeps (a link
    /// decode through `netlink-packet-route` parsed every attribute of
    /// every link, and formatted error context even on success: a sixth of
    /// the observe pass's own instructions). The attribute stream is still
    /// framed strictly: a truncated `ifinfomsg`, an attribute header
    /// pointing outside the message, or a kept attribute of the wrong size
    /// or encoding is an error; attributes it does not keep are skipped
    /// unread.
    pub fn parse(payload: &[u8]) -> Result<Self, CodecError> {
        let (hdr, attrs) =
            payload
                .split_first_chunk::<IFINFOMSG_LEN>()
                .ok_or(CodecError::Truncated {
                    what: "ifinfomsg",
                    need: IFINFOMSG_LEN,
                    have: payload.len(),
                })?;
        let word = |at: usize| u32::from_ne_bytes([hdr[at], hdr[at + 1], hdr[at + 2], hdr[at + 3]]);
        let mut l = Self {
            ifindex: word(4),
            admin_up: word(8) & IFF_UP != 0,
            ..Self::default()
        };
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                IFLA_IFNAME => l.name = a.string("IFLA_IFNAME")?,
                IFLA_MTU => l.mtu = Some(a.u32("IFLA_MTU")?),
                IFLA_MASTER => l.master = Some(a.u32("IFLA_MASTER")?),
                IFLA_OPERSTATE => l.oper_state = OperState::from_kernel(a.u8("IFLA_OPERSTATE")?),
                IFLA_LINKINFO => {
                    for i in a.nested() {
                        let i = i?;
                        if i.kind == IFLA_INFO_KIND {
                            l.kind = Some(i.string("IFLA_INFO_KIND")?);
                        }
                    }
                }
                IFLA_STATS64 => l.stats64 = Some(LinkStats64::parse(a.value)),
                IFLA_NUM_TX_QUEUES => l.num_tx_queues = Some(a.u32("IFLA_NUM_TX_QUEUES")?),
                IFLA_NUM_RX_QUEUES => l.num_rx_queues = Some(a.u32("IFLA_NUM_RX_QUEUES")?),
                IFLA_PERM_ADDRESS => l.perm_addr = Some(a.value.to_vec()),
                IFLA_PARENT_DEV_NAME => l.parent_dev = Some(a.string("IFLA_PARENT_DEV_NAME")?),
                IFLA_PARENT_DEV_BUS_NAME => {
                    l.parent_bus = Some(a.string("IFLA_PARENT_DEV_BUS_NAME")?);
                }
                _ => {}
            }
        }
        Ok(l)
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

/// An `RTM_GETLINK` dump request payload: an all-zero `ifinfomsg`
/// (AF_UNSPEC, every link).
pub const GETLINK_DUMP_PAYLOAD: [u8; IFINFOMSG_LEN] = [0; IFINFOMSG_LEN];
