//! What `plan` and `status` say could be reclaimed: per device and in
//! total, the memory right-sizing's first step would give back now
//! (`policy::engine::reclaimable`: the ring that covers the most pages
//! the pools had out since they were built), and why.

use std::fmt::Write as _;

use policy::Policy;
use policy::snapshot::Snapshot;
use serde::Serialize;

/// One device's reclaimable memory.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReclaim {
    pub device: String,
    pub ring: u32,
    pub to: u32,
    pub bytes: u64,
    /// The most pages a queue has out beyond its posted ring (its pools'
    /// high-water mark since they were built).
    pub held_pages: u64,
    pub floor: u32,
}

/// Every device's, and the total.
#[derive(Debug, Clone, Serialize)]
pub struct Reclaimable {
    /// Whether the policy lets `run` act on it (`rings.right_size`).
    pub right_size: bool,
    pub devices: Vec<DeviceReclaim>,
    pub total_bytes: u64,
}

impl Reclaimable {
    /// From one sample: the devices the policy selects, in snapshot order.
    #[must_use]
    pub fn of(policy: &Policy, snap: &Snapshot) -> Self {
        let devices: Vec<DeviceReclaim> = snap
            .devices
            .iter()
            .filter(|d| policy.mode_for(d).is_some())
            .filter_map(|d| {
                let r = policy::engine::reclaimable(policy, d)?;
                Some(DeviceReclaim {
                    device: d.name.clone(),
                    ring: r.ring,
                    to: r.to,
                    bytes: r.bytes,
                    held_pages: r.held,
                    floor: r.floor,
                })
            })
            .collect();
        let total_bytes = devices.iter().map(|d| d.bytes).fold(0, u64::saturating_add);
        Self {
            right_size: policy.rings.right_size,
            devices,
            total_bytes,
        }
    }

    /// The text: a heading, one line per device, the total.
    #[must_use]
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "reclaimable ring memory (right-sizing, rings.right_size: {}):",
            if self.right_size {
                "on, run takes it in judged steps"
            } else {
                "off in this policy, run leaves rings it did not grow as they are"
            }
        );
        if self.devices.is_empty() {
            let _ = writeln!(
                o,
                "  none: every selected ring is within the headroom of what its pools had out since they were built (or the kernel reports no inflight)"
            );
            return o;
        }
        for d in &self.devices {
            let _ = writeln!(
                o,
                "  {}: {:.1} MiB (ring {} → {}): since its pools were built no queue had more than {} pages out beyond the posted ring; {} covers that with the policy's headroom (floor {})",
                d.device,
                mib(d.bytes),
                d.ring,
                d.to,
                d.held_pages,
                d.to,
                d.floor
            );
        }
        let _ = writeln!(
            o,
            "  total: {:.1} MiB on {} device(s) (a pool's inflight is a high-water mark until a rebuild: a load that needs less now may free more, which only a judged step can find)",
            mib(self.total_bytes),
            self.devices.len()
        );
        o
    }
}

#[allow(clippy::cast_precision_loss)]
fn mib(b: u64) -> f64 {
    b as f64 / f64::from(1u32 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::fixtures::{self, Nic, QueueCounters};

    #[test]
    fn a_ring_at_max_with_little_out_is_reclaimable_and_said_so() {
        let policy = fixtures::policy();
        let mut nic = Nic::pci(1, "ice", 2);
        nic.rings.rx = Some(8160);
        nic.rings.rx_max = Some(8160);
        // Each queue: 8160 buffers posted, 600 pages more out at most.
        let dev = nic.device(|_| QueueCounters {
            inflight: 8160 + 600,
            ..QueueCounters::default()
        });
        let snap = fixtures::snapshot(0, "7.3.4", vec![dev]);
        let r = Reclaimable::of(&policy, &snap);
        assert_eq!(r.devices.len(), 1, "{r:?}");
        assert_eq!((r.devices[0].ring, r.devices[0].to), (8160, 768));
        assert_eq!(r.total_bytes, r.devices[0].bytes);
        let text = r.render();
        assert!(text.contains("eth1: 115."), "{text}");
        assert!(text.contains("ring 8160 → 768"), "{text}");
        assert!(text.contains("600 pages out"), "{text}");
        assert!(text.contains("off in this policy"), "{text}");
        assert!(text.contains("total: 115."), "{text}");
    }
}
