//! pptune's kernel interface: every byte to and from the kernel.
//!
//! - the **`netdev`** generic netlink family ([`netdev`]): page pools and
//!   their stats, queues, NAPIs, qstats;
//! - the **`ethtool`** generic netlink family ([`ethtool`]): rings and
//!   channels, get and set, the link's speed, and the `monitor` notifications;
//! - **nlctrl** ([`ctrl`]): family ids, registered operations, groups;
//! - **rtnetlink** ([`rtnl`]): links (the attributes pptune reads);
//! - the driver name, firmware and model ([`drvinfo`], the one ioctl, and
//!   the PCI ids in sysfs);
//! - the capability probe ([`caps`]) and the async [`Client`].
//!
//! Types here are kernel-faithful (attribute for attribute, `Option` where
//! the kernel may omit one); the daemon converts them into the policy's
//! snapshot. This crate knows nothing about policy.
//!
//! # Why not the `ethtool` crate
//!
//! rust-netlink's `ethtool` crate (0.3) models ethtool messages as a closed
//! enum of commands that has ring *get* but no ring *set*, so it cannot send
//! `ETHTOOL_MSG_RINGS_SET`, and a closed enum cannot be extended from outside.
//! Rings and channels are the only knobs pptune has, so this crate builds
//! both families' messages itself, on the same base that crate uses
//! (`netlink-packet-generic`'s `GenlFamily`/`Emitable`/`ParseableParametrized`
//! traits), one codec per family.
//!
//! # Decoding rules
//!
//! `uint` attributes are accepted as 4 or 8 bytes (the kernel's
//! `nla_put_uint()` writes the short form whenever the value fits);
//! unknown attributes are kept verbatim, never an error; truncated or
//! malformed input gives a [`CodecError`], never a panic.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), netlink::Error> {
//! let client = netlink::Client::connect().await?;
//! let caps = client.capabilities()?;
//! let stats_supported = caps.netdev_op(netlink::netdev::cmd::PAGE_POOL_STATS_GET).is_some();
//! let pools = client.page_pools().await?;
//! let stats = if stats_supported { client.page_pool_stats().await? } else { Vec::new() };
//! println!("{} pools, {} with stats", pools.len(), stats.len());
//! let mut events = client.subscribe()?;
//! while let Some(ev) = events.next().await {
//!     println!("{ev:?}");
//! }
//! # Ok(()) }
//! ```

pub mod attr;
pub mod caps;
pub mod client;
pub mod ctrl;
pub mod decode;
pub mod drvinfo;
pub mod error;
pub mod ethtool;
pub mod events;
pub mod frame;
pub mod genl;
pub mod netdev;
pub mod netns;
pub mod rtnl;
pub mod sockdiag;
pub mod socket;

pub use caps::Capabilities;
pub use client::Client;
pub use error::{CodecError, Error, KernelError, Result};
pub use events::{Event, Notifications, PoolChange};
pub use genl::GenlPayload;
