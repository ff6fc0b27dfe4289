//! Every series pptune keeps per device, and their lifecycle: the label
//! sets each device has in the families (a `Family` cannot be searched by
//! one label), created as the device is observed and decided for, and
//! dropped together when it vanishes ([`DeviceSeries::forget`]), so
//! churning devices leave no series behind.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use policy::Policy;
use policy::knobs::{self, Block, Knob};
use policy::plan::ReasonCode;
use policy::snapshot::Device;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::families::Families;
use super::family::Family;
use super::labels::*;
use super::series::{CHANNELS, RINGS, sat};
use crate::publish::notes::Unjudged;

/// The values of `pptune_device_mode`'s `mode` label.
const MODES: [&str; 3] = ["observe", "enforce", "unmanaged"];

/// One device's counter label sets (see [`DeviceSeries`]).
#[derive(Debug, Default)]
struct CountedSeries {
    /// Decision counters by (action, reason, mode): set every pass, so
    /// through a kept handle (no label set built per pass).
    decisions: BTreeMap<(&'static str, &'static str, &'static str), Counter>,
    actions: BTreeSet<ActionLabels>,
    overrides: BTreeSet<KnobLabels>,
    /// The backoff flag's handle (set every pass).
    backoff: Option<Gauge>,
    /// The mode series exported, and its handle (set every pass).
    mode: Option<(&'static str, Gauge)>,
    /// The `pptune_device_info` label set exported, and the MTU and speed
    /// it writes (compared each pass without parsing the labels).
    info: Option<(InfoLabels, [Option<u32>; 2])>,
    /// The rx counters' handles and the kernel's values they last counted.
    link: Option<([Counter; 4], [u64; 4])>,
    /// The knobs and modes whose counters exist at 0 ([`DeviceSeries::known`]).
    zeroed: BTreeSet<(Knob, &'static str)>,
    /// The `pptune_device_unjudged` series exported, if any.
    unjudged: Option<Unjudged>,
    /// The ring cost estimate's handle (set every pass).
    ring_cost: Option<Gauge>,
    /// The reclaimable memory's handle (set every pass).
    reclaimable: Option<Gauge>,
}

/// The per-device label sets of the families, by device.
#[derive(Debug, Default)]
pub(super) struct DeviceSeries {
    counted: Mutex<BTreeMap<String, CountedSeries>>,
    /// The recommendation series currently exported per device.
    rec_current: Mutex<BTreeMap<String, RecLabels>>,
}

impl DeviceSeries {
    /// Runs `f` on `device`'s kept series (created on first use).
    fn with_counted(&self, device: &str, f: impl FnOnce(&mut CountedSeries)) {
        let Ok(mut counted) = self.counted.lock() else {
            return;
        };
        let entry = match counted.get_mut(device) {
            Some(c) => c,
            None => counted.entry(device.to_owned()).or_default(),
        };
        f(entry);
    }

    /// Keeps an action counter's labels for [`DeviceSeries::forget`].
    pub(super) fn remember_action(&self, labels: &ActionLabels) {
        self.remember(|c| &mut c.actions, labels.device.as_str(), labels);
    }

    /// Keeps an override counter's labels for [`DeviceSeries::forget`].
    pub(super) fn remember_override(&self, labels: &KnobLabels) {
        self.remember(|c| &mut c.overrides, labels.device.as_str(), labels);
    }

    /// Keeps `labels` under `device` for [`DeviceSeries::forget`].
    fn remember<L: Ord + Clone>(
        &self,
        set: impl FnOnce(&mut CountedSeries) -> &mut BTreeSet<L>,
        device: &str,
        labels: &L,
    ) {
        self.with_counted(device, |c| {
            let set = set(c);
            if !set.contains(labels) {
                set.insert(labels.clone());
            }
        });
    }

    /// Drops every series of a vanished device: ring, channel and mode
    /// gauges, decision, action and override counters, the last-action
    /// time, the backoff flag and the recommendation. A device that comes
    /// back starts its counters from zero (Prometheus' `rate` and
    /// `increase` read that as a reset).
    pub(super) fn forget(&self, f: &Families, device: &str) {
        if let Some(c) = self
            .counted
            .lock()
            .ok()
            .and_then(|mut counted| counted.remove(device))
        {
            for &(action, reason, mode) in c.decisions.keys() {
                f.decisions.remove(&DecisionLabels {
                    device: device.to_owned(),
                    action: action.to_owned(),
                    reason: reason.to_owned(),
                    mode: mode.to_owned(),
                });
            }
            for l in &c.actions {
                f.actions.remove(l);
            }
            for l in &c.overrides {
                f.overrides.remove(l);
            }
            if let Some((l, _)) = &c.info {
                f.device_info.remove(l);
            }
            if let Some(w) = c.unjudged {
                f.device_unjudged.remove(&DevReasonLabels {
                    device: device.to_owned(),
                    reason: w.as_str(),
                });
            }
        }
        let dev = DevLabels {
            device: device.to_owned(),
        };
        f.last_action.remove(&dev);
        f.backoff.remove(&dev);
        f.ring_cost.remove(&dev);
        f.reclaimable.remove(&dev);
        for f in [&f.rx_packets, &f.rx_bytes, &f.rx_missed, &f.rx_dropped] {
            f.remove(&dev);
        }
        self.set_recommendation(f, device, None);
        for ring in RINGS {
            let l = RingLabels {
                device: device.to_owned(),
                ring: ring.to_owned(),
            };
            f.ring.remove(&l);
            f.ring_max.remove(&l);
        }
        for ch in CHANNELS {
            let l = ChannelLabels {
                device: device.to_owned(),
                channel: ch.to_owned(),
            };
            f.channels.remove(&l);
            f.channels_max.remove(&l);
        }
        for mode in MODES {
            f.device_mode.remove(&ModeLabels {
                device: device.to_owned(),
                mode: mode.to_owned(),
            });
        }
    }

    /// The device's `pptune_device_info` series; a new label set (the
    /// driver, kind, MTU, speed, model or firmware changed) replaces the
    /// old one. Allocates only then.
    pub(super) fn observe_info(&self, f: &Families, dev: &Device) {
        let s = |v: &Option<String>| v.as_deref().unwrap_or("").to_owned();
        let n = |v: Option<u32>| v.map_or_else(String::new, |m| m.to_string());
        let numbers = [dev.mtu, dev.speed_mbps];
        self.with_counted(&dev.name, |c| {
            if c.info.as_ref().is_some_and(|(l, nums)| {
                l.device == dev.name
                    && l.driver == dev.driver.as_deref().unwrap_or("")
                    && l.kind == dev.kind.as_deref().unwrap_or("")
                    && l.model == dev.model.as_deref().unwrap_or("")
                    && l.firmware == dev.firmware.as_deref().unwrap_or("")
                    && *nums == numbers
            }) {
                return;
            }
            if let Some((old, _)) = c.info.take() {
                f.device_info.remove(&old);
            }
            let l = InfoLabels {
                device: dev.name.clone(),
                driver: s(&dev.driver),
                kind: s(&dev.kind),
                mtu: n(dev.mtu),
                speed: n(dev.speed_mbps),
                model: s(&dev.model),
                firmware: s(&dev.firmware),
            };
            f.device_info.get_or_create(&l).set(1);
            c.info = Some((l, numbers));
        });
    }

    /// The device's rx counters from its link stats: each pass adds what
    /// the kernel's counters moved. A counter that went back (the device
    /// was reset) is taken as the new base, not counted.
    pub(super) fn observe_link(&self, f: &Families, dev: &Device) {
        let Some(l) = &dev.link_stats else {
            return;
        };
        let now = [
            l.rx_packets,
            l.rx_bytes,
            l.rx_missed_errors.saturating_add(l.rx_fifo_errors),
            l.rx_dropped,
        ];
        self.with_counted(&dev.name, |c| match &mut c.link {
            Some((counters, last)) => {
                for ((counter, last), now) in counters.iter().zip(last.iter_mut()).zip(now) {
                    counter.inc_by(now.saturating_sub(*last));
                    *last = now;
                }
            }
            None => {
                let labels = DevLabels {
                    device: dev.name.clone(),
                };
                let counters = [&f.rx_packets, &f.rx_bytes, &f.rx_missed, &f.rx_dropped]
                    .map(|f| f.get_or_create(&labels));
                c.link = Some((counters, now));
            }
        });
    }

    /// Counts a decision (`pptune_decisions_total`).
    pub(super) fn count_decision(
        &self,
        f: &Families,
        device: &str,
        action: &'static str,
        reason: &'static str,
        mode: &'static str,
    ) {
        self.with_counted(device, |c| {
            c.decisions
                .entry((action, reason, mode))
                .or_insert_with(|| {
                    f.decisions.get_or_create(&DecisionLabels {
                        device: device.to_owned(),
                        action: action.to_owned(),
                        reason: reason.to_owned(),
                        mode: mode.to_owned(),
                    })
                })
                .inc();
        });
    }

    /// A device the pass decided for, with the knobs the policy manages on
    /// it: every counter the rules, alerts and dashboard read for it exists
    /// from now on, at 0 for what has not happened yet (the Prometheus
    /// client convention: a series born at 1 hides its first event from
    /// `increase()` and `rate()`). Per managed knob the device has: the
    /// change results of `pptune_actions_total`
    /// ([`crate::act::events::ACTION_SERIES`]), the override counter, and
    /// the change decisions of its block in `mode`. Allocates only the
    /// first time a (knob, mode) is seen.
    pub(super) fn known(&self, f: &Families, dev: &Device, policy: &Policy, mode: &'static str) {
        self.with_counted(&dev.name, |c| {
            for k in knobs::all().filter(|k| (k.managed)(policy) && k.read(dev).0.is_some()) {
                if c.zeroed.contains(&(k.knob, mode)) {
                    continue;
                }
                let knob_seen = c.zeroed.iter().any(|(z, _)| *z == k.knob);
                c.zeroed.insert((k.knob, mode));
                for &(reason, block) in &ReasonCode::CHANGES {
                    if block != k.block {
                        continue;
                    }
                    let action = match block {
                        Block::Rings => "set_ring",
                        Block::Channels => "set_channels",
                    };
                    c.decisions
                        .entry((action, reason.as_str(), mode))
                        .or_insert_with(|| {
                            f.decisions.get_or_create(&DecisionLabels {
                                device: dev.name.clone(),
                                action: action.to_owned(),
                                reason: reason.as_str().to_owned(),
                                mode: mode.to_owned(),
                            })
                        });
                }
                if knob_seen {
                    continue;
                }
                for &(direction, results) in crate::act::events::ACTION_SERIES {
                    for result in results {
                        let l = ActionLabels {
                            device: dev.name.clone(),
                            knob: k.name.to_owned(),
                            direction: direction.to_owned(),
                            result: (*result).to_owned(),
                        };
                        let _ = f.actions.get_or_create(&l);
                        c.actions.insert(l);
                    }
                }
                let l = KnobLabels {
                    device: dev.name.clone(),
                    knob: k.name.to_owned(),
                };
                let _ = f.overrides.get_or_create(&l);
                c.overrides.insert(l);
            }
        });
    }

    /// The ring cost estimate of a selected device (`None`: not selected,
    /// or its ring is unknown: no series).
    pub(super) fn set_ring_cost(&self, f: &Families, device: &str, bytes: Option<u64>) {
        self.set_device_gauge(device, bytes, &f.ring_cost, |c| &mut c.ring_cost);
    }

    /// The memory right-sizing could reclaim on a selected device now
    /// (`policy::engine::reclaimable`'s bytes, 0 when it finds nothing);
    /// `None`: not selected, no series.
    pub(super) fn set_reclaimable(&self, f: &Families, device: &str, bytes: Option<u64>) {
        self.set_device_gauge(device, bytes, &f.reclaimable, |c| &mut c.reclaimable);
    }

    /// Sets `device`'s series of a per-device gauge through its kept
    /// handle (`None`: the series goes).
    fn set_device_gauge(
        &self,
        device: &str,
        value: Option<u64>,
        family: &Family<DevLabels, Gauge>,
        handle: impl FnOnce(&mut CountedSeries) -> &mut Option<Gauge>,
    ) {
        self.with_counted(device, |c| {
            let handle = handle(c);
            match value {
                Some(v) => {
                    handle
                        .get_or_insert_with(|| {
                            family.get_or_create(&DevLabels {
                                device: device.to_owned(),
                            })
                        })
                        .set(sat(v));
                }
                None => {
                    if handle.take().is_some() {
                        family.remove(&DevLabels {
                            device: device.to_owned(),
                        });
                    }
                }
            }
        });
    }

    /// Why pptune cannot judge `device` (`None`: it can): its one
    /// `pptune_device_unjudged` series, or none.
    pub(super) fn set_unjudged(&self, f: &Families, device: &str, why: Option<Unjudged>) {
        self.with_counted(device, |c| {
            if c.unjudged == why {
                return;
            }
            if let Some(old) = c.unjudged.take() {
                f.device_unjudged.remove(&DevReasonLabels {
                    device: device.to_owned(),
                    reason: old.as_str(),
                });
            }
            if let Some(w) = why {
                f.device_unjudged
                    .get_or_create(&DevReasonLabels {
                        device: device.to_owned(),
                        reason: w.as_str(),
                    })
                    .set(1);
            }
            c.unjudged = why;
        });
    }

    /// `pptune_device_backoff` of `device`.
    pub(super) fn set_backoff(&self, f: &Families, device: &str, backed_off: bool) {
        self.with_counted(device, |c| {
            c.backoff
                .get_or_insert_with(|| {
                    f.backoff.get_or_create(&DevLabels {
                        device: device.to_owned(),
                    })
                })
                .set(i64::from(backed_off));
        });
    }

    /// Exports `mode` (`observe`, `enforce`, `unmanaged`) as the device's
    /// one `pptune_device_mode` series.
    pub(super) fn set_mode(&self, f: &Families, device: &str, mode: &'static str) {
        let label = |m: &str| ModeLabels {
            device: device.to_owned(),
            mode: m.to_owned(),
        };
        self.with_counted(device, |c| match &c.mode {
            Some((m, g)) if *m == mode => {
                g.set(1);
            }
            Some((m, _)) => {
                f.device_mode.remove(&label(m));
                c.mode = Some((mode, f.device_mode.get_or_create(&label(mode))));
                if let Some((_, g)) = &c.mode {
                    g.set(1);
                }
            }
            None => {
                for m in MODES {
                    if m != mode {
                        f.device_mode.remove(&label(m));
                    }
                }
                let g = f.device_mode.get_or_create(&label(mode));
                g.set(1);
                c.mode = Some((mode, g));
            }
        });
    }

    /// Exports the device's current recommendation (`None` = hold: the
    /// series goes away).
    pub(super) fn set_recommendation(
        &self,
        f: &Families,
        device: &str,
        rec: Option<(RecLabels, u32)>,
    ) {
        let Ok(mut cur) = self.rec_current.lock() else {
            return;
        };
        if let Some(old) = cur.remove(device)
            && rec.as_ref().is_none_or(|(l, _)| *l != old)
        {
            f.recommendation.remove(&old);
        }
        if let Some((l, target)) = rec {
            f.recommendation.get_or_create(&l).set(i64::from(target));
            cur.insert(device.to_owned(), l);
        }
    }
}
