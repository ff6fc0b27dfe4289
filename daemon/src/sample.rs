//! Stage 1, sampling: the seam between the daemon and the kernel.
//!
//! The daemon's loop, actuator and commands are written against [`Kernel`].
//! The real implementation, [`kernel_netlink::NetlinkKernel`], drives
//! `netlink::Client` with its reused buffers, joins the dumps (`join`, pure)
//! and converts the kernel-faithful replies into `policy::Snapshot`
//! (`convert`). A hand-written fake in the `tests` harness drives the loop
//! logic; kernel-facing behaviour is tested against a real kernel.
//!
//! Imports: nothing of the daemon's above the base (`clock`, `human`).

pub mod kernel_netlink;

use std::future::Future;

use policy::snapshot::{Channels, Device, Rings, Snapshot};
use policy::{ChannelField, RingField};

/// Which devices a sampling pass covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleScope {
    /// Interface names to include; empty = every device.
    pub interfaces: Vec<String>,
}

/// A refusal or failure from a set operation.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// The kernel answered with an error: an answer, not a transient fault.
    #[error("kernel refused: {message} (errno {errno}{})", attr.as_ref().map(|a| format!(", attribute {a}")).unwrap_or_default())]
    Refused {
        errno: i32,
        /// extack message, or the errno's description when there is none.
        message: String,
        /// The offending attribute, when the kernel named one.
        attr: Option<String>,
    },
    /// The device disappeared (ENODEV) before or during the change.
    #[error("device {0} vanished")]
    DeviceGone(u32),
    /// Anything else (socket failure, malformed reply): its message and
    /// its causes are the inner error's (said once in a printed chain).
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// A sampling failure that is not about one device.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct SampleError {
    pub context: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// Something the kernel told us between samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelEvent {
    /// ethtool `RINGS_NTF` with the full ring state it carries.
    RingsChanged {
        ifindex: u32,
        rings: Rings,
    },
    /// ethtool `CHANNELS_NTF` with the full channel state.
    ChannelsChanged {
        ifindex: u32,
        channels: Channels,
    },
    /// netdev page-pool add/change/del: the pool map is stale.
    PoolsChanged {
        ifindex: Option<u32>,
    },
    /// rtnetlink: a link appeared, changed (rename, up/down) or vanished.
    LinkChanged {
        ifindex: u32,
    },
    LinkRemoved {
        ifindex: u32,
    },
    /// A notification socket overflowed (ENOBUFS): state is unknown until a
    /// full resync.
    Overflow {
        source: &'static str,
    },
}

/// The kernel as the daemon needs it.
pub trait Kernel: Send + Sync + 'static {
    /// One full sampling pass: a handful of dumps, never one request per pool.
    fn sample(
        &self,
        scope: &SampleScope,
    ) -> impl Future<Output = Result<Snapshot, SampleError>> + Send;

    /// Hand back a snapshot the caller is done with, so a later pass can
    /// refill its allocations instead of making new ones. Optional: the
    /// default drops it.
    fn recycle(&self, snapshot: Snapshot) {
        drop(snapshot);
    }

    /// Sample one device right before changing it. `Ok(None)` if it is gone.
    fn sample_device(
        &self,
        ifindex: u32,
    ) -> impl Future<Output = Result<Option<Device>, SampleError>> + Send;

    /// Set one ring field; returns the rings read back after the change.
    fn set_ring(
        &self,
        ifindex: u32,
        field: RingField,
        value: u32,
    ) -> impl Future<Output = Result<Rings, SetError>> + Send;

    /// Set one channel count; returns the channels read back after the change.
    fn set_channels(
        &self,
        ifindex: u32,
        field: ChannelField,
        value: u32,
    ) -> impl Future<Output = Result<Channels, SetError>> + Send;

    /// The next notification. Resolves to `None` when the notification
    /// sockets are gone for good (the daemon then exits non-zero).
    fn next_event(&self) -> impl Future<Output = Option<KernelEvent>> + Send;
}
