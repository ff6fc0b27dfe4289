//! The semantic pass: a structurally valid, merged document becomes a
//! [`policy::Policy`]. Durations, sizes and times are parsed (by
//! [`crate::values`]) and contradictions between keys are caught — every
//! one, each at the location of the value that has to change.

use std::time::Duration;

use policy::drivers::{DEFAULT_PAGE_BYTES, POOL_CACHE_PAGES, POOL_RING_CLAMP};
use policy::policy as p;

use crate::raw::{
    ByteSize, DurationText, RawBudget, RawChannels, RawCoexist, RawDaemon, RawLimits, RawMode,
    RawOnStop, RawPolicy, RawPortTaken, RawPrior, RawQueueSeries, RawRings, RawRollout,
    RawRounding, RawSelector, RawThresholds, RawTiming,
};
use crate::schema::Issue;
use crate::tree::{Loc, Node, Value};
mod enums;
use enums::{disruption, mode, weekday};

use crate::values::{
    LISTEN_EXAMPLES, MAX_DURATION, MAX_DURATION_TEXT, is_pci_model, parse_bytes, parse_duration,
    parse_hhmm, parse_listen,
};

struct Cx<'a> {
    tree: &'a Node,
    issues: Vec<Issue>,
    warnings: Vec<Issue>,
}

/// What [`convert`] made: the policy (values it refused left at what
/// could be made of them), the problems, and what is valid but probably
/// not meant.
pub(crate) struct Converted {
    pub policy: p::Policy,
    pub issues: Vec<Issue>,
    pub warnings: Vec<Issue>,
}

impl Cx<'_> {
    /// Location of the value at `path` in the merged tree (the key's
    /// parent when the value is absent).
    fn loc(&self, path: &str) -> Loc {
        let mut node = self.tree;
        for seg in crate::path::segments(path) {
            let next = match (&seg, &node.value) {
                (crate::path::Seg::Key(name), _) => node.get(name),
                (crate::path::Seg::Index(i), Value::Seq(items)) => items.get(*i),
                (crate::path::Seg::Index(_), _) => None,
            };
            match next {
                Some(n) => node = n,
                None => return node.loc,
            }
        }
        node.loc
    }

    fn issue(&self, path: &str, message: impl Into<String>, hint: impl Into<String>) -> Issue {
        let hint = hint.into();
        Issue {
            loc: self.loc(path),
            path: path.to_owned(),
            message: message.into(),
            hint: (!hint.is_empty()).then_some(hint),
        }
    }

    fn err(&mut self, path: &str, message: impl Into<String>, hint: impl Into<String>) {
        let i = self.issue(path, message, hint);
        self.issues.push(i);
    }

    fn warn(&mut self, path: &str, message: impl Into<String>, hint: impl Into<String>) {
        let i = self.issue(path, message, hint);
        self.warnings.push(i);
    }

    /// `None` (and an error) when unparsable, so follow-on comparisons
    /// are skipped rather than reported against a made-up value.
    fn duration(&mut self, path: &str, d: &DurationText) -> Option<Duration> {
        match parse_duration(&d.0) {
            Some(v) if v > MAX_DURATION => {
                self.err(
                    path,
                    format!("`{}` is longer than the longest allowed duration", d.0),
                    format!("at most {MAX_DURATION_TEXT}"),
                );
                None
            }
            Some(v) if !v.is_zero() => Some(v),
            Some(_) => {
                self.err(path, "must be longer than zero", "e.g. 10s");
                None
            }
            None => {
                self.err(
                    path,
                    format!("`{}` is not a duration", d.0),
                    "digits with a unit (ms, s, m, h), e.g. 10s, 5m, 1h30m",
                );
                None
            }
        }
    }

    fn bytes(&mut self, path: &str, b: Option<&ByteSize>) -> Option<u64> {
        match b? {
            ByteSize::Bytes(n) => Some(*n),
            ByteSize::Text(t) => {
                let v = parse_bytes(t);
                if v.is_none() {
                    self.err(
                        path,
                        format!("`{t}` is not a byte size"),
                        "an integer, or a number with a unit: KiB, MiB, GiB, TiB (or KB, MB, GB, TB)",
                    );
                }
                v
            }
        }
    }
}

/// Converts and cross-checks. `tree` is the merged document `raw` came from.
pub(crate) fn convert(raw: &RawPolicy, tree: &Node) -> Converted {
    let mut cx = Cx {
        tree,
        issues: vec![],
        warnings: vec![],
    };
    let enforces = matches!(raw.mode, RawMode::Enforce)
        || raw
            .selectors
            .iter()
            .any(|s| matches!(s.mode, Some(RawMode::Enforce)));
    // In the file's order: the problems are reported in it.
    let timing = cx.timing(&raw.timing);
    let thresholds = cx.thresholds(&raw.thresholds);
    let rings = cx.rings(&raw.rings);
    let channels = cx.channels(&raw.channels);
    let budget = cx.budget(&raw.budget, &raw.rings);
    let limits = cx.limits(&raw.limits, enforces);
    let selectors = cx.selectors(&raw.selectors);
    let rollout = cx.rollout(raw.rollout.as_ref());
    let daemon = cx.daemon(&raw.daemon);
    let shadow = cx.shadow(raw.shadow.as_deref());
    let priors = cx.priors(&raw.priors, &raw.rings);
    let policy = p::Policy {
        mode: mode(raw.mode),
        selectors,
        timing,
        thresholds,
        rings,
        channels,
        budget,
        limits,
        disruption: disruption(&raw.disruption),
        on_stop: match raw.on_stop {
            RawOnStop::Keep => p::OnStop::Keep,
            RawOnStop::Restore => p::OnStop::Restore,
        },
        coexist: match raw.coexist {
            RawCoexist::Defer => p::Coexist::Defer,
            RawCoexist::Warn => p::Coexist::Warn,
        },
        rollout,
        daemon,
        shadow,
        priors,
    };
    Converted {
        policy,
        issues: cx.issues,
        warnings: cx.warnings,
    }
}

impl Cx<'_> {
    /// `timing`: durations parsed, the window no shorter than the interval.
    fn timing(&mut self, t: &RawTiming) -> p::Timing {
        let interval = self.duration("timing.interval", &t.interval);
        let window = self.duration("timing.window", &t.window);
        let cooldown = self.duration("timing.cooldown", &t.cooldown);
        let evaluation = self.duration("timing.evaluation", &t.evaluation);
        let calm = self.duration("timing.calm_before_shrink", &t.calm_before_shrink);
        let any = Duration::from_secs(1);
        let timing = p::Timing {
            interval: interval.unwrap_or(any),
            window: window.unwrap_or(any),
            windows_for_finding: t.windows_for_finding,
            cooldown: cooldown.unwrap_or(any),
            evaluation: evaluation.unwrap_or(any),
            calm_before_shrink: calm.unwrap_or(any),
        };
        if let (Some(w), Some(i)) = (window, interval)
            && w < i
        {
            self.err(
                "timing.window",
                format!(
                    "the window ({}) is shorter than the sampling interval ({})",
                    t.window.0, t.interval.0
                ),
                "a window covers one or more intervals: raise window or lower interval",
            );
        }
        if let (Some(c), Some(w)) = (calm, window)
            && c < w
        {
            self.err(
                "timing.calm_before_shrink",
                "calm_before_shrink is shorter than one window",
                "calm is judged per window: use at least timing.window",
            );
        }
        if let (Some(c), Some(cd), Some(ev)) = (calm, cooldown, evaluation)
            && c < cd.max(ev)
        {
            self.warn(
                "timing.calm_before_shrink",
                format!(
                    "{} is shorter than the wait after a change (cooldown {}, evaluation {}): the steps that give memory back come that wait apart, not a calm apart",
                    t.calm_before_shrink.0, t.cooldown.0, t.evaluation.0
                ),
                "a calm is meant to outlast batch and backup cycles: keep it above timing.cooldown (the shipped default is 6h against 10m)",
            );
        }
        timing
    }

    /// `thresholds`: shrink below grow.
    fn thresholds(&mut self, th: &RawThresholds) -> p::Thresholds {
        if th.shrink_recycle_miss >= th.grow_recycle_miss {
            self.err(
                "thresholds.shrink_recycle_miss",
                format!(
                    "shrink threshold {} is not below the grow threshold {}",
                    th.shrink_recycle_miss, th.grow_recycle_miss
                ),
                "keep them apart (e.g. shrink at a tenth of grow) so a pool near one threshold cannot alternate",
            );
        }
        if th.severe_samples > 0 && th.severe_recycle_miss < th.grow_recycle_miss {
            self.err(
                "thresholds.severe_recycle_miss",
                format!(
                    "the severe threshold {} is below the grow threshold {}",
                    th.severe_recycle_miss, th.grow_recycle_miss
                ),
                "a severe miss is one worse than a finding: raise it, or set thresholds.severe_samples to 0 to turn the early path off",
            );
        }
        p::Thresholds {
            grow_recycle_miss: th.grow_recycle_miss,
            grow_slow_refill: th.grow_slow_refill,
            shrink_recycle_miss: th.shrink_recycle_miss,
            min_pages_per_window: th.min_pages_per_window,
            severe_recycle_miss: th.severe_recycle_miss,
            severe_samples: th.severe_samples,
        }
    }

    /// `block.min` no higher than `block.max` (`rings`, `channels`).
    fn min_not_above_max(&mut self, block: &str, min: u32, max: u32) {
        if min > max {
            self.err(
                &format!("{block}.min"),
                format!("{block}.min {min} is above {block}.max {max}"),
                format!("lower {block}.min or raise {block}.max"),
            );
        }
    }

    /// `rings`: min no higher than max.
    fn rings(&mut self, r: &RawRings) -> p::RingPolicy {
        self.min_not_above_max("rings", r.min, r.max);
        p::RingPolicy {
            enabled: r.enabled,
            min: r.min,
            max: r.max,
            rounding: match r.rounding {
                RawRounding::Auto => p::Rounding::Auto,
                RawRounding::PowerOfTwo => p::Rounding::PowerOfTwo,
                RawRounding::MultipleOf32 => p::Rounding::MultipleOf32,
                RawRounding::None => p::Rounding::None,
            },
            max_steps_to_target: r.max_steps_to_target,
            headroom: r.headroom,
            shrink_when_calm: r.shrink_when_calm,
            right_size: r.right_size,
            right_size_floor: r.right_size_floor,
        }
    }

    /// `channels`: min no higher than max.
    fn channels(&mut self, c: &RawChannels) -> p::ChannelPolicy {
        self.min_not_above_max("channels", c.min, c.max);
        p::ChannelPolicy {
            enabled: c.enabled,
            min: c.min,
            max: c.max,
            grow_on_drops_when_healthy: c.grow_on_drops_when_healthy,
            shrink_when_contended: c.shrink_when_contended,
            step: c.step,
            grow_drop_share: c.grow_drop_share,
            trial_gain: c.trial_gain,
        }
    }

    /// `budget`: each at least one queue at `rings.min`, the host's at
    /// least the device's.
    fn budget(&mut self, b: &RawBudget, r: &RawRings) -> p::MemoryBudget {
        let per_device = self.bytes("budget.per_device_bytes", b.per_device_bytes.as_ref());
        let per_host = self.bytes("budget.per_host_bytes", b.per_host_bytes.as_ref());
        // The smallest configuration pptune could ever leave: one queue at
        // rings.min with 4 KiB pages (design.md's formula).
        let min_ring = u64::from(r.min);
        let floor = (min_ring + min_ring.min(u64::from(POOL_RING_CLAMP)) + POOL_CACHE_PAGES)
            * DEFAULT_PAGE_BYTES;
        for (path, v) in [
            ("budget.per_device_bytes", per_device),
            ("budget.per_host_bytes", per_host),
        ] {
            if let Some(v) = v
                && v < floor
            {
                self.err(
                    path,
                    format!(
                        "{v} bytes is smaller than one queue at the minimum ring ({floor} bytes for rings.min {})",
                        r.min
                    ),
                    "(posted buffers + pool ring + 128) x 4096 per queue: raise the budget or lower rings.min",
                );
            }
        }
        if let (Some(d), Some(h)) = (per_device, per_host)
            && h < d
        {
            self.err(
                "budget.per_host_bytes",
                format!("the host budget ({h} bytes) is below the device budget ({d} bytes)"),
                "a host holds at least one device: raise per_host_bytes or lower per_device_bytes",
            );
        }
        p::MemoryBudget {
            per_device_bytes: per_device,
            per_host_bytes: per_host,
        }
    }

    /// `limits`: change windows as times of day; an enforcing policy may
    /// change something each hour.
    fn limits(&mut self, l: &RawLimits, enforces: bool) -> p::ChangeLimits {
        let mut windows = Vec::new();
        for (i, w) in l.windows.iter().enumerate() {
            let start = parse_hhmm(&w.start);
            let end = parse_hhmm(&w.end);
            for (which, val, txt) in [("start", start, &w.start), ("end", end, &w.end)] {
                if val.is_none() {
                    self.err(
                        &format!("limits.windows[{i}].{which}"),
                        format!("`{txt}` is not a time of day"),
                        "HH:MM in local time, 00:00 to 24:00",
                    );
                }
            }
            if let (Some(s), Some(e)) = (start, end) {
                if s == e {
                    self.err(
                        &format!("limits.windows[{i}].end"),
                        "the window is empty (start equals end)",
                        "an end before the start wraps past midnight",
                    );
                }
                windows.push(p::ChangeWindow {
                    days: w.days.iter().map(|d| weekday(*d)).collect(),
                    start_minute: s,
                    end_minute: e,
                });
            }
        }
        if enforces && l.max_changes_per_hour == 0 {
            self.err(
                "limits.max_changes_per_hour",
                "enforce mode with max_changes_per_hour 0 can never act",
                "allow at least 1 change per hour, or use mode: observe",
            );
        }
        p::ChangeLimits {
            max_changes_per_hour: l.max_changes_per_hour,
            windows,
            one_bond_member_at_a_time: l.one_bond_member_at_a_time,
        }
    }

    /// `selectors`: no empty glob; a driver pattern no known driver
    /// matches is warned about (`mlx5` for `mlx5_core`).
    fn selectors(&mut self, raw: &[RawSelector]) -> Vec<p::Selector> {
        let mut selectors = Vec::new();
        for (i, s) in raw.iter().enumerate() {
            for (j, d) in s.drivers.iter().enumerate() {
                if !d.is_empty()
                    && !policy::drivers::KNOWN_DRIVERS
                        .iter()
                        .any(|k| policy::select::glob_match(d, k))
                {
                    self.warn(
                        &format!("selectors[{i}].drivers[{j}]"),
                        format!("`{d}` matches no driver pptune knows; a device whose driver `ethtool -i` names otherwise is not selected by it"),
                        format!("the drivers pptune knows (docs/drivers.md): {}", policy::drivers::KNOWN_DRIVERS.join(", ")),
                    );
                }
            }
            for (j, g) in s.names.iter().chain(s.exclude.iter()).enumerate() {
                if g.is_empty() {
                    self.err(
                        &format!("selectors[{i}]"),
                        format!("empty glob (entry {j})"),
                        "use \"*\" for any name, or leave the list empty",
                    );
                }
            }
            selectors.push(p::Selector {
                names: s.names.clone(),
                drivers: s.drivers.clone(),
                exclude: s.exclude.clone(),
                mode: s.mode.map(mode),
                require_pools: s.require_pools,
            });
        }
        selectors
    }

    /// `priors`: a driver named, a model written as `lspci -n` does, a
    /// ring within `rings.min`..`rings.max`, one class once.
    fn priors(&mut self, priors: &[RawPrior], rings: &RawRings) -> Vec<p::Prior> {
        let mut out: Vec<p::Prior> = Vec::new();
        for (i, r) in priors.iter().enumerate() {
            let at = format!("priors[{i}]");
            if r.driver.trim().is_empty() {
                self.err(
                    &format!("{at}.driver"),
                    "the driver is empty",
                    "the name `ethtool -i` gives, e.g. mlx5_core",
                );
                continue;
            }
            let model = r.model.as_deref().map(str::to_ascii_lowercase);
            if let Some(m) = &model
                && !is_pci_model(m)
            {
                self.err(
                    &format!("{at}.model"),
                    format!("`{m}` is not a PCI vendor:device"),
                    "four hex digits, a colon, four hex digits, as `lspci -n` shows, e.g. 8086:159b",
                );
                continue;
            }
            let prior = p::Prior {
                driver: r.driver.clone(),
                mtu: r.mtu,
                speed_mbps: r.speed,
                model,
                firmware: r.firmware.clone(),
                ring_rx: r.ring_rx,
            };
            if out.iter().any(|o| o.same_class(&prior)) {
                self.err(
                    &at,
                    format!("a second prior for the class of driver {}", r.driver),
                    "one starting ring per class (driver, model, firmware, MTU, speed): remove one",
                );
                continue;
            }
            let (min, max) = (rings.min, rings.max);
            if !(min..=max).contains(&r.ring_rx) {
                self.err(
                    &format!("{at}.ring_rx"),
                    format!(
                        "{} is outside rings.min..rings.max ({min}..{max})",
                        r.ring_rx
                    ),
                    "a prior starts a ring the policy allows",
                );
                continue;
            }
            out.push(prior);
        }
        out
    }

    /// `shadow`: an absolute path (the file is read by `load`).
    fn shadow(&mut self, path: Option<&str>) -> Option<p::Shadow> {
        let path = std::path::PathBuf::from(path?);
        if !path.is_absolute() {
            self.err(
                "shadow",
                format!("`{}` is not an absolute path", path.display()),
                "name the shadow policy file by its absolute path, e.g. /etc/pptune/shadow.yaml",
            );
            return None;
        }
        Some(p::Shadow { path, policy: None })
    }

    /// `rollout`: a salt that draws, and a holdout that does not overlap
    /// the fraction.
    fn rollout(&mut self, r: Option<&RawRollout>) -> Option<p::Rollout> {
        r.map(|r| {
            if r.salt.trim().is_empty() {
                self.err(
                    "rollout.salt",
                    "the rollout salt is empty",
                    "any fixed string; change it to draw a different set of hosts",
                );
            }
            if r.fraction + r.holdout > 1.0 {
                self.err(
                    "rollout.holdout",
                    format!(
                        "the holdout {} and the fraction {} add up to more than 1: the control group would overlap the hosts that enforce",
                        r.holdout, r.fraction
                    ),
                    "lower one of them: fraction + holdout <= 1",
                );
            }
            p::Rollout {
                fraction: r.fraction,
                salt: r.salt.clone(),
                holdout: r.holdout,
            }
        })
    }

    /// `daemon`: an address to listen on, an absolute web config path, at
    /// least one queue per device when the worst are kept.
    fn daemon(&mut self, d: &RawDaemon) -> p::DaemonSettings {
        let metrics_listen = d.metrics_listen.as_deref().and_then(|a| {
            let v = parse_listen(a);
            if v.is_none() {
                self.err(
                    "daemon.metrics_listen",
                    format!("`{a}` is not an address:port or :port"),
                    LISTEN_EXAMPLES,
                );
            }
            v
        });
        let metrics_web_config = d.metrics_web_config.as_deref().and_then(|f| {
            let p = std::path::PathBuf::from(f);
            if p.is_absolute() {
                Some(p)
            } else {
                self.err(
                    "daemon.metrics_web_config",
                    format!("`{f}` is not an absolute path"),
                    "e.g. /etc/pptune/web.yml",
                );
                None
            }
        });

        let qm = &d.queue_metrics;
        if qm.series == RawQueueSeries::Worst && qm.worst == 0 {
            self.err(
                "daemon.queue_metrics.worst",
                "`worst` must keep at least one queue per device",
                "e.g. 4; or `series: none` for per-device sums only",
            );
        }
        let queue_series = match qm.series {
            RawQueueSeries::All => p::QueueSelection::All,
            RawQueueSeries::Worst => p::QueueSelection::Worst { count: qm.worst },
            RawQueueSeries::None => p::QueueSelection::None,
        };

        let recording_max_bytes = self
            .bytes("daemon.recording_max_bytes", d.recording_max_bytes.as_ref())
            .unwrap_or(p::DEFAULT_RECORDING_MAX_BYTES);
        p::DaemonSettings {
            metrics_listen,
            metrics_port_taken: match d.metrics_port_taken {
                RawPortTaken::Retry => p::PortTaken::Retry,
                RawPortTaken::Exit => p::PortTaken::Exit,
            },
            metrics_web_config,
            queue_series,
            recording_max_bytes,
        }
    }
}
