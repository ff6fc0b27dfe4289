//! nlctrl (`GENL_ID_CTRL`): resolve a family's id, operations and multicast
//! groups.
//!
//! `netlink_packet_generic::ctrl` exists, but its parser fails the whole
//! reply on any attribute it does not know, so a newer kernel adding a
//! `CTRL_ATTR_*` would break family resolution. This codec skips unknown
//! attributes like every other codec here.

use crate::attr::{Attrs, RawAttr, Writer};
use crate::error::CodecError;
use crate::genl::GenlPayload;

/// `GENL_ID_CTRL`: nlctrl's fixed family id.
pub const GENL_ID_CTRL: u16 = 16;
pub const CTRL_CMD_GETFAMILY: u8 = 3;
pub const CTRL_CMD_NEWFAMILY: u8 = 1;

const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_VERSION: u16 = 3;
const CTRL_ATTR_HDRSIZE: u16 = 4;
const CTRL_ATTR_MAXATTR: u16 = 5;
const CTRL_ATTR_OPS: u16 = 6;
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
const CTRL_ATTR_OP_ID: u16 = 1;
const CTRL_ATTR_OP_FLAGS: u16 = 2;
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;

/// `GENL_ADMIN_PERM`: needs CAP_NET_ADMIN in the initial user namespace.
pub const GENL_ADMIN_PERM: u32 = 0x01;
/// `GENL_CMD_CAP_DO`.
pub const GENL_CMD_CAP_DO: u32 = 0x02;
/// `GENL_CMD_CAP_DUMP`.
pub const GENL_CMD_CAP_DUMP: u32 = 0x04;
/// `GENL_CMD_CAP_HASPOL`.
pub const GENL_CMD_CAP_HASPOL: u32 = 0x08;
/// `GENL_UNS_ADMIN_PERM`: needs CAP_NET_ADMIN in the netns's user namespace.
pub const GENL_UNS_ADMIN_PERM: u32 = 0x10;

/// One registered operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub id: u32,
    /// `GENL_*` flags: do / dump / permission.
    pub flags: u32,
}

impl Op {
    #[must_use]
    pub fn can_do(&self) -> bool {
        self.flags & GENL_CMD_CAP_DO != 0
    }
    #[must_use]
    pub fn can_dump(&self) -> bool {
        self.flags & GENL_CMD_CAP_DUMP != 0
    }
    #[must_use]
    pub fn needs_admin(&self) -> bool {
        self.flags & (GENL_ADMIN_PERM | GENL_UNS_ADMIN_PERM) != 0
    }
}

/// One multicast group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastGroup {
    pub name: String,
    pub id: u32,
}

/// An nlctrl message: a GETFAMILY request (only `name` set) or the
/// NEWFAMILY reply describing a family.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CtrlMessage {
    pub cmd: u8,
    pub family_id: Option<u16>,
    pub name: Option<String>,
    pub version: Option<u32>,
    pub hdrsize: Option<u32>,
    pub maxattr: Option<u32>,
    /// `None` when the reply has no OPS attribute (a family without ops).
    pub ops: Option<Vec<Op>>,
    pub mcast_groups: Option<Vec<McastGroup>>,
    pub other: Vec<RawAttr>,
}

impl CtrlMessage {
    /// `CTRL_CMD_GETFAMILY` for `name`.
    #[must_use]
    pub fn get_family(name: &str) -> Self {
        Self {
            cmd: CTRL_CMD_GETFAMILY,
            name: Some(name.to_owned()),
            ..Self::default()
        }
    }
}

impl GenlPayload for CtrlMessage {
    const FAMILY: &'static str = "nlctrl";
    // The kernel's nlctrl is version 2; it ignores what we send.
    const VERSION: u8 = 2;

    fn cmd(&self) -> u8 {
        self.cmd
    }

    fn emit_attrs(&self, w: &mut Writer) {
        // The kernel's order (`ctrl_fill_info`): name, then id.
        if let Some(n) = &self.name {
            w.string(CTRL_ATTR_FAMILY_NAME, n);
        }
        if let Some(id) = self.family_id {
            w.put(CTRL_ATTR_FAMILY_ID, &id.to_ne_bytes());
        }
        w.opt_u32(CTRL_ATTR_VERSION, self.version);
        w.opt_u32(CTRL_ATTR_HDRSIZE, self.hdrsize);
        w.opt_u32(CTRL_ATTR_MAXATTR, self.maxattr);
        // nlctrl nests without NLA_F_NESTED (`nla_nest_start_noflag`).
        if let Some(ops) = &self.ops {
            let mut list = Writer::new();
            for (i, op) in ops.iter().enumerate() {
                let mut o = Writer::new();
                o.u32(CTRL_ATTR_OP_ID, op.id);
                o.u32(CTRL_ATTR_OP_FLAGS, op.flags);
                list.nest_noflag(index_kind(i), o);
            }
            w.nest_noflag(CTRL_ATTR_OPS, list);
        }
        if let Some(groups) = &self.mcast_groups {
            let mut list = Writer::new();
            for (i, g) in groups.iter().enumerate() {
                let mut o = Writer::new();
                o.u32(CTRL_ATTR_MCAST_GRP_ID, g.id);
                o.string(CTRL_ATTR_MCAST_GRP_NAME, &g.name);
                list.nest_noflag(index_kind(i), o);
            }
            w.nest_noflag(CTRL_ATTR_MCAST_GROUPS, list);
        }
        w.raw(&self.other);
    }

    fn parse_attrs(cmd: u8, attrs: &[u8]) -> Result<Self, CodecError> {
        let mut m = Self {
            cmd,
            ..Self::default()
        };
        for a in Attrs::new(attrs) {
            let a = a?;
            match a.kind {
                CTRL_ATTR_FAMILY_ID => m.family_id = Some(a.u16("family-id")?),
                CTRL_ATTR_FAMILY_NAME => m.name = Some(a.string()),
                CTRL_ATTR_VERSION => m.version = Some(a.u32("version")?),
                CTRL_ATTR_HDRSIZE => m.hdrsize = Some(a.u32("hdrsize")?),
                CTRL_ATTR_MAXATTR => m.maxattr = Some(a.u32("maxattr")?),
                CTRL_ATTR_OPS => {
                    let mut ops = Vec::new();
                    for op in a.nested() {
                        let (mut id, mut flags) = (None, 0);
                        for f in op?.nested() {
                            let f = f?;
                            match f.kind {
                                CTRL_ATTR_OP_ID => id = Some(f.u32("op-id")?),
                                CTRL_ATTR_OP_FLAGS => flags = f.u32("op-flags")?,
                                _ => {}
                            }
                        }
                        let id = id.ok_or(CodecError::Missing {
                            what: "nlctrl op",
                            attr: "op-id",
                        })?;
                        ops.push(Op { id, flags });
                    }
                    m.ops = Some(ops);
                }
                CTRL_ATTR_MCAST_GROUPS => {
                    let mut groups = Vec::new();
                    for g in a.nested() {
                        let (mut name, mut id) = (None, None);
                        for f in g?.nested() {
                            let f = f?;
                            match f.kind {
                                CTRL_ATTR_MCAST_GRP_NAME => name = Some(f.string()),
                                CTRL_ATTR_MCAST_GRP_ID => id = Some(f.u32("grp-id")?),
                                _ => {}
                            }
                        }
                        if let (Some(name), Some(id)) = (name, id) {
                            groups.push(McastGroup { name, id });
                        }
                    }
                    m.mcast_groups = Some(groups);
                }
                _ => m.other.push(a.to_raw()),
            }
        }
        Ok(m)
    }
}

crate::genl::impl_genl_traits!(CtrlMessage);

/// Nest index attributes are numbered from 1.
fn index_kind(i: usize) -> u16 {
    u16::try_from(i + 1).unwrap_or(u16::MAX)
}

/// A resolved family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    pub name: String,
    pub id: u16,
    pub version: u32,
    pub ops: Vec<Op>,
    pub mcast_groups: Vec<McastGroup>,
}

impl Family {
    /// From a GETFAMILY reply.
    pub fn from_reply(m: CtrlMessage) -> Result<Self, CodecError> {
        let missing = |attr| CodecError::Missing {
            what: "nlctrl family reply",
            attr,
        };
        Ok(Self {
            name: m.name.ok_or(missing("family-name"))?,
            id: m.family_id.ok_or(missing("family-id"))?,
            version: m.version.unwrap_or(0),
            ops: m.ops.unwrap_or_default(),
            mcast_groups: m.mcast_groups.unwrap_or_default(),
        })
    }

    /// The operation with this command id, if the kernel registered it.
    #[must_use]
    pub fn op(&self, cmd: u8) -> Option<Op> {
        self.ops.iter().copied().find(|o| o.id == u32::from(cmd))
    }

    /// A multicast group's id by name.
    #[must_use]
    pub fn group(&self, name: &str) -> Option<u32> {
        self.mcast_groups
            .iter()
            .find(|g| g.name == name)
            .map(|g| g.id)
    }
}
