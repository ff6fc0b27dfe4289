//! What a recycle miss costs on a device, where the host says it, and the
//! thresholds that follow (docs/decisions.md §4 "The price of a miss").
//!
//! A page freed past a full pool ring goes back to the page allocator, and
//! a later refill takes one from it: a miss costs a free and an
//! allocation more than a recycle. Behind an IOMMU it also costs an unmap
//! and a map (the pool maps what it takes, `PP_FLAG_DMA_MAP`, and unmaps
//! what it gives back), so the same freed share costs more there. The
//! thresholds in a policy are freed shares at which memory is worth
//! spending **at the reference price**: a page allocator with no IOMMU
//! translation. A device whose misses cost `f` times that grows at `1/f`
//! of the share, and is calm only under `1/f` of the shrink share: the
//! same miss cost per page returned buys the same memory.
//!
//! The prices are the testbed's calibration (docs/testbed.md
//! "Calibration": guest instructions of a miss over a recycle, median of 6
//! reads, `benches/slowpath-cost.sh`): 4,673 with clearing and no IOMMU,
//! 8,128 with a lazy IOMMU (`DMA-FQ`), 8,590 with a strict one (`DMA`).
//! The testbed under-prices the IOMMU against bare metal, the strict mode
//! most (about 70 recycles a miss there against 43 here), so the factors
//! are a floor. A host that says nothing (no parent device, an unreadable
//! group, a domain that is not the DMA API's) is priced at the reference:
//! no host fact, no change.

use serde::{Deserialize, Serialize};

use crate::policy::Thresholds;
use crate::snapshot::{Device, Iommu};

/// What a recycle miss costs on a device, by what its host says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissCost {
    /// The host says nothing that prices it: the reference.
    #[default]
    Unknown,
    /// Pages from the page allocator, DMA not translated (no IOMMU group,
    /// or an identity domain): the reference.
    PageAllocator,
    /// Every pool of the device is a memory provider's (devmem TCP,
    /// io_uring zero-copy RX): a miss goes back to the provider's buffers,
    /// mapped once at bind, with no page allocation or mapping. Not
    /// calibrated against the reference (a provider refill read 1.7–5.6
    /// thousand guest instructions on the devmem profile, the reference's
    /// range): priced as the reference.
    Provider,
    /// Page allocator plus an IOMMU map and a batched unmap per miss.
    IommuLazy,
    /// Page allocator plus an IOMMU map and an unmap invalidated at once.
    IommuStrict,
}

/// Guest instructions of a miss over a recycle on the testbed's profiles
/// (docs/testbed.md "Calibration").
const REFERENCE_MISS: f64 = 4673.0;
const IOMMU_LAZY_MISS: f64 = 8128.0;
const IOMMU_STRICT_MISS: f64 = 8590.0;

impl MissCost {
    /// A device's: a memory provider's when every queue whose pools have
    /// stats has one (a provider on some queues only leaves the others
    /// paying the allocator and the IOMMU: the device is priced by those),
    /// else its IOMMU domain's.
    #[must_use]
    pub fn of(dev: &Device) -> Self {
        let mut judged = dev
            .rx_queues
            .iter()
            .filter(|q| q.pools.iter().any(|p| p.stats.is_some()))
            .peekable();
        if judged.peek().is_some() && judged.all(crate::snapshot::RxQueue::has_provider) {
            return Self::Provider;
        }
        match dev.iommu {
            Iommu::Unknown | Iommu::Other => Self::Unknown,
            Iommu::NoGroup | Iommu::Identity => Self::PageAllocator,
            Iommu::Lazy => Self::IommuLazy,
            Iommu::Strict => Self::IommuStrict,
        }
    }

    /// A miss's cost in reference misses.
    #[must_use]
    pub fn factor(self) -> f64 {
        match self {
            Self::Unknown | Self::PageAllocator | Self::Provider => 1.0,
            Self::IommuLazy => IOMMU_LAZY_MISS / REFERENCE_MISS,
            Self::IommuStrict => IOMMU_STRICT_MISS / REFERENCE_MISS,
        }
    }

    /// Its name in `status`, `plan` and the metrics.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::PageAllocator => "page-allocator",
            Self::Provider => "provider",
            Self::IommuLazy => "iommu-lazy",
            Self::IommuStrict => "iommu-strict",
        }
    }

    /// What it means, for a person.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Self::Unknown => "the host does not say (priced as the page allocator)",
            Self::PageAllocator => "a page from the allocator, DMA not translated",
            Self::Provider => "a buffer back to the memory provider (priced as the page allocator)",
            Self::IommuLazy => {
                "a page from the allocator, IOMMU-mapped, unmapped through a flush queue"
            }
            Self::IommuStrict => {
                "a page from the allocator, IOMMU-mapped, unmapped and invalidated at once"
            }
        }
    }
}

impl Thresholds {
    /// The thresholds at `cost`: every freed or slow share divided by its
    /// factor (the page floor and the sample count are not prices).
    #[must_use]
    pub fn priced(&self, cost: MissCost) -> Self {
        let f = cost.factor();
        Self {
            grow_recycle_miss: self.grow_recycle_miss / f,
            grow_slow_refill: self.grow_slow_refill / f,
            shrink_recycle_miss: self.shrink_recycle_miss / f,
            severe_recycle_miss: self.severe_recycle_miss / f,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_types_as_sysfs_writes_them() {
        assert_eq!(Iommu::from_group_type(None), Iommu::NoGroup);
        assert_eq!(Iommu::from_group_type(Some("DMA\n")), Iommu::Strict);
        assert_eq!(Iommu::from_group_type(Some("DMA-FQ\n")), Iommu::Lazy);
        assert_eq!(Iommu::from_group_type(Some("identity\n")), Iommu::Identity);
        assert_eq!(Iommu::from_group_type(Some("blocked\n")), Iommu::Other);
        assert_eq!(Iommu::from_group_type(Some("unmanaged\n")), Iommu::Other);
    }

    /// No host fact prices nothing; a dearer miss lowers every share in
    /// proportion, so their order (shrink < grow ≤ severe) holds.
    #[test]
    fn a_dearer_miss_lowers_the_shares_in_proportion() {
        let th = crate::fixtures::policy().thresholds;
        for cost in [
            MissCost::Unknown,
            MissCost::PageAllocator,
            MissCost::Provider,
        ] {
            assert_eq!(th.priced(cost), th, "{cost:?}");
        }
        let strict = th.priced(MissCost::IommuStrict);
        let f = th.grow_recycle_miss / strict.grow_recycle_miss;
        assert!((f - 8590.0 / 4673.0).abs() < 1e-9, "{f}");
        assert!((th.shrink_recycle_miss / strict.shrink_recycle_miss - f).abs() < 1e-9);
        assert!((th.grow_slow_refill / strict.grow_slow_refill - f).abs() < 1e-9);
        assert!(strict.shrink_recycle_miss < strict.grow_recycle_miss);
        assert!(strict.grow_recycle_miss <= strict.severe_recycle_miss);
        assert_eq!(strict.min_pages_per_window, th.min_pages_per_window);
        assert_eq!(strict.severe_samples, th.severe_samples);
        let lazy = th.priced(MissCost::IommuLazy);
        assert!(lazy.grow_recycle_miss > strict.grow_recycle_miss);
        assert!(lazy.grow_recycle_miss < th.grow_recycle_miss);
    }

    /// A device is a provider's only when every queue with pool stats has
    /// a provider (its own binding or a pool's); a provider on one queue of
    /// two leaves the device priced by its IOMMU domain.
    #[test]
    fn a_provider_prices_a_device_only_on_every_queue() {
        use crate::snapshot::{Iommu, MemoryProvider};
        let mut d = crate::fixtures::nic("mlx5_core", 1024, 8192, 2);
        d.iommu = Iommu::Strict;
        assert_eq!(MissCost::of(&d), MissCost::IommuStrict);
        d.rx_queues[0].pools[0].provider = Some(MemoryProvider::Dmabuf { id: 1 });
        assert_eq!(MissCost::of(&d), MissCost::IommuStrict);
        d.rx_queues[1].provider = Some(MemoryProvider::Dmabuf { id: 1 });
        assert_eq!(MissCost::of(&d), MissCost::Provider);
    }
}
