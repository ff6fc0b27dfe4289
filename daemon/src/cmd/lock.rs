//! One pptune per network namespace: [`InstanceLock`], taken by `run` for
//! the daemon's life and by `restore` while it acts.

/// The abstract socket that makes one daemon per network namespace.
pub const INSTANCE_SOCKET: &str = "pptune/instance";

/// Why the instance lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error(
        "another pptune is running in this network namespace (it holds the abstract socket @{INSTANCE_SOCKET}); two daemons must not both act on the same NICs"
    )]
    OtherInstance,
    #[error("binding the instance lock @{INSTANCE_SOCKET}")]
    Bind {
        #[source]
        source: std::io::Error,
    },
}

/// Held for the daemon's life (and a `restore`'s): one pptune per network
/// namespace, whatever runtime directory each was given. The state lock is
/// per directory, so two daemons with different `RUNTIME_DIRECTORY`s both
/// took it and both enforced on the same NICs. An abstract unix socket is
/// keyed by the network namespace (the NICs' namespace), needs no writable
/// path (the unit's `ProtectSystem=strict` leaves none but the runtime
/// directory), and is released by the kernel when the process dies, even
/// by SIGKILL.
///
/// Any user of the namespace can bind an abstract name, so only a holder
/// that could be a pptune counts: one owned by root or by this process's
/// user (the kernel's record of the socket's owner, through sock_diag,
/// without connecting to it). A name held by any other user is a squatter:
/// it does not stop a start or a restore; it is logged (uid, and what it
/// costs: the check against a second pptune with another runtime
/// directory), and the per-directory state lock still applies.
#[derive(Debug)]
pub struct InstanceLock {
    /// `None`: the name is held by a user who cannot be a pptune.
    _socket: Option<std::os::unix::net::UnixListener>,
}

impl InstanceLock {
    /// Takes the lock without waiting.
    pub async fn take() -> Result<Self, InstanceError> {
        use std::os::linux::net::SocketAddrExt as _;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(INSTANCE_SOCKET)
            .map_err(|source| InstanceError::Bind { source })?;
        // Twice: a holder may go between the bind and the question.
        for _ in 0..2 {
            match std::os::unix::net::UnixListener::bind_addr(&addr) {
                Ok(s) => return Ok(Self { _socket: Some(s) }),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {}
                Err(source) => return Err(InstanceError::Bind { source }),
            }
            let holder = netlink::sockdiag::abstract_listener_uid(INSTANCE_SOCKET)
                .await
                .map_err(|e| InstanceError::Bind {
                    source: std::io::Error::other(format!("asking who holds it: {e}")),
                })?;
            match holder {
                None => {}
                Some(uid) if may_be_pptune(uid) => return Err(InstanceError::OtherInstance),
                Some(uid) => {
                    tracing::warn!(
                        uid,
                        "the instance name @{INSTANCE_SOCKET} is held by uid {uid}, a user that cannot run pptune: ignored; only this runtime directory's lock keeps a second pptune out meanwhile"
                    );
                    return Ok(Self { _socket: None });
                }
            }
        }
        Err(InstanceError::OtherInstance)
    }
}

/// Whether a socket owned by `uid` may belong to a pptune: root's, or this
/// process's user's (the unit's `User=`).
fn may_be_pptune(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}
