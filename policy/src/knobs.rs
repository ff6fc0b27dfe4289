//! What a knob is: one descriptor per device setting pptune may change —
//! its name, how to read its value and maximum from a sample (from the
//! ring or the channel block the kernel reports together), which policy
//! section manages it, and what a change does to the device.
//!
//! "Which ring field sizes this driver's pool" is driver knowledge
//! (`drivers.rs`), not a knob property: the engine picks a knob from there
//! and reads and judges it through here.
//!
//! One table (`knobs!` below) makes the knob vocabulary: the [`RingField`]
//! and [`ChannelField`] variants, each knob's descriptor with a read half
//! (value and driver maximum in a sample) and a write half (the value set
//! into a block), and [`desc`], which indexes the table by the variant, so
//! a knob without a row cannot exist. Adding a knob (say
//! `ring.hds-thresh`): docs/architecture.md lists the places.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::policy::Policy;
use crate::snapshot::{Channels, Device, Rings};

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
/// Sets a knob's value in the block it lives in.
type Write<B> = fn(&mut B, u32);

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
    /// Sets the value in a rings block.
    set_rings: Option<Write<Rings>>,
    /// Sets the value in a channels block.
    set_channels: Option<Write<Channels>>,
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

    /// Sets the knob to `value` in a rings block (nothing for a channel
    /// knob).
    pub fn set_in_rings(&self, r: &mut Rings, value: u32) {
        if let Some(f) = self.set_rings {
            f(r, value);
        }
    }

    /// Sets the knob to `value` in a channels block (nothing for a ring
    /// knob).
    pub fn set_in_channels(&self, c: &mut Channels, value: u32) {
        if let Some(f) = self.set_channels {
            f(c, value);
        }
    }

    /// Sets the knob to `value` on a sampled device whose block is
    /// available; whether the device held another value before.
    pub fn write(&self, d: &mut Device, value: u32) -> bool {
        let before = self.read(d).0;
        match self.block {
            Block::Rings => {
                if let Some(r) = d.rings.available_mut() {
                    self.set_in_rings(r, value);
                }
            }
            Block::Channels => {
                if let Some(c) = d.channels.available_mut() {
                    self.set_in_channels(c, value);
                }
            }
        }
        before != self.read(d).0
    }
}

fn rings_enabled(p: &Policy) -> bool {
    p.rings.enabled
}

fn channels_enabled(p: &Policy) -> bool {
    p.channels.enabled
}

/// The knob table: per block, each knob's variant, name and the snapshot
/// fields of its value and driver maximum. Every knob rebuilds the RX
/// pools when changed; the policy section that manages it is its block's.
macro_rules! knobs {
    (
        rings { $($rv:ident => $rname:literal, $rf:ident, $rmax:ident;)* }
        channels { $($cv:ident => $cname:literal, $cf:ident, $cmax:ident;)* }
    ) => {
        /// A ring pptune may size (the one that sizes a driver's pool).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum RingField {
            $($rv,)*
        }

        /// A channel count pptune may set.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum ChannelField {
            $($cv,)*
        }

        /// The ring knobs, in [`RingField`] order.
        const RING_KNOBS: &[KnobDesc] = &[$(KnobDesc {
            knob: Knob::Ring(RingField::$rv),
            name: $rname,
            block: Block::Rings,
            rings: Some(|r| (r.$rf, r.$rmax)),
            channels: None,
            set_rings: Some(|r, v| r.$rf = Some(v)),
            set_channels: None,
            managed: rings_enabled,
            rebuilds_pools: true,
        },)*];

        /// The channel knobs, in [`ChannelField`] order.
        const CHANNEL_KNOBS: &[KnobDesc] = &[$(KnobDesc {
            knob: Knob::Channels(ChannelField::$cv),
            name: $cname,
            block: Block::Channels,
            rings: None,
            channels: Some(|c| (c.$cf, c.$cmax)),
            set_rings: None,
            set_channels: Some(|c, v| c.$cf = Some(v)),
            managed: channels_enabled,
            rebuilds_pools: true,
        },)*];
    };
}

knobs! {
    rings {
        Rx => "ring.rx", rx, rx_max;
        RxMini => "ring.rx-mini", rx_mini, rx_mini_max;
        RxJumbo => "ring.rx-jumbo", rx_jumbo, rx_jumbo_max;
    }
    channels {
        Combined => "channels.combined", combined, combined_max;
        Rx => "channels.rx", rx, rx_max;
    }
}

/// Every knob pptune knows: the rings', then the channels'.
pub fn all() -> impl Iterator<Item = &'static KnobDesc> {
    RING_KNOBS.iter().chain(CHANNEL_KNOBS)
}

/// The descriptor of `knob`: its row, by its variant's place in the table
/// both were made from.
#[must_use]
pub fn desc(knob: Knob) -> &'static KnobDesc {
    match knob {
        Knob::Ring(f) => &RING_KNOBS[f as usize],
        Knob::Channels(f) => &CHANNEL_KNOBS[f as usize],
    }
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
        for d in super::all() {
            assert!(
                std::ptr::eq(desc(d.knob), d),
                "{}: desc finds another row",
                d.name
            );
            assert_eq!(
                super::all().filter(|o| o.name == d.name).count(),
                1,
                "{}",
                d.name
            );
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

    /// Each row's write half sets what its read half reads, in its own
    /// block only: a row whose halves disagree (a field copied wrong)
    /// fails here.
    #[test]
    fn every_row_reads_back_what_it_writes_and_nothing_else() {
        let blank = Device {
            rings: Availability::Available(Rings::default()),
            channels: Availability::Available(Channels::default()),
            ..Device::default()
        };
        for (n, k) in super::all().enumerate() {
            let mut d = blank.clone();
            let v = 100 + u32::try_from(n).unwrap();
            assert!(k.write(&mut d, v), "{}: nothing changed", k.name);
            assert_eq!(k.read(&d).0, Some(v), "{}", k.name);
            assert!(!k.write(&mut d, v), "{}: a second write changed", k.name);
            for other in super::all().filter(|o| o.knob != k.knob) {
                assert_eq!(other.read(&d).0, None, "{} wrote {}", k.name, other.name);
            }
        }
        // A block the device does not report is left alone.
        let mut d = Device::default();
        assert!(!desc(Knob::Ring(RingField::Rx)).write(&mut d, 512));
        assert_eq!(value(&d, Knob::Ring(RingField::Rx)), None);
    }
}
