//! What a knob is: one descriptor per device setting pptune may change —
//! its name, how to read its value and maximum from a sample (from the
//! ring or the channel block the kernel reports together), which policy
//! section manages it, and what a change does to the device.
//!
//! "Which ring field sizes this driver's pool" is driver knowledge
//! (`drivers.rs`), not a knob property: the engine picks a knob from there
//! and reads and judges it through here.
//!
//! Adding a knob (say `ring.hds-thresh`): its netlink codec attribute (the
//! ethtool codec already decodes every ring attribute), its snapshot field,
//! a [`RingField`]/[`ChannelField`] variant, one [`KNOBS`] row, and the
//! attribute the daemon's kernel seam sets for it (`kernel_netlink.rs`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::policy::Policy;
use crate::snapshot::{Channels, Device, Rings};

/// The ring field that sizes this driver's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RingField {
    Rx,
    RxMini,
    RxJumbo,
}

/// The channel count pptune manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChannelField {
    Combined,
    Rx,
}

/// A knob on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "knob", content = "field")]
pub enum Knob {
    Ring(RingField),
    Channels(ChannelField),
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(desc(*self).name)
    }
}

/// Which block of settings a knob lives in: the kernel reports and sets
/// each block with one message (ethtool RINGS_* / CHANNELS_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Rings,
    Channels,
}

/// A knob's (value, driver maximum) in the block it lives in.
type ReadPair<B> = fn(&B) -> (Option<u32>, Option<u32>);

/// One knob.
#[derive(Debug, Clone, Copy)]
pub struct KnobDesc {
    pub knob: Knob,
    /// Its name in logs, metrics, state and ids (`ring.rx`).
    pub name: &'static str,
    pub block: Block,
    /// Current value and driver maximum in a rings block.
    rings: Option<ReadPair<Rings>>,
    /// Current value and driver maximum in a channels block.
    channels: Option<ReadPair<Channels>>,
    /// Whether the policy manages knobs of this kind at all.
    pub managed: fn(&Policy) -> bool,
    /// A change restarts the device's queues and rebuilds every RX pool
    /// (its cost is the driver's disruption class; its evaluation starts
    /// after the rebuild transient).
    pub rebuilds_pools: bool,
}

impl KnobDesc {
    /// The knob's value and maximum on a sampled device.
    #[must_use]
    pub fn read(&self, d: &Device) -> (Option<u32>, Option<u32>) {
        match (self.block, self.rings, self.channels) {
            (Block::Rings, Some(f), _) => d.rings.available().map_or((None, None), f),
            (Block::Channels, _, Some(f)) => d.channels.available().map_or((None, None), f),
            _ => (None, None),
        }
    }

    /// The knob's (value, maximum) in a rings block (`None`s for a channel
    /// knob).
    #[must_use]
    pub fn pair_in_rings(&self, r: &Rings) -> (Option<u32>, Option<u32>) {
        self.rings.map_or((None, None), |f| f(r))
    }

    /// The knob's value in a rings block (`None` for a channel knob).
    #[must_use]
    pub fn in_rings(&self, r: &Rings) -> Option<u32> {
        self.rings.and_then(|f| f(r).0)
    }

    /// The knob's value in a channels block (`None` for a ring knob).
    #[must_use]
    pub fn in_channels(&self, c: &Channels) -> Option<u32> {
        self.channels.and_then(|f| f(c).0)
    }
}

fn rings_enabled(p: &Policy) -> bool {
    p.rings.enabled
}

fn channels_enabled(p: &Policy) -> bool {
    p.channels.enabled
}

/// Every knob pptune knows.
pub const KNOBS: [KnobDesc; 5] = [
    KnobDesc {
        knob: Knob::Ring(RingField::Rx),
        name: "ring.rx",
        block: Block::Rings,
        rings: Some(|r| (r.rx, r.rx_max)),
        channels: None,
        managed: rings_enabled,
        rebuilds_pools: true,
    },
    KnobDesc {
        knob: Knob::Ring(RingField::RxMini),
        name: "ring.rx-mini",
        block: Block::Rings,
        rings: Some(|r| (r.rx_mini, r.rx_mini_max)),
        channels: None,
        managed: rings_enabled,
        rebuilds_pools: true,
    },
    KnobDesc {
        knob: Knob::Ring(RingField::RxJumbo),
        name: "ring.rx-jumbo",
        block: Block::Rings,
        rings: Some(|r| (r.rx_jumbo, r.rx_jumbo_max)),
        channels: None,
        managed: rings_enabled,
        rebuilds_pools: true,
    },
    KnobDesc {
        knob: Knob::Channels(ChannelField::Combined),
        name: "channels.combined",
        block: Block::Channels,
        rings: None,
        channels: Some(|c| (c.combined, c.combined_max)),
        managed: channels_enabled,
        rebuilds_pools: true,
    },
    KnobDesc {
        knob: Knob::Channels(ChannelField::Rx),
        name: "channels.rx",
        block: Block::Channels,
        rings: None,
        channels: Some(|c| (c.rx, c.rx_max)),
        managed: channels_enabled,
        rebuilds_pools: true,
    },
];

/// The descriptor of `knob`.
#[must_use]
pub fn desc(knob: Knob) -> &'static KnobDesc {
    // Every Knob has a row (the test below checks it); the first row is a
    // harmless fallback the match cannot reach.
    KNOBS.iter().find(|d| d.knob == knob).unwrap_or(&KNOBS[0])
}

/// A knob's current value on a sampled device.
#[must_use]
pub fn value(d: &Device, knob: Knob) -> Option<u32> {
    desc(knob).read(d).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Availability;

    #[test]
    fn every_knob_has_one_row_and_reads_its_own_field() {
        let all = [
            Knob::Ring(RingField::Rx),
            Knob::Ring(RingField::RxMini),
            Knob::Ring(RingField::RxJumbo),
            Knob::Channels(ChannelField::Combined),
            Knob::Channels(ChannelField::Rx),
        ];
        for k in all {
            assert_eq!(KNOBS.iter().filter(|d| d.knob == k).count(), 1, "{k:?}");
            assert_eq!(desc(k).knob, k);
        }
        let d = Device {
            rings: Availability::Available(Rings {
                rx: Some(256),
                rx_max: Some(4096),
                rx_jumbo: Some(7),
                ..Rings::default()
            }),
            channels: Availability::Available(Channels {
                combined: Some(8),
                combined_max: Some(64),
                ..Channels::default()
            }),
            ..Device::default()
        };
        assert_eq!(
            desc(Knob::Ring(RingField::Rx)).read(&d),
            (Some(256), Some(4096))
        );
        assert_eq!(value(&d, Knob::Ring(RingField::RxJumbo)), Some(7));
        assert_eq!(value(&d, Knob::Ring(RingField::RxMini)), None);
        assert_eq!(
            desc(Knob::Channels(ChannelField::Combined)).read(&d),
            (Some(8), Some(64))
        );
        assert_eq!(
            Knob::Channels(ChannelField::Combined).to_string(),
            "channels.combined"
        );
    }
}
