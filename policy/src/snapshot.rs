//! The plain-data picture of a host's page pools at one instant.
//!
//! This is the contract between crates: the daemon converts kernel replies
//! into a [`Snapshot`]; `status`, `plan`, the metrics and the policy engine
//! all read the same values, so the numbers a person sees are the numbers the
//! policy decided on. Nothing here knows about netlink.
//!
//! Counters are kept exactly as the kernel reports them (cumulative for the
//! life of one pool); rates are computed by the engine from two snapshots.

use serde::{Deserialize, Serialize};

/// Everything pptune saw in one sampling pass. Its `clone_from` (and its
/// devices' and queues') reuses the target's buffers: a copy kept pass
/// after pass (the shadow policy's) allocates nothing once the shapes
/// match.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Monotonic time of the sample in milliseconds, from an arbitrary origin
    /// chosen by the sampler. Only differences between snapshots mean
    /// anything; the engine is handed the elapsed time separately.
    pub taken_at_ms: u64,
    /// What the running kernel can do.
    pub capabilities: Capabilities,
    /// Network devices, ordered by ifindex.
    pub devices: Vec<Device>,
    /// Pools whose netdev is gone (orphaned to loopback, reported without an
    /// ifindex) — "zombies" that still hold pages.
    pub orphan_pools: Vec<Pool>,
}

/// Which kernel features the sampler found, as data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// `uname -r` of the running kernel.
    pub kernel_release: String,
    /// The `netdev` generic netlink family exists.
    pub netdev_family: bool,
    /// `page-pool-get` is registered (Linux 6.8+, `CONFIG_PAGE_POOL`).
    pub page_pool_get: bool,
    /// `page-pool-stats-get` is registered (`CONFIG_PAGE_POOL_STATS`).
    pub page_pool_stats: bool,
    /// `queue-get` / `napi-get` are registered (6.8+).
    pub queue_get: bool,
    pub napi_get: bool,
    /// `qstats-get` is registered (6.9+).
    pub qstats_get: bool,
    /// The `ethtool` generic netlink family exists.
    pub ethtool_family: bool,
    /// The process holds CAP_NET_ADMIN (needed for RINGS_SET/CHANNELS_SET).
    pub cap_net_admin: bool,
}

/// The IOMMU domain a device's DMA goes through, as sysfs says it
/// (`/sys/bus/<bus>/devices/<dev>/iommu_group/type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Iommu {
    /// Nothing read: no parent device, or its group unreadable.
    #[default]
    Unknown,
    /// The parent device has no IOMMU group: DMA is not translated.
    NoGroup,
    /// `identity`: translated one to one (passthrough), nothing mapped.
    Identity,
    /// `DMA-FQ`: mapped per page, invalidations batched by a flush queue.
    Lazy,
    /// `DMA`: mapped per page, each unmap invalidated at once.
    Strict,
    /// Another domain (`blocked`, `unmanaged`: a device given to user
    /// space or kept from DMA), which the DMA API does not price.
    Other,
}

impl Iommu {
    /// From the group's `type` file (`None`: the device has no group).
    #[must_use]
    pub fn from_group_type(t: Option<&str>) -> Self {
        match t.map(str::trim) {
            None => Self::NoGroup,
            Some("identity") => Self::Identity,
            Some("DMA-FQ") => Self::Lazy,
            Some("DMA") => Self::Strict,
            Some(_) => Self::Other,
        }
    }
}

/// A device's identity across renames and driver reloads: its parent bus
/// address and permanent MAC, never its ifindex or name.
#[derive(Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceId {
    /// `IFLA_PARENT_DEV_BUS_NAME`, e.g. `pci`, `netdevsim`, `virtio`.
    pub bus: Option<String>,
    /// `IFLA_PARENT_DEV_NAME`, e.g. a PCI BDF `0000:3b:00.0`.
    pub parent: Option<String>,
    /// Permanent MAC address, lower-case hex with colons.
    pub perm_addr: Option<String>,
    /// Fallback when neither bus nor MAC is known (virtual devices): the name.
    pub name_fallback: Option<String>,
}

/// Written out for `clone_from`, which the derive does not specialise: the
/// engine refills each decision's identity in place every pass, and
/// `Option<String>::clone_from` keeps the strings' buffers.
impl Clone for DeviceId {
    fn clone(&self) -> Self {
        Self {
            bus: self.bus.clone(),
            parent: self.parent.clone(),
            perm_addr: self.perm_addr.clone(),
            name_fallback: self.name_fallback.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.bus.clone_from(&source.bus);
        self.parent.clone_from(&source.parent);
        self.perm_addr.clone_from(&source.perm_addr);
        self.name_fallback.clone_from(&source.name_fallback);
    }
}

impl DeviceId {
    /// A stable, human-readable key, e.g. `pci/0000:3b:00.0/0c:42:a1:00:00:01`.
    #[must_use]
    pub fn key(&self) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_key(&mut s);
        s
    }

    /// [`DeviceId::key`], written to `out` (no string of its own: the
    /// engine hashes it into every recommendation id, every tick).
    pub fn write_key(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        fn part(v: &Option<String>) -> &str {
            v.as_deref().unwrap_or("-")
        }
        match (&self.bus, &self.parent, &self.perm_addr) {
            (None, None, None) => write!(out, "name/{}", part(&self.name_fallback)),
            _ => write!(
                out,
                "{}/{}/{}",
                part(&self.bus),
                part(&self.parent),
                part(&self.perm_addr)
            ),
        }
    }
}

/// Operational state as rtnetlink reports it (RFC 2863).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// One network device and everything sampled for it.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub ifindex: u32,
    pub name: String,
    pub id: DeviceId,
    /// Kernel driver name (`mlx5_core`, `ice`, `netdevsim`, `veth` …).
    pub driver: Option<String>,
    /// rtnetlink link kind (`veth`, `bond`, `netdevsim` …), if any.
    pub kind: Option<String>,
    pub oper_state: OperState,
    /// `IFF_UP` administratively.
    pub admin_up: bool,
    /// ifindex of the bond/team master, if enslaved.
    pub master: Option<u32>,
    pub mtu: Option<u32>,
    /// Negotiated link speed in Mb/s (ethtool `LINKMODES_GET`); `None`
    /// with no link or from a driver that does not say. With `model` and
    /// `firmware`, what a fleet groups devices by.
    #[serde(default)]
    pub speed_mbps: Option<u32>,
    /// PCI `vendor:device` of the NIC (`8086:159b`); `None` off PCI.
    #[serde(default)]
    pub model: Option<String>,
    /// `ethtool -i`'s firmware version, when the driver reports one.
    #[serde(default)]
    pub firmware: Option<String>,
    /// The IOMMU domain of its parent device: what a miss costs on it
    /// ([`crate::price`]).
    #[serde(default)]
    pub iommu: Iommu,
    /// `IFLA_NUM_RX_QUEUES`: allocated RX queues (not the active count).
    pub num_rx_queues: Option<u32>,
    /// Ring sizes, or why they are not available.
    pub rings: Availability<Rings>,
    /// Channel counts, or why they are not available.
    pub channels: Availability<Channels>,
    /// Link stats64 subset: the harm signal on drivers without qstats.
    pub link_stats: Option<LinkStats>,
    /// Device-scope qstats (`None` when the driver has no `stat_ops`).
    pub qstats: Option<QueueStats>,
    /// Active RX queues (from queue-get), ordered by queue id.
    pub rx_queues: Vec<RxQueue>,
    /// Pools of this device that map to no RX queue: no napi-id (detached,
    /// or a driver that sets none) or a napi-id no queue reported.
    pub unmapped_pools: Vec<Pool>,
}

/// `Clone` whose `clone_from` reuses the target's buffers, field by field:
/// the source is destructured in full, so a field added to the struct and
/// not copied here does not compile.
macro_rules! clone_reusing {
    ($t:ident { $($copy:ident),* ; $($reuse:ident),* }) => {
        impl Clone for $t {
            fn clone(&self) -> Self {
                let mut c = Self::default();
                c.clone_from(self);
                c
            }

            fn clone_from(&mut self, src: &Self) {
                let $t { $($copy,)* $($reuse,)* } = src;
                $(self.$copy = *$copy;)*
                $(self.$reuse.clone_from($reuse);)*
            }
        }
    };
}

clone_reusing!(Snapshot { taken_at_ms; capabilities, devices, orphan_pools });
clone_reusing!(Device {
    ifindex, oper_state, admin_up, master, mtu, speed_mbps, iommu, num_rx_queues, link_stats, qstats;
    name, id, driver, kind, model, firmware, rings, channels, rx_queues, unmapped_pools
});
clone_reusing!(RxQueue { id, napi_id, provider, qstats; pools });

impl RxQueue {
    /// A memory provider feeds the queue: bound to the queue itself, or to
    /// any of its pools (the rule the per-queue deltas follow,
    /// `accounting`'s `QueueDelta::provider`).
    #[must_use]
    pub fn has_provider(&self) -> bool {
        self.provider.is_some() || self.pools.iter().any(|p| p.provider.is_some())
    }
}

impl Device {
    /// Every pool of the device, queue-mapped first.
    pub fn pools(&self) -> impl Iterator<Item = &Pool> {
        self.rx_queues
            .iter()
            .flat_map(|q| q.pools.iter())
            .chain(self.unmapped_pools.iter())
    }

    /// Pages its pools have out of the allocator now (posted, in the stack,
    /// parked in the pools' rings and caches): the sum of their `inflight`.
    #[must_use]
    pub fn inflight_pages(&self) -> u64 {
        self.pools()
            .filter_map(|p| p.inflight)
            .fold(0, u64::saturating_add)
    }

    /// Whether the device carries any harm signal (qstats drops or link drop
    /// counters) against which a change could be evaluated.
    #[must_use]
    pub fn has_harm_signal(&self) -> bool {
        let q = |s: &QueueStats| s.rx_hw_drops.is_some() || s.rx_hw_drop_overruns.is_some();
        self.qstats.as_ref().is_some_and(q)
            || self
                .rx_queues
                .iter()
                .any(|r| r.qstats.as_ref().is_some_and(q))
            || self.link_stats.is_some()
    }
}

/// A value that the kernel may decline to give, with the reason in words.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "value")]
pub enum Availability<T> {
    Available(T),
    /// e.g. "not supported by driver veth" or "kernel has no ethtool netlink".
    Unavailable(String),
    /// Not sampled (device filtered out or not asked for).
    #[default]
    NotSampled,
}

impl<T> Availability<T> {
    #[must_use]
    pub fn available(&self) -> Option<&T> {
        match self {
            Self::Available(v) => Some(v),
            _ => None,
        }
    }

    #[must_use]
    pub fn available_mut(&mut self) -> Option<&mut T> {
        match self {
            Self::Available(v) => Some(v),
            _ => None,
        }
    }
}

/// One field of a block the kernel reports in one message (rings,
/// channels), by its name: what the recording writes the block as, so a
/// field added to the block is recorded and read back by its name with no
/// change to the recording (`daemon/record/src/format.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Field<B> {
    /// The field's name in the struct (`rx_mini_max`).
    pub name: &'static str,
    /// Its value, if the driver reports it.
    pub get: fn(&B) -> Option<u32>,
    /// Sets it; a value its type cannot hold leaves it unreported.
    pub set: fn(&mut B, u32),
}

/// A block field's integer type, through `u32` ([`Field`]).
trait FieldValue: Sized {
    fn to_u32(self) -> u32;
    fn from_u32(v: u32) -> Option<Self>;
}

impl FieldValue for u32 {
    fn to_u32(self) -> u32 {
        self
    }
    fn from_u32(v: u32) -> Option<Self> {
        Some(v)
    }
}

impl FieldValue for u8 {
    fn to_u32(self) -> u32 {
        u32::from(self)
    }
    fn from_u32(v: u32) -> Option<Self> {
        Self::try_from(v).ok()
    }
}

/// A block's struct, each field `Option` of an integer, and its `FIELDS`:
/// every field by name, in declaration order. The struct is the list: a
/// field cannot be declared without its entry.
macro_rules! block {
    (
        $(#[$m:meta])*
        pub struct $name:ident {
            $($(#[$fm:meta])* pub $field:ident: Option<$ty:ty>,)*
        }
    ) => {
        $(#[$m])*
        pub struct $name {
            $($(#[$fm])* pub $field: Option<$ty>,)*
        }

        impl $name {
            /// Every field by name, in declaration order.
            pub const FIELDS: &'static [Field<Self>] = &[$(Field {
                name: stringify!($field),
                get: |b| b.$field.map(FieldValue::to_u32),
                set: |b, v| b.$field = <$ty as FieldValue>::from_u32(v),
            }),*];
        }
    };
}

block! {
    /// ethtool rings (`ETHTOOL_A_RINGS_*`). A pair is `None` when the driver
    /// reports a zero maximum for it (the kernel then omits both).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Rings {
        pub rx: Option<u32>,
        pub rx_max: Option<u32>,
        pub rx_mini: Option<u32>,
        pub rx_mini_max: Option<u32>,
        pub rx_jumbo: Option<u32>,
        pub rx_jumbo_max: Option<u32>,
        pub tx: Option<u32>,
        pub tx_max: Option<u32>,
        pub rx_buf_len: Option<u32>,
        /// 0 unknown, 1 disabled, 2 enabled.
        pub tcp_data_split: Option<u8>,
        pub hds_thresh: Option<u32>,
        pub hds_thresh_max: Option<u32>,
    }
}

block! {
    /// ethtool channels (`ETHTOOL_A_CHANNELS_*`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Channels {
        pub rx: Option<u32>,
        pub rx_max: Option<u32>,
        pub tx: Option<u32>,
        pub tx_max: Option<u32>,
        pub other: Option<u32>,
        pub other_max: Option<u32>,
        pub combined: Option<u32>,
        pub combined_max: Option<u32>,
    }
}

impl Channels {
    /// Queues that receive: combined + rx-only.
    #[must_use]
    pub fn rx_queues(&self) -> u32 {
        self.combined
            .unwrap_or(0)
            .saturating_add(self.rx.unwrap_or(0))
    }
}

/// Link stats64 fields that count receive-side loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub rx_missed_errors: u64,
    pub rx_fifo_errors: u64,
}

/// Per-queue (or device-scope) qstats. `None` means the driver does not fill
/// that counter (the kernel omits it), not zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    pub rx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub rx_alloc_fail: Option<u64>,
    pub rx_hw_drops: Option<u64>,
    pub rx_hw_drop_overruns: Option<u64>,
}

/// One active RX queue and the pools that serve it.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxQueue {
    pub id: u32,
    pub napi_id: Option<u32>,
    /// Memory provider bound to the queue itself (queue-get), if any.
    pub provider: Option<MemoryProvider>,
    pub qstats: Option<QueueStats>,
    /// Several pools may serve one queue (header/payload split, bnxt's head
    /// pool), ordered by pool id.
    pub pools: Vec<Pool>,
}

/// A memory provider behind a pool or queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum MemoryProvider {
    /// devmem TCP: the dmabuf binding id.
    Dmabuf { id: u32 },
    /// io_uring zero-copy RX; `rx_buf_len` when the kernel reports it.
    IoUring { rx_buf_len: Option<u64> },
}

/// One page_pool as netlink lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// Pool id; a rebuilt pool gets a new one.
    pub id: u64,
    /// Owning ifindex; `None` once orphaned to loopback.
    pub ifindex: Option<u32>,
    pub napi_id: Option<u64>,
    /// Pages taken from the allocator and not yet returned (includes pages
    /// parked in the pool's own ring and cache).
    pub inflight: Option<u64>,
    pub inflight_mem: Option<u64>,
    /// CLOCK_BOOTTIME seconds at which the pool was destroyed with pages
    /// still out; `None` for a live pool.
    pub detach_time: Option<u64>,
    pub provider: Option<MemoryProvider>,
    /// `None` when the kernel has no `CONFIG_PAGE_POOL_STATS` or the stats
    /// dump did not list this pool.
    pub stats: Option<PoolStats>,
}

impl Pool {
    /// Bytes per page (`PAGE_SIZE << order`), when it can be observed.
    #[must_use]
    pub fn page_bytes(&self) -> Option<u64> {
        match (self.inflight, self.inflight_mem) {
            (Some(n), Some(m)) if n > 0 => Some(m / n),
            _ => None,
        }
    }
}

/// The page_pool counters: one table, [`crate::counters`].
pub use crate::counters::PoolStats;

#[cfg(test)]
mod tests {
    use super::*;

    /// Each entry of a block's `FIELDS` reads and writes its own field and
    /// no other, under a name no other entry has.
    fn fields_are_their_own<B: Default + PartialEq + std::fmt::Debug>(fields: &[Field<B>]) {
        for (n, f) in (100..).zip(fields) {
            let mut b = B::default();
            (f.set)(&mut b, n);
            assert_eq!((f.get)(&b), Some(n), "{}", f.name);
            for o in fields.iter().filter(|o| o.name != f.name) {
                assert_eq!((o.get)(&b), None, "{} wrote {}", f.name, o.name);
            }
        }
        let mut names: Vec<_> = fields.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), fields.len());
    }

    #[test]
    fn block_fields_read_and_write_their_own_field() {
        fields_are_their_own(Rings::FIELDS);
        fields_are_their_own(Channels::FIELDS);
        let r = Rings {
            rx_jumbo_max: Some(4096),
            tcp_data_split: Some(2),
            ..Rings::default()
        };
        let get = |name| Rings::FIELDS.iter().find(|f| f.name == name).unwrap().get;
        assert_eq!(get("rx_jumbo_max")(&r), Some(4096));
        assert_eq!(get("tcp_data_split")(&r), Some(2));
        // A value the field's type cannot hold is not reported.
        let mut r = Rings::default();
        let split = Rings::FIELDS
            .iter()
            .find(|f| f.name == "tcp_data_split")
            .unwrap();
        (split.set)(&mut r, 300);
        assert_eq!(r.tcp_data_split, None);
    }
}
