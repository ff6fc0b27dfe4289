//! `NETLINK_SOCK_DIAG` for unix sockets: who holds a listening abstract
//! unix socket name. An abstract name can be bound by any user of the
//! network namespace; the kernel keeps the uid of the socket's creator
//! (`UNIX_DIAG_UID`, Linux 5.3), which is what tells a squatter from the
//! process the name was meant for. Asked without connecting, so neither a
//! full backlog nor a holder that never accepts can hide it.

use crate::attr::Attrs;
use crate::error::{CodecError, Error};
use crate::frame::NLM_F_DUMP;
use crate::socket::RequestSocket;

/// `NETLINK_SOCK_DIAG`.
pub const NETLINK_SOCK_DIAG: isize = 4;
/// `SOCK_DIAG_BY_FAMILY`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const AF_UNIX: u8 = 1;
/// `TCP_LISTEN`, the state a listening unix socket reports.
const TCP_LISTEN: u32 = 10;
const UDIAG_SHOW_NAME: u32 = 0x01;
const UDIAG_SHOW_UID: u32 = 0x40;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_UID: u16 = 7;
/// `struct unix_diag_msg`.
const UNIX_DIAG_MSG_LEN: usize = 16;

/// The request: `struct unix_diag_req` for listening sockets, with their
/// names and owners.
#[must_use]
pub fn listeners_request() -> [u8; 24] {
    let mut r = [0u8; 24];
    r[0] = AF_UNIX;
    r[4..8].copy_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    r[12..16].copy_from_slice(&(UDIAG_SHOW_NAME | UDIAG_SHOW_UID).to_ne_bytes());
    r
}

/// From one `unix_diag_msg` reply: `Some(uid)` if it is the listener bound
/// to the abstract `name`, else `None`.
///
/// # Errors
/// A truncated message or malformed attribute.
pub fn listener_uid(payload: &[u8], name: &[u8]) -> Result<Option<u32>, CodecError> {
    let attrs = payload
        .get(UNIX_DIAG_MSG_LEN..)
        .ok_or(CodecError::Truncated {
            what: "unix_diag_msg",
            need: UNIX_DIAG_MSG_LEN,
            have: payload.len(),
        })?;
    let (mut named, mut uid) = (false, None);
    for a in Attrs::new(attrs) {
        let a = a?;
        match a.kind {
            // An abstract name: a NUL, then the name (no terminator).
            UNIX_DIAG_NAME => {
                named = a.value.first() == Some(&0) && &a.value[1..] == name;
            }
            UNIX_DIAG_UID => uid = Some(a.u32("UNIX_DIAG_UID")?),
            _ => {}
        }
    }
    Ok(if named { uid } else { None })
}

/// The uid owning the listening unix socket bound to the abstract `name`
/// in the calling thread's network namespace; `None` when none is bound
/// (or the kernel does not report owners).
///
/// # Errors
/// The socket cannot be opened, the kernel refuses, or a reply is malformed.
pub async fn abstract_listener_uid(name: &str) -> Result<Option<u32>, Error> {
    let sock = RequestSocket::open(NETLINK_SOCK_DIAG, "sock_diag")?;
    let ex = sock
        .exchange(SOCK_DIAG_BY_FAMILY, NLM_F_DUMP, &listeners_request())
        .await?;
    let mut found = None;
    let decode = |source| Error::Decode {
        op: "sock-diag",
        source,
    };
    let refused = ex
        .for_each_reply(|m| {
            if found.is_none() {
                found = listener_uid(m.payload, name.as_bytes())?;
            }
            Ok::<_, CodecError>(())
        })
        .map_err(decode)?;
    if let Some(cause) = refused {
        return Err(Error::Kernel {
            op: "sock-diag",
            ifname: None,
            cause,
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(name: &[u8], uid: u32) -> Vec<u8> {
        let mut p = vec![AF_UNIX, 1, 10, 0];
        p.extend_from_slice(&[0; 12]);
        let mut w = crate::attr::Writer::new();
        w.put(UNIX_DIAG_NAME, name);
        w.u32(UNIX_DIAG_UID, uid);
        p.extend_from_slice(&w.into_bytes());
        p
    }

    #[test]
    fn the_owner_of_the_abstract_name_and_only_it() {
        let r = reply(b"\0pptune/instance", 1000);
        assert_eq!(listener_uid(&r, b"pptune/instance").unwrap(), Some(1000));
        assert_eq!(listener_uid(&r, b"pptune/other").unwrap(), None);
        // A path socket of the same spelling is not the abstract name.
        let r = reply(b"pptune/instance", 0);
        assert_eq!(listener_uid(&r, b"pptune/instance").unwrap(), None);
        assert!(listener_uid(&[1, 2], b"x").is_err());
    }
}

#[cfg(test)]
mod kernel {
    use super::*;

    /// The real kernel, in a throwaway namespace: a name bound here is
    /// found with this process's uid; a name nobody holds is not.
    #[test]
    fn the_kernel_reports_the_holder_of_an_abstract_name() {
        let ns = crate::netns::TempNetns::create("sockdiag").unwrap();
        let (mine, none) = ns
            .run(|| async {
                use std::os::linux::net::SocketAddrExt as _;
                let a =
                    std::os::unix::net::SocketAddr::from_abstract_name("pptune-t/held").unwrap();
                let _l = std::os::unix::net::UnixListener::bind_addr(&a).unwrap();
                (
                    abstract_listener_uid("pptune-t/held").await.unwrap(),
                    abstract_listener_uid("pptune-t/free").await.unwrap(),
                )
            })
            .unwrap();
        assert_eq!(mine, Some(nix::unistd::geteuid().as_raw()));
        assert_eq!(none, None);
    }
}
