//! The reply decoders: pure functions from an [`Exchange`]'s recorded
//! bytes to the types the client returns (the decode half of each request
//! [`crate::Client`] sends), kept apart from the sockets so they are tested
//! and fuzzed on recorded kernel replies without a socket.

use crate::attr::DecodeInPlace;
use crate::error::{CodecError, Error, KernelError, Result};
use crate::ethtool::{BodyKind, Channels, EthtoolMessage, Linkmodes, Rings, body_kind};
use crate::frame;
use crate::genl::GenlPayload;
use crate::netdev::{NetdevMessage, PagePool, PagePoolStats, Qstats, Queue, QueueType, cmd};
use crate::rtnl::{self, Link};
use crate::socket::Exchange;

/// An acknowledged request that brought no reply where one was due.
pub(crate) fn no_reply(op: &'static str) -> Error {
    decode_err(
        op,
        CodecError::Unexpected("the kernel acknowledged but sent no reply".to_owned()),
    )
}

/// A reply to `op` that did not decode.
pub(crate) fn decode_err(op: &'static str, source: CodecError) -> Error {
    Error::Decode { op, source }
}

/// The rings of a RINGS_GET exchange ([`Client::rings`]'s decode half).
/// `ifname` only labels errors.
pub fn decode_rings(ex: &Exchange, ifname: Option<&str>) -> Result<Rings> {
    let mut out = Rings::default();
    decode_rings_into(ex, ifname, &mut out)?;
    Ok(out)
}

/// [`decode_rings`] into `out`, reusing its buffers.
pub fn decode_rings_into(ex: &Exchange, ifname: Option<&str>, out: &mut Rings) -> Result<()> {
    decode_ethtool_get(ex, "rings-get", ifname, BodyKind::Rings, |a| {
        out.parse_into(a)
    })
}

/// The channels of a CHANNELS_GET exchange.
pub fn decode_channels(ex: &Exchange, ifname: Option<&str>) -> Result<Channels> {
    let mut out = Channels::default();
    decode_channels_into(ex, ifname, &mut out)?;
    Ok(out)
}

/// [`decode_channels`] into `out`, reusing its buffers.
pub fn decode_channels_into(ex: &Exchange, ifname: Option<&str>, out: &mut Channels) -> Result<()> {
    decode_ethtool_get(ex, "channels-get", ifname, BodyKind::Channels, |a| {
        out.parse_into(a)
    })
}

/// The link modes of a LINKMODES_GET exchange (the link's speed).
pub fn decode_linkmodes(ex: &Exchange, ifname: Option<&str>) -> Result<Linkmodes> {
    let mut out = Linkmodes::default();
    decode_ethtool_get(ex, "linkmodes-get", ifname, BodyKind::Linkmodes, |a| {
        out.parse_into(a)
    })?;
    Ok(out)
}

/// The first reply of an ethtool get exchange whose body is `want`,
/// decoded by `parse`; every other reply is decoded as an
/// [`EthtoolMessage`] (a malformed one fails the request) and dropped.
fn decode_ethtool_get(
    ex: &Exchange,
    op: &'static str,
    ifname: Option<&str>,
    want: BodyKind,
    mut parse: impl FnMut(&[u8]) -> std::result::Result<(), CodecError>,
) -> Result<()> {
    let mut found = false;
    walk_replies(ex, op, ifname, name_attr::<EthtoolMessage>, |m| {
        let (cmd, _, attrs) = frame::genl_split(m.payload)?;
        if !found && body_kind(cmd) == want {
            found = true;
            parse(attrs)
        } else {
            EthtoolMessage::parse_attrs(cmd, attrs).map(drop)
        }
    })?;
    if found { Ok(()) } else { Err(no_reply(op)) }
}

/// Every data reply of `ex` to `f`, in one walk over the exchange. A
/// refusal becomes [`Error::Kernel`] (its attribute named by `name` from
/// the request); a framing error or one of `f`'s becomes
/// [`Error::Decode`] — unless the exchange also holds a refusal, the
/// better report. The one place the decoders below turn an exchange into
/// a result.
fn walk_replies<'a>(
    ex: &'a Exchange,
    op: &'static str,
    ifname: Option<&str>,
    name: fn(&[u8], KernelError) -> KernelError,
    f: impl FnMut(frame::Msg<'a>) -> std::result::Result<(), CodecError>,
) -> Result<()> {
    let refused = |source| Error::Kernel {
        op,
        ifname: ifname.map(str::to_owned),
        cause: name(&ex.request, source),
    };
    match ex.for_each_reply(f) {
        Ok(None) => Ok(()),
        Ok(Some(source)) => Err(refused(source)),
        Err(source) => match ex.refusal() {
            Ok(Some(r)) => Err(refused(r)),
            _ => Err(decode_err(op, source)),
        },
    }
}

/// The links of an `RTM_GETLINK` dump exchange ([`Client::links`]'s
/// decode half; benches replay recorded bytes through it).
pub fn decode_links(ex: &Exchange) -> Result<Vec<Link>> {
    let mut out = Vec::new();
    decode_links_into(ex, &mut out)?;
    Ok(out)
}

/// [`decode_links`] into `out`, reusing the links (and their strings)
/// already there; `out` holds exactly the dump's links afterwards.
pub fn decode_links_into(ex: &Exchange, out: &mut Vec<Link>) -> Result<()> {
    let mut n = 0;
    let walked = walk_replies(
        ex,
        "link-dump",
        None,
        |_, e| e,
        |m| {
            if m.header.kind != rtnl::RTM_NEWLINK {
                return Ok(());
            }
            match out.get_mut(n) {
                Some(slot) => slot.parse_into(m.payload)?,
                None => out.push(Link::parse(m.payload)?),
            }
            n += 1;
            Ok(())
        },
    );
    out.truncate(if walked.is_ok() { n } else { 0 });
    walked
}

/// The pools of a page-pool-get dump ([`Client::page_pools`]'s decode half;
/// benches replay recorded bytes through these `decode_*` functions).
pub fn decode_page_pools(ex: &Exchange) -> Result<Vec<PagePool>> {
    let mut out = Vec::new();
    decode_page_pools_into(ex, &mut out)?;
    Ok(out)
}

/// [`decode_page_pools`] into `out`, reusing the entries it holds.
pub fn decode_page_pools_into(ex: &Exchange, out: &mut Vec<PagePool>) -> Result<()> {
    let cmds = [
        cmd::PAGE_POOL_GET,
        cmd::PAGE_POOL_ADD_NTF,
        cmd::PAGE_POOL_DEL_NTF,
        cmd::PAGE_POOL_CHANGE_NTF,
    ];
    decode_netdev_typed(
        ex,
        "page-pool-get",
        &cmds,
        None,
        PagePool::parse_into,
        |_| true,
        out,
    )
}

/// The entries of a page-pool-stats-get dump.
pub fn decode_page_pool_stats(ex: &Exchange) -> Result<Vec<PagePoolStats>> {
    let mut out = Vec::new();
    decode_page_pool_stats_into(ex, &mut out)?;
    Ok(out)
}

/// [`decode_page_pool_stats`] into `out`, reusing the entries it holds.
pub fn decode_page_pool_stats_into(ex: &Exchange, out: &mut Vec<PagePoolStats>) -> Result<()> {
    let cmds = [cmd::PAGE_POOL_STATS_GET];
    decode_netdev_typed(
        ex,
        "page-pool-stats-get",
        &cmds,
        None,
        PagePoolStats::parse_into,
        |_| true,
        out,
    )
}

/// The queues of a queue-get dump of type `of_type` (any type for
/// `None`) that `keep` accepts.
pub fn decode_queues_where(
    ex: &Exchange,
    of_type: Option<QueueType>,
    keep: impl FnMut(&Queue) -> bool,
) -> Result<Vec<Queue>> {
    let mut out = Vec::new();
    decode_queues_into(ex, of_type, keep, &mut out)?;
    Ok(out)
}

/// [`decode_queues_where`] into `out`, reusing the entries it holds.
pub fn decode_queues_into(
    ex: &Exchange,
    of_type: Option<QueueType>,
    keep: impl FnMut(&Queue) -> bool,
    out: &mut Vec<Queue>,
) -> Result<()> {
    decode_netdev_typed(
        ex,
        "queue-get",
        &[cmd::QUEUE_GET],
        of_type.map(|t| TypeFilter {
            attr: Queue::TYPE_ATTR,
            name: Queue::TYPE_NAME,
            want: t.into(),
        }),
        Queue::parse_into,
        keep,
        out,
    )
}

/// The entries of a qstats-get dump of queue type `of_type` (any entry,
/// device totals included, for `None`) that `keep` accepts.
pub fn decode_qstats_where(
    ex: &Exchange,
    of_type: Option<QueueType>,
    keep: impl FnMut(&Qstats) -> bool,
) -> Result<Vec<Qstats>> {
    let mut out = Vec::new();
    decode_qstats_into(ex, of_type, keep, &mut out)?;
    Ok(out)
}

/// [`decode_qstats_where`] into `out`, reusing the entries it holds.
pub fn decode_qstats_into(
    ex: &Exchange,
    of_type: Option<QueueType>,
    keep: impl FnMut(&Qstats) -> bool,
    out: &mut Vec<Qstats>,
) -> Result<()> {
    decode_netdev_typed(
        ex,
        "qstats-get",
        &[cmd::QSTATS_GET],
        of_type.map(|t| TypeFilter {
            attr: Qstats::TYPE_ATTR,
            name: Qstats::TYPE_NAME,
            want: t.into(),
        }),
        Qstats::parse_into,
        keep,
        out,
    )
}

/// A reply filter read before the decode: a reply is decoded only when its
/// u32 attribute `attr` is present and `want`. The attributes are walked
/// (their framing checked) up to that one; a reply it drops is not read
/// past it: the TX halves of the queue and qstats dumps, half their
/// replies, stay undecoded.
#[derive(Debug, Clone, Copy)]
struct TypeFilter {
    attr: u16,
    name: &'static str,
    want: u32,
}

impl TypeFilter {
    fn admits(self, attrs: &[u8]) -> std::result::Result<bool, CodecError> {
        for a in crate::attr::Attrs::new(attrs) {
            let a = a?;
            if a.kind == self.attr {
                return Ok(a.u32(self.name)? == self.want);
            }
        }
        Ok(false)
    }
}

/// A netdev dump exchange's replies with a command in `cmds` parsed
/// straight into `T` (no `NetdevMessage` in between: an enum the size of
/// its largest variant, moved several times per reply, was a tenth of the
/// pass at thousands of replies) and kept in `out` when `only` (if given)
/// admits them and `keep` accepts them. Replies with another command are
/// decoded as [`decode_genl`] would (so a malformed one still fails the
/// request) and dropped. Each
/// reply is parsed in place into `out`'s next slot, reusing the entries a
/// previous dump left there (a rejected one's slot takes the next reply),
/// so a repeated dump neither moves entries nor frees and reallocates
/// them; `out` holds exactly the kept entries afterwards, none on an
/// error.
fn decode_netdev_typed<T: Default>(
    ex: &Exchange,
    op: &'static str,
    cmds: &[u8],
    only: Option<TypeFilter>,
    parse_into: fn(&mut T, &[u8]) -> std::result::Result<(), CodecError>,
    mut keep: impl FnMut(&T) -> bool,
    out: &mut Vec<T>,
) -> Result<()> {
    let mut n = 0;
    // Past the entries a previous dump left, a reply is parsed into `spare`
    // and moved in only when kept: a rejected reply never takes a slot of
    // `out`, so its capacity follows the kept count, not the reply count.
    let mut spare = T::default();
    // One walk: decode as the replies come; a refused exchange keeps none.
    let walked = walk_replies(ex, op, None, name_attr::<NetdevMessage>, |m| {
        let (c, _, attrs) = frame::genl_split(m.payload)?;
        if cmds.contains(&c) {
            if let Some(f) = only
                && !f.admits(attrs)?
            {
                return Ok(());
            }
            if let Some(slot) = out.get_mut(n) {
                parse_into(slot, attrs)?;
                if keep(slot) {
                    n += 1;
                }
            } else {
                parse_into(&mut spare, attrs)?;
                if keep(&spare) {
                    out.push(std::mem::take(&mut spare));
                    n += 1;
                }
            }
        } else {
            NetdevMessage::parse_attrs(c, attrs)?;
        }
        Ok(())
    });
    out.truncate(if walked.is_ok() { n } else { 0 });
    walked
}

/// Decode an exchange's replies as family `P`, or turn a refusal into
/// [`Error::Kernel`] with the offending attribute named.
pub fn decode_genl<P: GenlPayload>(
    ex: &Exchange,
    op: &'static str,
    ifname: Option<&str>,
) -> Result<Vec<P>> {
    decode_genl_with(ex, op, ifname, Some)
}

/// [`decode_genl`], keeping only what `keep` returns for each decoded
/// reply (every reply is still decoded: one that fails fails the whole).
pub fn decode_genl_with<P: GenlPayload, T>(
    ex: &Exchange,
    op: &'static str,
    ifname: Option<&str>,
    mut keep: impl FnMut(P) -> Option<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    walk_replies(ex, op, ifname, name_attr::<P>, |m| {
        out.extend(keep(P::from_genl_bytes(m.payload)?));
        Ok(())
    })?;
    Ok(out)
}

fn name_attr<P: GenlPayload>(request: &[u8], mut e: KernelError) -> KernelError {
    // The offending attribute, or else the nest a required one is missing from.
    if let Some(off) = e.offset.or(e.missing_nest) {
        let cmd = request.get(frame::NLMSG_HDRLEN).copied().unwrap_or(0);
        e.attr = frame::genl_attr_path(request, off).map(|p| P::attr_name(cmd, &p));
    }
    e
}
