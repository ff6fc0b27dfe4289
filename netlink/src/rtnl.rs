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
        let mut l = Self::default();
        l.parse_into(payload)?;
        Ok(l)
    }

    /// [`Link::parse`] into `self`, every field overwritten, reusing the
    /// buffers of its strings (a pass decodes the same links every few
    /// seconds). After an error `self` holds a partial decode.
    pub fn parse_into(&mut self, payload: &[u8]) -> Result<(), CodecError> {
        let (hdr, attrs) =
            payload
                .split_first_chunk::<IFINFOMSG_LEN>()
                .ok_or(CodecError::Truncated {
                    what: "ifinfomsg",
                    need: IFINFOMSG_LEN,
                    have: payload.len(),
                })?;
        let word = |at: usize| u32::from_ne_bytes([hdr[at], hdr[at + 1], hdr[at + 2], hdr[at + 3]]);
        self.ifindex = word(4);
        self.admin_up = word(8) & IFF_UP != 0;
        self.name.clear();
        self.oper_state = OperState::Unknown;
        self.master = None;
        self.mtu = None;
        self.num_rx_queues = None;
        self.num_tx_queues = None;
        self.stats64 = None;
        let (mut kind, mut parent_dev, mut parent_bus, mut perm) = (false, false, false, false);
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                IFLA_IFNAME => {
                    let v = a.str();
                    self.name.clear();
                    self.name.push_str(&v);
                }
                IFLA_MTU => self.mtu = Some(a.u32("IFLA_MTU")?),
                IFLA_MASTER => self.master = Some(a.u32("IFLA_MASTER")?),
                IFLA_OPERSTATE => {
                    self.oper_state = OperState::from_kernel(a.u8("IFLA_OPERSTATE")?);
                }
                IFLA_LINKINFO => {
                    for i in a.nested() {
                        let i = i?;
                        if i.kind == IFLA_INFO_KIND {
                            set_str(&mut self.kind, &i.str());
                            kind = true;
                        }
                    }
                }
                IFLA_STATS64 => self.stats64 = Some(LinkStats64::parse(a.value)),
                IFLA_NUM_TX_QUEUES => self.num_tx_queues = Some(a.u32("IFLA_NUM_TX_QUEUES")?),
                IFLA_NUM_RX_QUEUES => self.num_rx_queues = Some(a.u32("IFLA_NUM_RX_QUEUES")?),
                IFLA_PERM_ADDRESS => {
                    let v = self.perm_addr.get_or_insert_default();
                    v.clear();
                    v.extend_from_slice(a.value);
                    perm = true;
                }
                IFLA_PARENT_DEV_NAME => {
                    set_str(&mut self.parent_dev, &a.str());
                    parent_dev = true;
                }
                IFLA_PARENT_DEV_BUS_NAME => {
                    set_str(&mut self.parent_bus, &a.str());
                    parent_bus = true;
                }
                _ => {}
            }
        }
        for (seen, slot) in [
            (kind, &mut self.kind),
            (parent_dev, &mut self.parent_dev),
            (parent_bus, &mut self.parent_bus),
        ] {
            if !seen {
                *slot = None;
            }
        }
        if !perm {
            self.perm_addr = None;
        }
        Ok(())
    }

    /// The permanent MAC as lower-case hex with colons.
    #[must_use]
    pub fn perm_addr_string(&self) -> Option<String> {
        let mut s = String::new();
        self.write_perm_addr(&mut s).then_some(s)
    }

    /// [`Link::perm_addr_string`] written into `out` (cleared first,
    /// its buffer reused); `false`, with `out` empty, when there is none.
    pub fn write_perm_addr(&self, out: &mut String) -> bool {
        use std::fmt::Write as _;
        out.clear();
        let Some(a) = self.perm_addr.as_ref() else {
            return false;
        };
        if a.is_empty() || a.iter().all(|b| *b == 0) {
            return false;
        }
        for (i, b) in a.iter().enumerate() {
            let sep = if i == 0 { "" } else { ":" };
            // Writing to a String cannot fail.
            let _ = write!(out, "{sep}{b:02x}");
        }
        true
    }
}

/// Set an optional string to `v`, reusing the buffer it holds.
fn set_str(slot: &mut Option<String>, v: &str) {
    let s = slot.get_or_insert_default();
    s.clear();
    s.push_str(v);
}

/// An `RTM_GETLINK` dump request payload: an all-zero `ifinfomsg`
/// (AF_UNSPEC, every link).
pub const GETLINK_DUMP_PAYLOAD: [u8; IFINFOMSG_LEN] = [0; IFINFOMSG_LEN];
