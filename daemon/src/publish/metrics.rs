//! Every metric pptune exports, declared here and only here.
//!
//! Conventions: names `pptune_*`; counters are registered without `_total`
//! because prometheus-client appends it; units are passed as units (the
//! encoder appends them to the name and writes `# UNIT`); the label `device`
//! joins node_exporter's series; no label is keyed by pool id (ids change on
//! every rebuild). Pool counters are exported per (device, RX queue) as the
//! running sum of `policy::accounting`'s per-pool deltas: retired pools stay
//! counted and a reset adds nothing, so they stay monotonic across the pool
//! rebuilds that every ring change causes. The counter families come from
//! the one counter table, `policy::counters`.
//!
//! The per-queue families (one for each pool counter of `policy::counters`,
//! then `series.rs`'s `QUEUE_GAUGES` and `QUEUE_RATIOS`) are kept in one
//! map of plain values and written by [`Metrics::encode`]
//! itself, in exactly prometheus-client's OpenMetrics text form, ahead of
//! the registry's other families (where prometheus-client would have put
//! them: they are the first registered). As `Family`s they cost a hashed
//! label-set lookup per series per tick and a generic per-series encode per
//! scrape, and the label strings were built and compared per queue.
//!
//! [`Metrics`] is the registry, its encoding and the handle the loop
//! updates every series through; what each update writes has a file of its
//! own: `devices.rs`, each device's series and their lifecycle;
//! `decisions.rs`, the counters of what the daemon decided and did;
//! `policy_gauges.rs`, the policy's loads and rollout; `shadow.rs`, the
//! shadow policy's series.

use std::sync::Mutex;
use std::sync::atomic::Ordering;

use policy::accounting::PassDeltas;
use policy::counters::METRICS as POOL_COUNTERS;

use crate::act::events::Event;
use crate::act::rollout::Standing;
use crate::publish::notes::Unjudged;
use policy::Policy;
use policy::plan::Decision;
use policy::policy::QueueSelection;
use policy::snapshot::{Device, Snapshot};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicUsize;

mod decisions;
mod devices;
mod families;
mod family;
mod labels;
mod policy_gauges;
mod series;
pub mod shadow;
pub use families::Families;
use families::exposed;
pub use labels::*;
use series::*;

/// Error kinds counted in `pptune_errors_total` (every kind is exported from
/// the start, at 0, so an alert can use `increase()` from the first scrape).
pub const ERROR_KINDS: &[&str] = &[
    "sample",
    "sample_device",
    "set",
    "verify",
    "state_write",
    "policy_reload",
    "control",
];

/// The registry and every family.
#[derive(Debug)]
pub struct Metrics {
    /// Every family but the per-queue ones (see the module docs).
    registry: Registry,
    /// The registered families ([`families`]); `Metrics` derefs to them.
    families: Families,
    /// The label sets each device has, so a device that vanishes takes
    /// its series with it.
    devices: devices::DeviceSeries,
    carry: Mutex<Carry>,
    /// Which queues get per-queue series (the policy's
    /// `daemon.queue_metrics`); device sums are always written.
    queue_series: Mutex<QueueSelection>,
    /// Liveness and readiness, reported by the loop, read by `/readyz`.
    pub health: crate::publish::health::Health,
    /// Length of the last exposition, to size the next one in one go.
    last_len: AtomicUsize,
    /// The shadow policy's per-device series.
    shadow: shadow::ShadowSeries,
}

impl std::ops::Deref for Metrics {
    type Target = Families;

    fn deref(&self) -> &Families {
        &self.families
    }
}

/// Every family name as it appears in the exposition (counters with
/// `_total`), for docs and tests.
pub fn family_names() -> Vec<String> {
    let mut v: Vec<String> = POOL_COUNTERS
        .iter()
        .map(|c| exposed(c.metric, c.unit, MetricType::Counter))
        .collect();
    v.extend(
        QUEUE_GAUGES
            .iter()
            .map(|(name, unit, _)| exposed(name, *unit, MetricType::Gauge)),
    );
    v.extend(
        QUEUE_RATIOS
            .iter()
            .map(|(name, _)| exposed(name, Some("ratio"), MetricType::Gauge)),
    );
    v.extend(Families::names());
    v.push("pptune_build_info".to_owned());
    v.extend(crate::publish::process_metrics::FAMILY_NAMES.map(String::from));
    let queue_families: Vec<String> = v
        .iter()
        .take(POOL_COUNTERS.len() + QUEUE_GAUGES.len())
        .map(|n| device_name(n))
        .collect();
    v.extend(queue_families);
    v
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    #[must_use]
    pub fn new() -> Self {
        // The per-queue families are not registered: `encode` writes them
        // (first, where their registration used to put them).
        let mut r = Registry::default();
        let families = Families::register(&mut r);
        r.register(
            "pptune_build",
            "Build information",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
                revision: env!("PPTUNE_GIT_REVISION").to_owned(),
            }),
        );
        r.register_collector(Box::new(crate::publish::process_metrics::ProcessCollector));
        for k in ERROR_KINDS {
            let _ = families.errors.get_or_create(&KindLabels {
                kind: (*k).to_owned(),
            });
        }
        for source in netlink::events::NOTIFY_SOURCES {
            let _ = families.resyncs.get_or_create(&KindLabels {
                kind: source.to_owned(),
            });
        }
        for why in Unjudged::ALL {
            let _ = families.judging_nothing.get_or_create(&ReasonLabels {
                reason: why.as_str(),
            });
        }
        for res in ["ok", "invalid"] {
            let _ = families.reloads.get_or_create(&ResultLabels {
                result: res.to_owned(),
            });
        }
        families.policy_valid.set(1);
        families.rollout_fraction.set(1.0);
        Self {
            registry: r,
            families,
            devices: devices::DeviceSeries::default(),
            carry: Mutex::new(Carry::default()),
            queue_series: Mutex::new(QueueSelection::All),
            health: crate::publish::health::Health::default(),
            last_len: AtomicUsize::new(0),
            shadow: shadow::ShadowSeries::default(),
        }
    }

    /// One pass of the shadow policy; `None`: no shadow runs (its series
    /// go).
    pub fn observe_shadow(&self, pass: Option<&shadow::ShadowPass<'_>>) {
        self.shadow_running.set(i64::from(pass.is_some()));
        match pass {
            Some(p) => self.shadow.observe(&self.families, p),
            None => self.shadow.clear(&self.families),
        }
    }

    /// The OpenMetrics text exposition.
    ///
    /// Sized from the last one, so a steady exposition is one allocation
    /// rather than a string doubled a dozen times.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let hint = self.last_len.load(Ordering::Relaxed);
        let mut s = String::with_capacity(hint + hint / 16 + 1024);
        self.encode_queues(&mut s)?;
        prometheus_client::encoding::text::encode(&mut s, &self.registry)?;
        self.last_len.store(s.len(), Ordering::Relaxed);
        Ok(s)
    }

    /// The per-queue families, as prometheus-client would write them had
    /// they been registered `Family<QueueLabels, _>`s: a family without
    /// series is left out; series in (device, queue) order.
    fn encode_queues(&self, out: &mut String) -> std::fmt::Result {
        let Ok(carry) = self.carry.lock() else {
            return Ok(());
        };
        let policy = self.queue_series.lock().map_or(QueueSelection::All, |p| *p);
        let mut selected = Vec::new();
        for d in carry.devices.values() {
            select_queues(d, policy, &mut selected);
        }
        let queues = || selected.iter().copied();
        let mut num = itoa_buf();
        if queues().any(|q| q.counters.is_some()) {
            for (i, m) in POOL_COUNTERS.iter().enumerate() {
                descriptor(out, m.metric, m.unit, m.help, "counter");
                for q in queues() {
                    if let Some(c) = &q.counters {
                        series(out, m.metric, m.unit, "_total", &q.labels);
                        out.push_str(num.format(c[i]));
                        out.push('\n');
                    }
                }
            }
        }
        if queues().next().is_some() {
            for (i, (name, unit, help)) in QUEUE_GAUGES.iter().enumerate() {
                descriptor(out, name, *unit, help, "gauge");
                for q in queues() {
                    series(out, name, *unit, "", &q.labels);
                    out.push_str(num.format(q.gauges[i]));
                    out.push('\n');
                }
            }
        }
        let mut float = dtoa::Buffer::new();
        for (i, (name, help)) in QUEUE_RATIOS.iter().enumerate() {
            if !queues().any(|q| q.ratios[i].is_some()) {
                continue;
            }
            descriptor(out, name, Some("ratio"), help, "gauge");
            for q in queues() {
                if let Some(v) = q.ratios[i] {
                    series(out, name, Some("ratio"), "", &q.labels);
                    out.push_str(float.format(v));
                    out.push('\n');
                }
            }
        }
        encode_device_sums(out, &carry.devices);
        Ok(())
    }

    /// Which queues get per-queue series from now on (at start and after
    /// each reload).
    pub fn set_queue_series(&self, s: QueueSelection) {
        if let Ok(mut p) = self.queue_series.lock() {
            *p = s;
        }
    }

    /// Counts one error of `kind` (`pptune_errors_total`).
    pub fn error(&self, kind: &str) {
        decisions::error(&self.families, kind);
    }

    /// Updates the per-device series from one pass: its snapshot and the
    /// pass's pool deltas (computed once, for the engine and for these).
    pub fn observe(&self, snap: &Snapshot, deltas: &PassDeltas) {
        let Ok(mut guard) = self.carry.lock() else {
            return;
        };
        let carry = &mut *guard;
        let caps = &snap.capabilities;
        let gauges = carry.capabilities.get_or_insert_with(|| {
            CAPABILITIES.map(|name| {
                self.capability
                    .get_or_create(&CapLabels {
                        capability: name.to_owned(),
                    })
                    .clone()
            })
        });
        for (g, v) in gauges.iter().zip([
            caps.netdev_family,
            caps.page_pool_get,
            caps.page_pool_stats,
            caps.queue_get,
            caps.napi_get,
            caps.qstats_get,
            caps.ethtool_family,
            caps.cap_net_admin,
        ]) {
            g.set(i64::from(v));
        }
        self.orphan_pools
            .set(i64::try_from(snap.orphan_pools.len()).unwrap_or(i64::MAX));
        self.orphan_inflight_pages.set(sat(snap
            .orphan_pools
            .iter()
            .filter_map(|p| p.inflight)
            .sum::<u64>()));
        carry.tick += 1;
        let tick = carry.tick;
        for (at, dev) in snap.devices.iter().enumerate() {
            if let Some(d) = carry.observe_device(dev, deltas.queues(at), tick) {
                self.observe_rings_channels(dev, &mut d.knobs);
            }
            self.devices.observe_info(&self.families, dev);
            self.devices.observe_link(&self.families, dev);
        }
        let devices = &mut carry.devices;
        // Devices that vanished (not in this snapshot): drop their
        // ring/channel/mode series and carried totals. Queues that
        // vanished: drop their series, so churning virtual devices do not
        // leak series; a queue that comes back resumes from its carried
        // total.
        devices.retain(|name, d| {
            let gone = d.seen != tick;
            for (_, q) in &mut d.queues {
                if q.exported && q.seen != tick {
                    q.forget();
                }
            }
            if gone {
                self.devices.forget(&self.families, name);
            }
            !gone
        });
    }

    /// The device's ring and channel gauges, through the handles kept in
    /// `knobs` (a label set is built once per series, not once per pass).
    fn observe_rings_channels(&self, dev: &Device, knobs: &mut KnobGauges) {
        if let Some(r) = dev.rings.available() {
            let values = [
                (r.rx, r.rx_max),
                (r.rx_mini, r.rx_mini_max),
                (r.rx_jumbo, r.rx_jumbo_max),
                (r.tx, r.tx_max),
            ];
            set_knob_gauges(
                [&self.ring, &self.ring_max],
                &RINGS,
                values,
                &mut knobs.rings,
                |n| RingLabels {
                    device: dev.name.clone(),
                    ring: n.to_owned(),
                },
            );
        }
        if let Some(c) = dev.channels.available() {
            let values = [
                (c.rx, c.rx_max),
                (c.tx, c.tx_max),
                (c.other, c.other_max),
                (c.combined, c.combined_max),
            ];
            let families = [&self.channels, &self.channels_max];
            set_knob_gauges(families, &CHANNELS, values, &mut knobs.channels, |n| {
                ChannelLabels {
                    device: dev.name.clone(),
                    channel: n.to_owned(),
                }
            });
        }
    }

    /// What the actuator did ([`decisions::count`]).
    pub fn count(&self, events: impl IntoIterator<Item = Event>) {
        decisions::count(&self.families, &self.devices, events);
    }

    /// Why the host judges no device (`None`: it judges some): 1 for that
    /// reason of `pptune_judging_nothing`, 0 for the others.
    pub fn set_judging_nothing(&self, why: Option<Unjudged>) {
        for w in Unjudged::ALL {
            self.judging_nothing
                .get_or_create(&ReasonLabels { reason: w.as_str() })
                .set(i64::from(Some(w) == why));
        }
    }

    /// One decision of the pass ([`decisions::observe_decision`]).
    pub fn observe_decision(&self, dec: &Decision, mode: &'static str, backed_off: bool) {
        decisions::observe_decision(&self.families, &self.devices, dec, mode, backed_off);
    }

    /// A policy load's outcome ([`policy_gauges::loaded`]), and on success
    /// its queue selection for the series; the hashes of the policy now in
    /// force, for the log, or `None` when it was refused.
    pub fn policy_loaded(
        &self,
        loaded: Result<&Policy, &str>,
    ) -> Option<crate::publish::policy_hash::PolicyHashes> {
        let hashes = policy_gauges::loaded(&self.families, &self.health, loaded);
        if let Ok(p) = loaded {
            self.set_queue_series(p.daemon.queue_series);
        }
        hashes
    }

    /// A valid policy in force (at start, or reloaded;
    /// [`policy_gauges::in_force`]), and its queue selection for the
    /// series. Returns the hashes, for the log.
    pub fn policy_in_force(&self, policy: &Policy) -> crate::publish::policy_hash::PolicyHashes {
        let hashes = policy_gauges::in_force(&self.families, &self.health, policy);
        self.set_queue_series(policy.daemon.queue_series);
        hashes
    }

    /// The rollout gauges ([`policy_gauges::set_rollout`]).
    pub fn set_rollout(&self, s: Standing, p: &Policy) {
        policy_gauges::set_rollout(&self.families, s, p);
    }

    /// Counts a decision (`pptune_decisions_total`).
    pub fn count_decision(
        &self,
        device: &str,
        action: &'static str,
        reason: &'static str,
        mode: &'static str,
    ) {
        self.devices
            .count_decision(&self.families, device, action, reason, mode);
    }

    /// A device the pass decided for, with the knobs the policy manages on
    /// it: every counter the rules, alerts and dashboard read for it exists
    /// from now on, at 0 for what has not happened yet
    /// ([`devices::DeviceSeries::known`]).
    pub fn known(&self, dev: &Device, policy: &Policy, mode: &'static str) {
        self.devices.known(&self.families, dev, policy, mode);
    }

    /// The ring cost estimate of a selected device (`None`: not selected,
    /// or its ring is unknown: no series).
    pub fn set_ring_cost(&self, device: &str, bytes: Option<u64>) {
        self.devices.set_ring_cost(&self.families, device, bytes);
    }

    /// The memory right-sizing could reclaim on a selected device now
    /// (`policy::engine::reclaimable`'s bytes, 0 when it finds nothing);
    /// `None`: not selected, no series.
    pub fn set_reclaimable(&self, device: &str, bytes: Option<u64>) {
        self.devices.set_reclaimable(&self.families, device, bytes);
    }

    /// Why pptune cannot judge `device` (`None`: it can): its one
    /// `pptune_device_unjudged` series, or none.
    pub fn set_unjudged(&self, device: &str, why: Option<Unjudged>) {
        self.devices.set_unjudged(&self.families, device, why);
    }

    /// `pptune_device_backoff` of `device`.
    pub fn set_backoff(&self, device: &str, backed_off: bool) {
        self.devices.set_backoff(&self.families, device, backed_off);
    }

    /// Exports `mode` (`observe`, `enforce`, `unmanaged`) as the device's
    /// one `pptune_device_mode` series.
    pub fn set_mode(&self, device: &str, mode: &'static str) {
        self.devices.set_mode(&self.families, device, mode);
    }

    /// Exports the device's current recommendation (`None` = hold: the
    /// series goes away).
    pub fn set_recommendation(&self, device: &str, rec: Option<(RecLabels, u32)>) {
        self.devices.set_recommendation(&self.families, device, rec);
    }
}

#[cfg(test)]
mod tests;
