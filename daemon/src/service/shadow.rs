//! The shadow policy (`shadow:` in the policy): a second engine on the
//! loop's live samples that never acts. It is the counterfactual engine
//! `pptune replay --against` runs ([`record::counterfactual`]), on the
//! loop's own pass: the devices it would have changed carry its knob
//! values and counters continued by the ring model where its ring differs
//! from the live one; the others are read as the loop has them. It holds
//! no kernel and no actuator: nothing it decides can reach a device,
//! whatever its mode says. What it would do goes to the metrics
//! (`pptune_shadow_*`).

use std::path::PathBuf;
use std::time::Duration;

use policy::Policy;
use policy::observation::LocalTime;
use policy::observer::Observer;
use policy::plan::{Knob, Plan};
use policy::snapshot::{DeviceId, Snapshot};
use record::counterfactual::{Counterfactual, PassClock};

use crate::publish::metrics::Metrics;
use crate::publish::metrics::shadow::ShadowPass;

/// The shadow engine and its policy.
#[derive(Debug)]
pub struct Shadow {
    path: PathBuf,
    policy: Policy,
    engine: Counterfactual,
    plan: Plan,
    tick: u64,
}

impl Shadow {
    /// The shadow `policy` names, when it names one (its file read by the
    /// policy load).
    #[must_use]
    pub fn of(policy: &Policy) -> Option<Self> {
        let s = policy.shadow.as_ref()?;
        let shadow = s.policy.as_deref()?.clone();
        tracing::info!(
            path = %s.path.display(),
            "shadow policy: evaluated on every sample, never acted on"
        );
        Some(Self {
            path: s.path.clone(),
            policy: shadow,
            engine: Counterfactual::default(),
            plan: Plan::default(),
            tick: 0,
        })
    }

    /// The shadow at the start: [`Shadow::of`], its series cleared when
    /// there is none.
    pub(super) fn start(policy: &Policy, metrics: &Metrics) -> Option<Self> {
        let s = Self::of(policy);
        if s.is_none() {
            metrics.observe_shadow(None);
        }
        s
    }

    /// After a reload: the same shadow (file and policy) keeps its engine
    /// and what it modelled; another one starts afresh; none ends it and
    /// its series.
    pub(super) fn reloaded(
        current: Option<Self>,
        policy: &Policy,
        metrics: &Metrics,
    ) -> Option<Self> {
        let same = match (&current, &policy.shadow) {
            (Some(c), Some(s)) => {
                s.path == c.path && s.policy.as_deref().is_some_and(|p| *p == c.policy)
            }
            _ => false,
        };
        if same {
            current
        } else {
            Self::start(policy, metrics)
        }
    }

    /// Whether two policies differ in more than their shadow: a reload
    /// that only changes the shadow keeps the findings of the policy in
    /// force.
    pub(super) fn differ_beyond(a: &mut Policy, b: &mut Policy) -> bool {
        let (sa, sb) = (a.shadow.take(), b.shadow.take());
        let differ = a != b;
        (a.shadow, b.shadow) = (sa, sb);
        differ
    }

    /// One pass on the loop's `live` sample, previous sample and deltas,
    /// its clock and overrides; what it would do is written to `metrics`.
    /// Its world is the live one except on the devices it changed, which
    /// stand in for the live ones while it runs; the loop gets its pass
    /// back as it was ([`Counterfactual::live_pass`]).
    pub fn pass(
        &mut self,
        live: (&mut Observer, &mut Snapshot),
        (now, elapsed, local_time): (Duration, Duration, Option<LocalTime>),
        overrides: &[(DeviceId, Knob)],
        metrics: &Metrics,
    ) {
        let clock = PassClock {
            now,
            elapsed,
            local_time,
        };
        self.tick += 1;
        let (policy, tick) = (&self.policy, self.tick);
        let mut plan = std::mem::take(&mut self.plan);
        self.engine.live_pass(
            policy,
            live,
            clock,
            overrides,
            &mut plan,
            |snapshot, deltas, engine, plan| {
                metrics.observe_shadow(Some(&ShadowPass {
                    policy,
                    snapshot,
                    deltas,
                    engine,
                    plan,
                    tick,
                }));
            },
        );
        self.plan = plan;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_shadow(max: u32) -> Policy {
        let mut p = config::default_policy().unwrap();
        let mut s = p.clone();
        s.rings.max = max;
        p.shadow = Some(policy::policy::Shadow {
            path: "/etc/pptune/shadow.yaml".into(),
            policy: Some(Box::new(s)),
        });
        p
    }

    /// A reload keeps the shadow's engine when the shadow is the same,
    /// starts a new one when it changed, and ends it (and its series) when
    /// the policy names none; a change to the shadow alone is not a change
    /// of the policy in force.
    #[test]
    fn a_reload_keeps_replaces_or_ends_the_shadow() {
        let m = Metrics::new();
        let mut s = Shadow::of(&with_shadow(4096)).unwrap();
        s.tick = 7;
        let kept = Shadow::reloaded(Some(s), &with_shadow(4096), &m).unwrap();
        assert_eq!(kept.tick, 7, "the same shadow keeps its engine");
        let new = Shadow::reloaded(Some(kept), &with_shadow(2048), &m).unwrap();
        assert_eq!((new.tick, new.policy.rings.max), (0, 2048));
        let none = Shadow::reloaded(Some(new), &config::default_policy().unwrap(), &m);
        assert!(none.is_none());
        assert!(m.encode().unwrap().contains("pptune_shadow_running 0\n"));

        let (mut a, mut b) = (with_shadow(4096), with_shadow(2048));
        assert!(!Shadow::differ_beyond(&mut a, &mut b));
        assert_eq!(a, with_shadow(4096), "the shadows are put back");
        b.rings.max = 1024;
        assert!(Shadow::differ_beyond(&mut a, &mut b));
    }
}
