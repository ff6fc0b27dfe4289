//! `pptune verify`: do the live values still hold what pptune set?

use std::process::ExitCode;

use super::args::JsonFlag;
use super::{read_record, require_known};
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::sample::{Kernel, SampleScope};

/// `pptune verify`'s arguments.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Only this interface (repeatable).
    #[arg(long = "interface", short = 'i', value_name = "NAME")]
    pub interfaces: Vec<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `pptune verify`: 0 when every knob pptune set holds its value, 2 when
/// one differs.
pub async fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let (interfaces, json) = (&args.interfaces, args.json.on);
    let kernel = NetlinkKernel::connect().await?;
    let devices = kernel.sample(&SampleScope::default()).await?.devices;
    let rec = read_record()?;
    let names: Vec<String> = devices.iter().map(|d| d.name.clone()).collect();
    require_known(interfaces, &names, rec.as_ref())?;
    let checks = crate::act::verify::verify(rec.as_ref(), &devices, interfaces);
    let holds = checks.iter().all(crate::act::verify::Check::holds);
    if json {
        let v = serde_json::json!({
            "schema_version": 1,
            "holds": holds,
            "knobs": checks.iter().map(|c| serde_json::json!({
                "device": c.device,
                "knob": c.knob.to_string(),
                "expected": c.expected,
                "live": c.live,
                "holds": c.holds(),
            })).collect::<Vec<_>>(),
        });
        crate::human::print_json(&v)?;
    } else {
        crate::say_part!("{}", crate::act::verify::render(&checks));
    }
    Ok(if holds {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
