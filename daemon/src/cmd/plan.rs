//! `pptune plan`: what `run` would do now, from live samples; nothing is
//! changed.

use std::io::IsTerminal as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use policy::Policy;
use policy::engine::Observation;
use policy::snapshot::Snapshot;
use tokio::time::Instant;

use super::args::{ConfigArg, JsonFlag};
use super::{load_policy, recorded_originals};
use crate::act::rollout;
use crate::publish::logging::action_text;
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::sample::{Kernel, SampleScope};
use crate::service::{Engine, PolicyEngine};

/// `pptune plan`'s arguments.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub json: JsonFlag,
    /// Exit 2 when `run` would change something (0 when it would hold
    /// everything), like `terraform plan -detailed-exitcode`.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

/// `pptune plan`. With `detailed_exitcode`, exit 2 when the plan
/// recommends any change (whatever the mode), 0 when it holds everything.
pub async fn plan(path: Option<&Path>, args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let (json, detailed_exitcode) = (args.json.on, args.detailed_exitcode);
    let policy = match load_policy(path) {
        Ok(l) => l.policy,
        Err(code) => return Ok(code),
    };
    let (samples, span) = policy::engine::findings_needed(&policy);
    let interval = policy.timing.interval;
    // Progress is for a person watching; a pipe or a log gets none.
    let progress = !json && std::io::stderr().is_terminal();
    if progress {
        crate::say_err!(
            "pptune plan: sampling {samples} times over {}s (every {}s: {} window(s) of {}s) to reach a finding, sooner on a severe miss; nothing is changed",
            span.as_secs(),
            interval.as_secs_f64(),
            policy.timing.windows_for_finding,
            policy.timing.window.as_secs_f64(),
        );
    }
    let (plan, taken, sampled_for, last) = sample_until_found(&policy, samples, progress).await?;
    // The advice beside the plan: what right-sizing would reclaim now.
    let reclaim = last
        .as_ref()
        .map(|s| super::reclaim::Reclaimable::of(&policy, s));
    // The ring cost estimate of each decided device in the last sample.
    let costs: std::collections::BTreeMap<String, u64> = last
        .iter()
        .flat_map(|s| &s.devices)
        .filter(|d| plan.decisions.iter().any(|dec| dec.ifindex == d.ifindex))
        .filter_map(|d| Some((d.name.clone(), policy::engine::current_device_bytes(d)?)))
        .collect();
    // What a miss costs on each decided device: its thresholds' price.
    let miss_costs: std::collections::BTreeMap<String, super::status::MissCostView> = last
        .iter()
        .flat_map(|s| &s.devices)
        .filter(|d| plan.decisions.iter().any(|dec| dec.ifindex == d.ifindex))
        .map(|d| (d.name.clone(), super::status::MissCostView::of(d)))
        .collect();
    let changes = plan
        .decisions
        .iter()
        .any(|d| d.action != policy::plan::Action::Hold);
    let done = if detailed_exitcode && changes {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    };
    let host = rollout::host_id(Path::new("/"));
    let standing = rollout::Standing::for_host(&policy, &host.value);
    let enforcing = standing.enforcing();
    if json {
        let v = serde_json::json!({
            "schema_version": 1,
            "samples": taken,
            "duration_s": sampled_for.as_secs_f64(),
            "host_enforcing": enforcing,
            "decisions": plan.decisions,
            "ring_cost_bytes": costs,
            "miss_cost": miss_costs,
            "budget": policy.budget,
            "reclaimable": reclaim,
        });
        crate::human::print_json(&v)?;
        return Ok(done);
    }
    print_plan(&plan, &standing, host.source);
    let host_cost = costs.values().sum();
    for d in &plan.decisions {
        if let Some(m) = miss_costs.get(&d.device) {
            crate::say!("{}: a miss costs {}", d.device, m.words());
        }
        if let Some(b) = costs.get(&d.device) {
            crate::say!(
                "{}: {}",
                d.device,
                crate::publish::view::ring_cost_words(
                    *b,
                    host_cost,
                    policy.budget.per_device_bytes,
                    policy.budget.per_host_bytes
                )
            );
        }
    }
    if let Some(r) = reclaim {
        crate::say_part!("\n{}", r.render());
    }
    Ok(done)
}

/// Samples as often as the policy needs for a finding (see `plan`): the
/// last plan, how many samples it took, how long from the first, and the
/// last sample.
async fn sample_until_found(
    policy: &Policy,
    samples: u32,
    progress: bool,
) -> anyhow::Result<(policy::Plan, u32, Duration, Option<Snapshot>)> {
    let interval = policy.timing.interval;
    let kernel = NetlinkKernel::connect().await?;
    let originals = recorded_originals()?;
    let mut engine = PolicyEngine::default();
    let origin = Instant::now();
    let mut observer = policy::observer::Observer::default();
    let mut plan = policy::Plan::default();
    let mut taken = 0;
    let mut acted: std::collections::BTreeMap<u32, policy::plan::Decision> =
        std::collections::BTreeMap::new();
    // `samples` closes the last window when every pass takes `interval`; a
    // slow host (or a slow netlink dump) drifts the window phase, and a plan
    // that stopped mid-window would answer "gathering" for a device with a
    // finding. So sample on, up to as many again, until no device is
    // mid-window.
    for i in 0..samples.saturating_mul(2) {
        if i > 0 {
            tokio::time::sleep(interval).await;
        }
        let snap = kernel.sample(&SampleScope::default()).await?;
        let now = origin.elapsed();
        let obs = Observation {
            pass: observer.next(&snap, now),
            local_time: None,
            history: &[],
            overrides: &[],
            originals: &originals,
            backoff: &policy::engine::NO_BACKOFF,
        };
        plan = engine.decide(policy, &obs);
        // A device's first recommendation is its answer: a severe miss
        // recommends before the windows close, and the engine then
        // gathers afresh (its evidence spent), so a later pass of the
        // same device would say less.
        for d in &mut plan.decisions {
            if d.action != policy::plan::Action::Hold {
                acted.insert(d.ifindex, d.clone());
            } else if let Some(a) = acted.get(&d.ifindex) {
                d.clone_from(a);
            }
        }
        observer.keep(snap, now);
        taken = i + 1;
        if progress {
            if taken <= samples {
                eprint!("\rsample {taken}/{samples}");
            } else {
                eprint!("\rsample {taken}/{samples} (+ closing the open window)");
            }
        }
        // Nothing selected, or nothing that more samples could judge:
        // answer now instead of sampling for nothing.
        if plan
            .decisions
            .iter()
            .all(|d| d.reason.cannot_judge() || d.action != policy::plan::Action::Hold)
        {
            break;
        }
        if taken >= samples
            && !plan
                .decisions
                .iter()
                .any(|d| d.reason == policy::ReasonCode::Gathering)
        {
            break;
        }
    }
    if progress {
        eprintln!();
    }
    Ok((plan, taken, origin.elapsed(), observer.into_previous()))
}

/// `pptune plan`'s text: the host's standing, then each decision with its
/// message, evidence and recommendation id.
fn print_plan(plan: &policy::Plan, standing: &rollout::Standing, host_source: &str) {
    let enforcing = standing.enforcing();
    if !enforcing {
        crate::say!(
            "rollout: {} (host id from {})",
            standing.describe(),
            host_source
        );
    }
    if plan.decisions.is_empty() {
        crate::say!("no interface is selected by the policy (or none exposes page pools)");
    }
    for d in &plan.decisions {
        let mode = if d.mode == policy::Mode::Enforce && enforcing {
            "enforce: run would do this"
        } else {
            "observe: run would only recommend this"
        };
        crate::say!(
            "{} — {} [{}] ({mode})",
            d.device,
            action_text(&d.action),
            d.reason
        );
        crate::say!("    {}", d.message);
        let ev: Vec<String> = d
            .evidence
            .iter()
            .map(|(k, v)| format!("{k}={v:.4}"))
            .collect();
        if !ev.is_empty() {
            crate::say!("    evidence: {}", ev.join(" "));
        }
        crate::say!("    recommendation id: {}", d.id);
    }
}
