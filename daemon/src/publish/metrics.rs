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
//! The per-queue families (the eleven pool counters, pools, inflight pages
//! and bytes, the three ratios: 17 series per queue)
//! are kept in one map of plain values and written by [`Metrics::encode`]
//! itself, in exactly prometheus-client's OpenMetrics text form, ahead of
//! the registry's other families (where prometheus-client would have put
//! them: they are the first registered). As `Family`s they cost a hashed
//! label-set lookup per series per tick and a generic per-series encode per
//! scrape, and the label strings were built and compared per queue.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use policy::accounting::PassDeltas;
use policy::counters::METRICS as POOL_COUNTERS;

use crate::act::events::Event;
use crate::act::rollout::{self, Arm, Standing};
use crate::publish::notes::Unjudged;
use policy::Policy;
use policy::knobs::{self, Block, Knob};
use policy::plan::{Action, Decision, ReasonCode};
use policy::policy::QueueSelection;
use policy::snapshot::{Device, Snapshot};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicUsize;

mod families;
mod labels;
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

/// The values of `pptune_device_mode`'s `mode` label.
const MODES: [&str; 3] = ["observe", "enforce", "unmanaged"];

/// One device's counter label sets (see [`Metrics::counted`]).
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
    /// The knobs and modes whose counters exist at 0 ([`Metrics::known`]).
    zeroed: BTreeSet<(Knob, &'static str)>,
    /// The `pptune_device_unjudged` series exported, if any.
    unjudged: Option<Unjudged>,
    /// The ring cost estimate's handle (set every pass).
    ring_cost: Option<Gauge>,
    /// The reclaimable memory's handle (set every pass).
    reclaimable: Option<Gauge>,
}

/// The registry and every family.
#[derive(Debug)]
pub struct Metrics {
    /// Every family but the per-queue ones (see the module docs).
    registry: Registry,
    /// The registered families ([`families`]); `Metrics` derefs to them.
    families: Families,
    /// The recommendation series currently exported per device.
    rec_current: Mutex<BTreeMap<String, RecLabels>>,
    /// The label sets of the per-device counters, by device, so a device
    /// that vanishes takes them with it (a `Family` cannot be searched by
    /// one label).
    counted: Mutex<BTreeMap<String, CountedSeries>>,
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
            rec_current: Mutex::new(BTreeMap::new()),
            counted: Mutex::new(BTreeMap::new()),
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

    pub fn error(&self, kind: &str) {
        self.errors
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
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
            self.observe_info(dev);
            self.observe_link(dev);
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
                self.forget_device(name);
            }
            !gone
        });
    }

    /// The device's `pptune_device_info` series; a new label set (the
    /// driver, kind, MTU, speed, model or firmware changed) replaces the
    /// old one. Allocates only then.
    fn observe_info(&self, dev: &Device) {
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
                self.device_info.remove(&old);
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
            self.device_info.get_or_create(&l).set(1);
            c.info = Some((l, numbers));
        });
    }

    /// The device's rx counters from its link stats: each pass adds what
    /// the kernel's counters moved. A counter that went back (the device
    /// was reset) is taken as the new base, not counted.
    fn observe_link(&self, dev: &Device) {
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
                let counters = [
                    &self.rx_packets,
                    &self.rx_bytes,
                    &self.rx_missed,
                    &self.rx_dropped,
                ]
                .map(|f| f.get_or_create_owned(&labels));
                c.link = Some((counters, now));
            }
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

    /// Counts a decision (`pptune_decisions_total`).
    pub fn count_decision(
        &self,
        device: &str,
        action: &'static str,
        reason: &'static str,
        mode: &'static str,
    ) {
        self.with_counted(device, |c| {
            c.decisions
                .entry((action, reason, mode))
                .or_insert_with(|| {
                    self.decisions.get_or_create_owned(&DecisionLabels {
                        device: device.to_owned(),
                        action: action.to_owned(),
                        reason: reason.to_owned(),
                        mode: mode.to_owned(),
                    })
                })
                .inc();
        });
    }

    /// What the actuator did, into `pptune_actions_total`,
    /// `pptune_operator_overrides_total`,
    /// `pptune_last_action_timestamp_seconds`, `pptune_device_backoff` and
    /// `pptune_errors_total`.
    pub fn count(&self, events: impl IntoIterator<Item = Event>) {
        for e in events {
            match e {
                Event::Action {
                    device,
                    knob,
                    direction,
                    result,
                } => {
                    let labels = ActionLabels {
                        device,
                        knob: knob.to_string(),
                        direction: direction.to_owned(),
                        result,
                    };
                    self.actions.get_or_create(&labels).inc();
                    self.remember(|c| &mut c.actions, labels.device.as_str(), &labels);
                }
                Event::Override { device, knob } => {
                    let labels = KnobLabels {
                        device,
                        knob: knob.to_string(),
                    };
                    self.overrides.get_or_create(&labels).inc();
                    self.remember(|c| &mut c.overrides, labels.device.as_str(), &labels);
                }
                Event::Applied { device, unix_s } => {
                    self.last_action
                        .get_or_create(&DevLabels { device })
                        .set(unix_s);
                }
                Event::BackedOff { device } => self.set_backoff(&device, true),
                Event::Error(kind) => self.error(kind),
            }
        }
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
    pub fn known(&self, dev: &Device, policy: &Policy, mode: &'static str) {
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
                            self.decisions.get_or_create_owned(&DecisionLabels {
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
                        let _ = self.actions.get_or_create(&l);
                        c.actions.insert(l);
                    }
                }
                let l = KnobLabels {
                    device: dev.name.clone(),
                    knob: k.name.to_owned(),
                };
                let _ = self.overrides.get_or_create(&l);
                c.overrides.insert(l);
            }
        });
    }

    /// The ring cost estimate of a selected device (`None`: not selected,
    /// or its ring is unknown: no series).
    pub fn set_ring_cost(&self, device: &str, bytes: Option<u64>) {
        self.set_device_gauge(device, bytes, &self.ring_cost, |c| &mut c.ring_cost);
    }

    /// The memory right-sizing could reclaim on a selected device now
    /// (`policy::engine::reclaimable`'s bytes, 0 when it finds nothing);
    /// `None`: not selected, no series.
    pub fn set_reclaimable(&self, device: &str, bytes: Option<u64>) {
        self.set_device_gauge(device, bytes, &self.reclaimable, |c| &mut c.reclaimable);
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
                            family.get_or_create_owned(&DevLabels {
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
    pub fn set_unjudged(&self, device: &str, why: Option<Unjudged>) {
        self.with_counted(device, |c| {
            if c.unjudged == why {
                return;
            }
            if let Some(old) = c.unjudged.take() {
                self.device_unjudged.remove(&DevReasonLabels {
                    device: device.to_owned(),
                    reason: old.as_str(),
                });
            }
            if let Some(w) = why {
                self.device_unjudged
                    .get_or_create(&DevReasonLabels {
                        device: device.to_owned(),
                        reason: w.as_str(),
                    })
                    .set(1);
            }
            c.unjudged = why;
        });
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

    /// One decision of the pass: the device's mode (`enforce` or
    /// `observe`, after rollout), its backoff flag (0 for every selected
    /// device, so "backed off" is a value to alert on, not a missing
    /// series), the decision counter and the recommendation.
    pub fn observe_decision(&self, dec: &Decision, mode: &'static str, backed_off: bool) {
        self.set_mode(&dec.device, mode);
        self.set_backoff(&dec.device, backed_off);
        self.count_decision(
            &dec.device,
            crate::publish::logging::action_kind(&dec.action),
            dec.reason.as_str(),
            mode,
        );
        let rec = match dec.action {
            Action::Hold => None,
            Action::SetRing { to, .. } | Action::SetChannels { to, .. } => Some((
                RecLabels {
                    device: dec.device.clone(),
                    recommendation: dec.id.to_string(),
                    knob: dec.action.knob().map(|k| k.to_string()).unwrap_or_default(),
                    reason: dec.reason.as_str().to_owned(),
                },
                to,
            )),
        };
        self.set_recommendation(&dec.device, rec);
    }

    /// A policy load's outcome: the policy now in force (its hashes
    /// returned, for the log), or why the new one was refused (the last
    /// good one stays).
    pub fn policy_loaded(
        &self,
        loaded: Result<&Policy, &str>,
    ) -> Option<crate::publish::policy_hash::PolicyHashes> {
        let result = if loaded.is_ok() { "ok" } else { "invalid" };
        self.reloads
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
        match loaded {
            Ok(p) => Some(self.policy_in_force(p)),
            Err(e) => {
                self.error("policy_reload");
                self.policy_valid.set(0);
                self.health.set_policy_error(Some(e));
                None
            }
        }
    }

    /// A valid policy in force (at start, or reloaded): its hashes and
    /// load time, its interval for `/readyz`, its queue selection for the
    /// series. Returns the hashes, for the log.
    pub fn policy_in_force(&self, policy: &Policy) -> crate::publish::policy_hash::PolicyHashes {
        let h = crate::publish::policy_hash::PolicyHashes::of(policy);
        let labels = PolicyLabels {
            hash: h.policy.clone(),
            shadow_hash: h.shadow.clone().unwrap_or_default(),
        };
        self.policy_info.clear();
        self.policy_info.get_or_create(&labels).set(1);
        #[allow(clippy::cast_precision_loss)]
        self.policy_loaded
            .set(crate::clock::unix_ms() as f64 / 1000.0);
        for (scope, limit) in [
            ("device", policy.budget.per_device_bytes),
            ("host", policy.budget.per_host_bytes),
        ] {
            let l = ScopeLabels { scope };
            match limit {
                Some(b) => {
                    self.memory_budget.get_or_create(&l).set(sat(b));
                }
                None => {
                    self.memory_budget.remove(&l);
                }
            }
        }
        self.policy_valid.set(1);
        self.health.set_interval(policy.timing.interval);
        self.health.set_policy_error(None);
        self.set_queue_series(policy.daemon.queue_series);
        h
    }

    /// The rollout gauges: whether the host enforces, is selected, whether
    /// the policy enforces, its arm, and the policy's two fractions.
    pub fn set_rollout(&self, s: Standing, p: &Policy) {
        self.rollout_enforcing.set(i64::from(s.enforcing()));
        self.rollout_host_selected
            .set(i64::from(s.draw.host_selected));
        self.policy_enforcing.set(i64::from(s.policy_enforces));
        self.rollout_fraction.set(rollout::fraction(p));
        self.rollout_holdout.set(rollout::holdout(p));
        for arm in Arm::ALL {
            self.rollout_arm
                .get_or_create(&ArmLabels { arm: arm.as_str() })
                .set(i64::from(arm == s.arm()));
        }
    }

    /// `pptune_device_backoff` of `device`.
    pub fn set_backoff(&self, device: &str, backed_off: bool) {
        self.with_counted(device, |c| {
            c.backoff
                .get_or_insert_with(|| {
                    self.backoff.get_or_create_owned(&DevLabels {
                        device: device.to_owned(),
                    })
                })
                .set(i64::from(backed_off));
        });
    }

    /// Exports `mode` (`observe`, `enforce`, `unmanaged`) as the device's
    /// one `pptune_device_mode` series.
    pub fn set_mode(&self, device: &str, mode: &'static str) {
        let label = |m: &str| ModeLabels {
            device: device.to_owned(),
            mode: m.to_owned(),
        };
        self.with_counted(device, |c| match &c.mode {
            Some((m, g)) if *m == mode => {
                g.set(1);
            }
            Some((m, _)) => {
                self.device_mode.remove(&label(m));
                c.mode = Some((mode, self.device_mode.get_or_create_owned(&label(mode))));
                if let Some((_, g)) = &c.mode {
                    g.set(1);
                }
            }
            None => {
                for m in MODES {
                    if m != mode {
                        self.device_mode.remove(&label(m));
                    }
                }
                let g = self.device_mode.get_or_create_owned(&label(mode));
                g.set(1);
                c.mode = Some((mode, g));
            }
        });
    }

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

    /// Keeps `labels` under `device` for [`Metrics::forget_device`].
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
    fn forget_device(&self, device: &str) {
        if let Some(c) = self
            .counted
            .lock()
            .ok()
            .and_then(|mut counted| counted.remove(device))
        {
            for &(action, reason, mode) in c.decisions.keys() {
                self.decisions.remove(&DecisionLabels {
                    device: device.to_owned(),
                    action: action.to_owned(),
                    reason: reason.to_owned(),
                    mode: mode.to_owned(),
                });
            }
            for l in &c.actions {
                self.actions.remove(l);
            }
            for l in &c.overrides {
                self.overrides.remove(l);
            }
            if let Some((l, _)) = &c.info {
                self.device_info.remove(l);
            }
            if let Some(w) = c.unjudged {
                self.device_unjudged.remove(&DevReasonLabels {
                    device: device.to_owned(),
                    reason: w.as_str(),
                });
            }
        }
        let dev = DevLabels {
            device: device.to_owned(),
        };
        self.last_action.remove(&dev);
        self.backoff.remove(&dev);
        self.ring_cost.remove(&dev);
        self.reclaimable.remove(&dev);
        for f in [
            &self.rx_packets,
            &self.rx_bytes,
            &self.rx_missed,
            &self.rx_dropped,
        ] {
            f.remove(&dev);
        }
        self.set_recommendation(device, None);
        for ring in RINGS {
            let l = RingLabels {
                device: device.to_owned(),
                ring: ring.to_owned(),
            };
            self.ring.remove(&l);
            self.ring_max.remove(&l);
        }
        for ch in CHANNELS {
            let l = ChannelLabels {
                device: device.to_owned(),
                channel: ch.to_owned(),
            };
            self.channels.remove(&l);
            self.channels_max.remove(&l);
        }
        for mode in MODES {
            self.device_mode.remove(&ModeLabels {
                device: device.to_owned(),
                mode: mode.to_owned(),
            });
        }
    }

    /// Exports the device's current recommendation (`None` = hold: the
    /// series goes away).
    pub fn set_recommendation(&self, device: &str, rec: Option<(RecLabels, u32)>) {
        let Ok(mut cur) = self.rec_current.lock() else {
            return;
        };
        if let Some(old) = cur.remove(device)
            && rec.as_ref().is_none_or(|(l, _)| *l != old)
        {
            self.recommendation.remove(&old);
        }
        if let Some((l, target)) = rec {
            self.recommendation.get_or_create(&l).set(i64::from(target));
            cur.insert(device.to_owned(), l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::registry::Unit;

    type FGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

    /// The passes as the loop makes them: the deltas against the previous
    /// snapshot (kept from pass to pass), then the metrics.
    #[derive(Default)]
    struct Passes {
        prev: Option<Snapshot>,
        deltas: PassDeltas,
    }

    impl Passes {
        fn feed(&mut self, m: &Metrics, snap: &Snapshot) {
            self.deltas.compute(self.prev.as_ref(), snap);
            m.observe(snap, &self.deltas);
            self.prev = Some(snap.clone());
        }
    }
    use policy::signals;
    use policy::snapshot::{Pool, PoolStats, RxQueue};
    use std::collections::BTreeSet;

    /// A device with rings (rx `rx` of 4096) and 2 combined channels, no
    /// pools.
    fn knob_device(name: &str, rx: u32) -> Device {
        Device {
            ifindex: 9,
            name: name.to_owned(),
            rings: policy::snapshot::Availability::Available(policy::snapshot::Rings {
                rx: Some(rx),
                rx_max: Some(4096),
                ..Default::default()
            }),
            channels: policy::snapshot::Availability::Available(policy::snapshot::Channels {
                combined: Some(2),
                ..Default::default()
            }),
            ..Device::default()
        }
    }

    /// A device with rings but no pools (so no per-queue series) that
    /// vanishes takes its ring and channel series with it, and when it
    /// comes back its series are live again (the kept handles went with
    /// it). The first half failed before the handles were kept: only
    /// devices with exported queue series were ever forgotten.
    #[test]
    fn a_vanished_device_without_pools_drops_its_knob_series() {
        let m = Metrics::new();
        let mut passes = Passes::default();
        let snap = |rx: u32| Snapshot {
            devices: vec![knob_device("veth9", rx)],
            ..Snapshot::default()
        };
        let text = |m: &Metrics| m.encode().unwrap();
        passes.feed(&m, &snap(256));
        assert!(text(&m).contains("pptune_ring_entries{device=\"veth9\",ring=\"rx\"} 256"));
        passes.feed(&m, &Snapshot::default());
        assert!(!text(&m).contains("veth9"), "{}", text(&m));
        passes.feed(&m, &snap(512));
        passes.feed(&m, &snap(1024));
        let t = text(&m);
        assert!(
            t.contains("pptune_ring_entries{device=\"veth9\",ring=\"rx\"} 1024"),
            "{t}"
        );
        assert!(
            t.contains("pptune_channels{device=\"veth9\",channel=\"combined\"} 2"),
            "{t}"
        );
    }

    #[test]
    fn the_rollout_gauges_say_the_standing() {
        let m = Metrics::new();
        let s = Standing {
            draw: rollout::Draw {
                host_selected: true,
                holdout: false,
            },
            policy_enforces: false,
            has_rollout: true,
        };
        let mut p = config::default_policy().unwrap();
        p.rollout = Some(policy::policy::Rollout {
            fraction: 0.25,
            salt: "s".into(),
            holdout: 0.125,
        });
        m.set_rollout(s, &p);
        let text = m.encode().unwrap();
        assert!(text.contains("pptune_rollout_enforcing 0\n"), "{text}");
        assert!(text.contains("pptune_rollout_host_selected 1\n"), "{text}");
        assert!(text.contains("pptune_policy_enforcing 0\n"), "{text}");
        assert!(
            text.contains("pptune_rollout_fraction_ratio 0.25\n"),
            "{text}"
        );
        assert!(
            text.contains("pptune_rollout_holdout_ratio 0.125\n"),
            "{text}"
        );
        for (arm, v) in [("enforce", 0), ("holdout", 0), ("observe", 1)] {
            assert!(
                text.contains(&format!("pptune_rollout_arm{{arm=\"{arm}\"}} {v}\n")),
                "{arm}: {text}"
            );
        }
        let held = Standing {
            draw: rollout::Draw {
                host_selected: false,
                holdout: true,
            },
            policy_enforces: true,
            has_rollout: true,
        };
        m.set_rollout(held, &p);
        let text = m.encode().unwrap();
        assert!(
            text.contains("pptune_rollout_arm{arm=\"holdout\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("pptune_rollout_enforcing 0\n"), "{text}");
    }

    /// A device pptune decides for has its change, override and change
    /// decision counters at 0 before anything happens, for each knob the
    /// policy manages on it (not for knobs it lacks or the policy leaves
    /// alone), so the first change is a step from 0 that `increase()`
    /// sees; the first event then reads 1 and the vanished device takes
    /// them all.
    #[test]
    fn a_known_device_exports_its_counters_at_zero() {
        let m = Metrics::new();
        let t = m.encode().unwrap();
        for source in netlink::events::NOTIFY_SOURCES {
            assert!(
                t.contains(&format!("pptune_resyncs_total{{kind=\"{source}\"}} 0\n")),
                "{t}"
            );
        }
        let mut p = policy::fixtures::policy();
        p.channels.enabled = false;
        let dev = knob_device("eth9", 256);
        let mut passes = Passes::default();
        passes.feed(
            &m,
            &Snapshot {
                devices: vec![dev.clone()],
                ..Snapshot::default()
            },
        );
        m.known(&dev, &p, "observe");
        m.known(&dev, &p, "observe");
        let t = m.encode().unwrap();
        for want in [
            "pptune_actions_total{device=\"eth9\",knob=\"ring.rx\",direction=\"grow\",result=\"applied\"} 0\n",
            "pptune_actions_total{device=\"eth9\",knob=\"ring.rx\",direction=\"shrink\",result=\"refused\"} 0\n",
            "pptune_actions_total{device=\"eth9\",knob=\"ring.rx\",direction=\"revert\",result=\"applied\"} 0\n",
            "pptune_operator_overrides_total{device=\"eth9\",knob=\"ring.rx\"} 0\n",
            "pptune_decisions_total{device=\"eth9\",action=\"set_ring\",reason=\"recycle_miss_high\",mode=\"observe\"} 0\n",
        ] {
            assert!(t.contains(want), "{want} in\n{t}");
        }
        assert!(
            !t.contains("ring.rx-jumbo") && !t.contains("channels."),
            "{t}"
        );
        assert!(!t.contains("mode=\"enforce\""), "{t}");
        m.known(&dev, &p, "enforce");
        let t = m.encode().unwrap();
        assert!(t.contains("pptune_decisions_total{device=\"eth9\",action=\"set_ring\",reason=\"calm_shrink\",mode=\"enforce\"} 0\n"), "{t}");
        m.count([Event::Action {
            device: "eth9".to_owned(),
            knob: policy::Knob::Ring(policy::RingField::Rx),
            direction: "grow",
            result: "applied".to_owned(),
        }]);
        let t = m.encode().unwrap();
        assert!(t.contains("pptune_actions_total{device=\"eth9\",knob=\"ring.rx\",direction=\"grow\",result=\"applied\"} 1\n"), "{t}");
        passes.feed(&m, &Snapshot::default());
        assert!(!m.encode().unwrap().contains("eth9"));
    }

    /// The reclaimable memory of a selected device is a series from its
    /// first pass, at 0 while nothing is reclaimable (a fleet sum counts
    /// the device), its value after; a device no longer selected has
    /// none.
    #[test]
    fn a_selected_device_exports_its_reclaimable_bytes_from_zero() {
        let m = Metrics::new();
        let series = |n: u64| format!("pptune_device_reclaimable_bytes{{device=\"eth0\"}} {n}\n");
        m.set_reclaimable("eth0", Some(0));
        let t = m.encode().unwrap();
        assert!(t.contains(&series(0)), "{t}");
        assert!(
            t.contains("# TYPE pptune_device_reclaimable_bytes gauge\n")
                && t.contains("# UNIT pptune_device_reclaimable_bytes bytes\n"),
            "{t}"
        );
        m.set_reclaimable("eth0", Some(58 << 20));
        let t = m.encode().unwrap();
        assert!(t.contains(&series(58 << 20)), "{t}");
        m.set_reclaimable("eth0", None);
        assert!(!m.encode().unwrap().contains("reclaimable_bytes{"));
    }

    /// The per-device sums describe a device, not "the queue" their
    /// per-queue families describe.
    #[test]
    fn device_sums_say_device_in_their_help() {
        let m = Metrics::new();
        let mut passes = Passes::default();
        let snap = |k: u64| Snapshot {
            devices: vec![device(
                "eth0",
                vec![queue(0, vec![pool(1, Some(stats(k)))])],
                vec![],
            )],
            ..Snapshot::default()
        };
        passes.feed(&m, &snap(1));
        passes.feed(&m, &snap(2));
        let t = m.encode().unwrap();
        let help: Vec<&str> = t
            .lines()
            .filter(|l| l.starts_with("# HELP pptune_device_pool"))
            .collect();
        assert_eq!(help.len(), 11 + 3, "{t}");
        for h in help {
            assert!(!h.contains("queue's") && !h.contains("the queue"), "{h}");
            assert!(h.contains("device"), "{h}");
        }
    }

    /// A device that vanishes takes every per-device series with it: the
    /// decision, action and override counters, the last-action time, the
    /// backoff flag and the recommendation, as well as its ring and channel
    /// gauges. Found by the soak (tests/tests/vm_faults.rs): a device
    /// replaced every few minutes under a new name left its counters and
    /// gauges behind, one set of series per name for the daemon's life.
    #[test]
    fn a_vanished_device_drops_its_counters_and_flags() {
        let m = Metrics::new();
        let mut passes = Passes::default();
        let dev = |name: &str| Device {
            ifindex: 9,
            name: name.to_owned(),
            ..Device::default()
        };
        let snap = |names: &[&str]| Snapshot {
            devices: names.iter().map(|n| dev(n)).collect(),
            ..Snapshot::default()
        };
        let text = |m: &Metrics| m.encode().unwrap();
        passes.feed(&m, &snap(&["soakb0", "keep0"]));
        for device in ["soakb0", "keep0"] {
            m.count_decision(device, "set_ring", "recycle_miss_high", "enforce");
            m.set_mode(device, "enforce");
            let device = device.to_owned();
            let rx = policy::Knob::Ring(policy::RingField::Rx);
            m.count([
                Event::Action {
                    device: device.clone(),
                    knob: rx,
                    direction: "grow",
                    result: "applied".to_owned(),
                },
                Event::Override {
                    device: device.clone(),
                    knob: rx,
                },
                Event::Applied {
                    device: device.clone(),
                    unix_s: 1_796_091_744,
                },
                Event::BackedOff {
                    device: device.clone(),
                },
            ]);
            let device = device.as_str();
            m.set_ring_cost(device, Some(8 << 20));
            m.set_reclaimable(device, Some(0));
            m.set_recommendation(
                device,
                Some((
                    RecLabels {
                        device: device.to_owned(),
                        recommendation: "0a1f51615c09".to_owned(),
                        knob: "ring.rx".to_owned(),
                        reason: "recycle_miss_high".to_owned(),
                    },
                    2048,
                )),
            );
        }
        let t = text(&m);
        assert_eq!(t.matches("device=\"soakb0\"").count(), 10, "{t}");
        passes.feed(&m, &snap(&["keep0"]));
        let t = text(&m);
        assert!(!t.contains("soakb0"), "{t}");
        assert_eq!(t.matches("device=\"keep0\"").count(), 10, "{t}");
        // Back under the same name: counted from zero.
        passes.feed(&m, &snap(&["soakb0", "keep0"]));
        m.count([Event::Action {
            device: "soakb0".to_owned(),
            knob: policy::Knob::Ring(policy::RingField::Rx),
            direction: "grow",
            result: "applied".to_owned(),
        }]);
        let t = text(&m);
        assert!(
            t.contains("pptune_actions_total{device=\"soakb0\",knob=\"ring.rx\",direction=\"grow\",result=\"applied\"} 1"),
            "{t}"
        );
    }

    /// The per-queue families as prometheus-client `Family`s, kept by a
    /// plain restatement of the accounting rules (per-pool-id deltas, new
    /// pools since creation, a reset adds nothing, retired pools stay
    /// counted): the reference the hand-written exposition must equal.
    struct Reference {
        registry: Registry,
        counters: Vec<Family<QueueLabels, Counter>>,
        gauges: Vec<Family<QueueLabels, Gauge>>,
        ratios: Vec<Family<QueueLabels, FGauge>>,
        /// Last stats per pool id seen in the previous snapshot.
        pools: BTreeMap<u64, Option<PoolStats>>,
        totals: BTreeMap<QueueLabels, PoolStats>,
        with_counters: BTreeSet<QueueLabels>,
        queues: BTreeSet<QueueLabels>,
    }

    impl Reference {
        fn new() -> Self {
            let mut r = Registry::default();
            let mut counters = Vec::new();
            for c in POOL_COUNTERS {
                let f = Family::<QueueLabels, Counter>::default();
                match c.unit {
                    Some(u) => {
                        r.register_with_unit(c.metric, c.help, Unit::Other(u.into()), f.clone())
                    }
                    None => r.register(c.metric, c.help, f.clone()),
                }
                counters.push(f);
            }
            let mut gauges = Vec::new();
            for (name, unit, help) in QUEUE_GAUGES {
                let f = Family::<QueueLabels, Gauge>::default();
                match unit {
                    Some(u) => r.register_with_unit(name, help, Unit::Other(u.into()), f.clone()),
                    None => r.register(name, help, f.clone()),
                }
                gauges.push(f);
            }
            let mut ratios = Vec::new();
            for (name, help) in QUEUE_RATIOS {
                let f = Family::<QueueLabels, FGauge>::default();
                r.register_with_unit(name, help, Unit::Other("ratio".into()), f.clone());
                ratios.push(f);
            }
            Self {
                registry: r,
                counters,
                gauges,
                ratios,
                pools: BTreeMap::new(),
                totals: BTreeMap::new(),
                with_counters: BTreeSet::new(),
                queues: BTreeSet::new(),
            }
        }

        fn encode(&self) -> String {
            let mut s = String::new();
            prometheus_client::encoding::text::encode(&mut s, &self.registry).unwrap();
            s
        }

        fn observe_snapshot(&mut self, snap: &Snapshot) {
            let mut seen_pools = BTreeMap::new();
            let mut seen_queues = BTreeSet::new();
            for dev in &snap.devices {
                let mut by_queue: BTreeMap<String, Vec<&Pool>> = BTreeMap::new();
                for q in &dev.rx_queues {
                    by_queue
                        .entry(q.id.to_string())
                        .or_default()
                        .extend(q.pools.iter());
                }
                if !dev.unmapped_pools.is_empty() {
                    by_queue
                        .entry("unmapped".to_owned())
                        .or_default()
                        .extend(dev.unmapped_pools.iter());
                }
                for (queue, pools) in by_queue {
                    let labels = QueueLabels {
                        device: dev.name.clone(),
                        queue,
                    };
                    self.observe_queue(&labels, &pools);
                    seen_queues.insert(labels);
                }
                for p in dev.pools() {
                    let last = self.pools.get(&p.id).copied().flatten();
                    seen_pools.insert(p.id, p.stats.or(last));
                }
            }
            self.pools = seen_pools;
            let gone: Vec<QueueLabels> = self.queues.difference(&seen_queues).cloned().collect();
            for l in gone {
                for f in &self.counters {
                    f.remove(&l);
                }
                for f in &self.gauges {
                    f.remove(&l);
                }
                for f in &self.ratios {
                    f.remove(&l);
                }
                self.with_counters.remove(&l);
            }
            let devices: BTreeSet<&str> = snap.devices.iter().map(|d| d.name.as_str()).collect();
            let gone_devices: BTreeSet<String> = self
                .queues
                .iter()
                .map(|l| l.device.clone())
                .filter(|d| !devices.contains(d.as_str()))
                .collect();
            self.totals.retain(|l, _| !gone_devices.contains(&l.device));
            self.queues = seen_queues;
        }

        fn observe_queue(&mut self, labels: &QueueLabels, pools: &[&Pool]) {
            let mut delta = PoolStats::default();
            let (mut counted, mut reset) = (false, false);
            let provider = pools.iter().any(|p| p.provider.is_some());
            for p in pools {
                let Some(now) = p.stats else { continue };
                match self.pools.get(&p.id) {
                    None => {
                        delta = delta.add(&now);
                        counted = true;
                    }
                    Some(None) => {}
                    Some(Some(before)) => match now.delta(before) {
                        Some(d) => {
                            delta = delta.add(&d);
                            counted = true;
                        }
                        None => reset = true,
                    },
                }
            }
            self.gauges[0]
                .get_or_create(labels)
                .set(i64::try_from(pools.len()).unwrap());
            self.gauges[1]
                .get_or_create(labels)
                .set(sat(pools.iter().filter_map(|p| p.inflight).sum()));
            self.gauges[2]
                .get_or_create(labels)
                .set(sat(pools.iter().filter_map(|p| p.inflight_mem).sum()));
            if !counted && !reset {
                return;
            }
            let total = self.totals.entry(labels.clone()).or_default();
            *total = total.add(&delta);
            for (f, want) in self.counters.iter().zip(total.values()) {
                let c = f.get_or_create(labels);
                let have = c.get();
                if want > have {
                    c.inc_by(want - have);
                }
            }
            let had = !self.with_counters.insert(labels.clone());
            if had && !reset {
                if let Some(v) = signals::recycling_pct(&delta) {
                    self.ratios[0].get_or_create(labels).set(v / 100.0);
                }
                if let Some(v) = signals::recycle_miss_share(&delta) {
                    self.ratios[1].get_or_create(labels).set(v);
                }
                if let Some(v) = signals::slow_refill_share(&delta, provider) {
                    self.ratios[2].get_or_create(labels).set(v);
                }
            }
        }
    }

    /// Families of an exposition in order: the descriptor lines as they
    /// are, the samples sorted (prometheus-client writes a family's series
    /// in hash-map order).
    fn families(text: &str) -> Vec<(String, Vec<String>, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
        for line in text.lines().filter(|l| *l != "# EOF") {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap().to_owned();
                out.push((name, vec![line.to_owned()], Vec::new()));
            } else if line.starts_with("# ") {
                out.last_mut().unwrap().1.push(line.to_owned());
            } else {
                out.last_mut().unwrap().2.push(line.to_owned());
            }
        }
        for f in &mut out {
            f.2.sort();
        }
        out
    }

    fn stats(k: u64) -> PoolStats {
        PoolStats {
            alloc_fast: 1000 * k,
            alloc_slow: 10 * k,
            alloc_slow_high_order: k,
            alloc_empty: 3 * k,
            alloc_refill: 50 * k,
            alloc_waive: k / 2,
            recycle_cached: 800 * k,
            recycle_cache_full: k,
            recycle_ring: 100 * k,
            recycle_ring_full: 5 * k,
            recycle_released_refcnt: 7 * k,
        }
    }

    fn pool(id: u64, s: Option<PoolStats>) -> Pool {
        Pool {
            id,
            inflight: Some(id * 10),
            inflight_mem: id.is_multiple_of(2).then_some(id * 40960),
            stats: s,
            ..Pool::default()
        }
    }

    fn queue(id: u32, pools: Vec<Pool>) -> RxQueue {
        RxQueue {
            id,
            pools,
            ..RxQueue::default()
        }
    }

    fn device(name: &str, rx_queues: Vec<RxQueue>, unmapped: Vec<Pool>) -> Device {
        Device {
            ifindex: 2,
            name: name.to_owned(),
            rx_queues,
            unmapped_pools: unmapped,
            ..Device::default()
        }
    }

    /// The hand-written per-queue families equal prometheus-client's
    /// `Family` encoding of the old update algorithm, tick after tick:
    /// pool rebuilds (carry), a pool without stats, duplicate queue ids,
    /// unmapped pools, a queue and a device that vanish and come back, a
    /// pool that moves queue, a counter reset, a ratio that dtoa writes
    /// as `0.00001`, and a device name that needs escaping.
    #[test]
    fn queue_families_match_prometheus_client_encoding() {
        let weird = "we\"ird\\x\ny";
        let tiny = PoolStats {
            recycle_ring: 99_999,
            recycle_ring_full: 1,
            ..stats(90)
        };
        let tiny2 = PoolStats {
            recycle_ring: tiny.recycle_ring + 99_999,
            recycle_ring_full: tiny.recycle_ring_full + 1,
            alloc_slow: tiny.alloc_slow + 1,
            alloc_refill: tiny.alloc_refill + 7,
            ..tiny
        };
        let ticks: Vec<Vec<Device>> = vec![
            vec![],
            vec![
                device(
                    "eth0",
                    vec![
                        queue(0, vec![pool(1, Some(stats(1)))]),
                        queue(1, vec![pool(2, Some(stats(1)))]),
                        queue(2, vec![pool(3, None)]),
                        queue(10, vec![]),
                    ],
                    vec![pool(9, Some(stats(1)))],
                ),
                device(
                    weird,
                    vec![
                        queue(0, vec![pool(20, Some(stats(1)))]),
                        queue(0, vec![pool(21, Some(stats(2)))]),
                    ],
                    vec![],
                ),
            ],
            vec![
                device(
                    "eth0",
                    vec![
                        queue(0, vec![pool(1, Some(stats(2)))]),
                        queue(1, vec![pool(4, Some(stats(0)))]),
                        queue(2, vec![pool(3, Some(stats(1)))]),
                        queue(10, vec![]),
                    ],
                    vec![],
                ),
                device(
                    weird,
                    vec![
                        queue(0, vec![pool(20, Some(stats(3)))]),
                        queue(0, vec![pool(21, Some(stats(4)))]),
                    ],
                    vec![],
                ),
            ],
            vec![device(
                "eth0",
                vec![
                    queue(0, vec![pool(1, Some(stats(3)))]),
                    queue(1, vec![pool(4, Some(stats(1)))]),
                ],
                vec![],
            )],
            vec![
                device(
                    "eth0",
                    vec![
                        queue(0, vec![pool(1, Some(stats(4)))]),
                        queue(1, vec![pool(4, Some(stats(2)))]),
                        queue(2, vec![pool(5, Some(stats(1)))]),
                    ],
                    vec![pool(9, None)],
                ),
                device(
                    weird,
                    vec![queue(0, vec![pool(20, Some(stats(1)))])],
                    vec![],
                ),
            ],
            vec![device(
                "eth0",
                vec![
                    queue(0, vec![pool(4, Some(stats(3))), pool(6, Some(tiny))]),
                    queue(1, vec![pool(1, Some(stats(1)))]),
                    queue(2, vec![pool(5, None)]),
                    // New, between queues the device has had (2 and 10).
                    queue(5, vec![pool(7, Some(stats(1)))]),
                ],
                vec![],
            )],
            vec![device(
                "eth0",
                vec![
                    queue(0, vec![pool(4, Some(stats(3))), pool(6, Some(tiny2))]),
                    queue(1, vec![pool(1, Some(stats(2)))]),
                    queue(2, vec![pool(5, Some(stats(9)))]),
                    queue(5, vec![pool(7, Some(stats(4)))]),
                ],
                vec![],
            )],
            vec![],
        ];
        let m = Metrics::new();
        let mut passes = Passes::default();
        let mut r = Reference::new();
        let mut saw_tiny = false;
        for (tick, devices) in ticks.into_iter().enumerate() {
            let snap = Snapshot {
                devices,
                ..Snapshot::default()
            };
            passes.feed(&m, &snap);
            r.observe_snapshot(&snap);
            let text = m.encode().unwrap();
            let want = families(&r.encode());
            let names: BTreeSet<&str> = want.iter().map(|f| f.0.as_str()).collect();
            let got: Vec<_> = families(&text)
                .into_iter()
                .filter(|f| {
                    f.0.starts_with("pptune_pool")
                        || f.0.starts_with("pptune_queue")
                        || names.contains(f.0.as_str())
                })
                .collect();
            assert_eq!(got, want, "tick {tick}:\n{text}");
            if tick == 2 {
                // Every per-queue family, ratios included, is compared.
                assert_eq!(want.len(), 17, "{text}");
            }
            // Written first, as registration order put them.
            if let Some(first) = want.first() {
                assert!(text.starts_with(&first.1[0]), "tick {tick}");
            }
            assert!(text.ends_with("# EOF\n"));
            saw_tiny |= text.contains("\"} 0.00001\n");
        }
        assert!(saw_tiny, "the 1e-5 ratio was never written");
    }
}
