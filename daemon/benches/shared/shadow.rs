//! The shadow policy the observe benches run beside the pass
//! (`observe_pass` in the VM, `observe_replay` on the host): the shipped
//! default in enforce mode. With a `prior` ring it has a fleet prior of
//! that ring for driver `ice` and no hourly change budget, so once the
//! bench shows it every device as an `ice` NIC ([`as_ice`]) it changes
//! all of them at the warm-up tick and every measured pass models them
//! all: the most a shadow can model.

use policy::Policy;
use policy::snapshot::Snapshot;
use pptune::service::shadow::Shadow;

/// The shadow of `policy` for a bench, with the fleet prior `prior` when
/// given.
pub fn bench_shadow(policy: &Policy, prior: Option<u32>) -> Shadow {
    let mut s = policy.clone();
    s.mode = policy::Mode::Enforce;
    s.selectors.iter_mut().for_each(|x| x.mode = None);
    if prior.is_some() {
        // Every device changed at once (the shipped hourly budget would
        // hold all but four).
        s.limits.max_changes_per_hour = u32::MAX;
    }
    s.priors = prior
        .map(|ring_rx| policy::policy::Prior {
            driver: "ice".into(),
            mtu: None,
            speed_mbps: None,
            model: None,
            firmware: None,
            ring_rx,
        })
        .into_iter()
        .collect();
    let mut p = policy.clone();
    p.shadow = Some(policy::policy::Shadow {
        path: "/bench/shadow.yaml".into(),
        policy: Some(Box::new(s)),
    });
    Shadow::of(&p).expect("a policy with a shadow")
}

/// Shows every device of `snap` as an `ice` NIC: netdevsim's ring does not
/// size its pool, so no ring change is ever proposed for it; ice's does.
pub fn as_ice(snap: &mut Snapshot) {
    for d in &mut snap.devices {
        d.driver = Some("ice".into());
    }
}
