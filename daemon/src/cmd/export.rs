//! `pptune export`: what pptune set, in another owner's format.

use std::process::ExitCode;

use super::{read_record, require_known};
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::sample::{Kernel, SampleScope};

/// `pptune export`: the values pptune set, per device present, in the
/// chosen owner's format.
pub async fn export(
    format: crate::act::coexist::ExportFormat,
    interfaces: &[String],
) -> anyhow::Result<ExitCode> {
    let kernel = NetlinkKernel::connect().await?;
    let devices = kernel.sample(&SampleScope::default()).await?.devices;
    let rec = read_record()?;
    let names: Vec<String> = devices.iter().map(|d| d.name.clone()).collect();
    require_known(interfaces, &names, rec.as_ref())?;
    let mut out = String::new();
    let mut refused = Vec::new();
    for d in &devices {
        if !interfaces.is_empty() && !interfaces.contains(&d.name) {
            continue;
        }
        let values: std::collections::BTreeMap<policy::Knob, u32> = rec
            .as_ref()
            .map(crate::act::verify::expectations)
            .unwrap_or_default()
            .into_iter()
            .filter(|(id, ..)| id.key() == d.id.key())
            .map(|(_, _, k, v)| (k, v))
            .collect();
        if !values.is_empty() {
            match crate::act::coexist::export(format, d, &values) {
                Ok(s) => {
                    out.push_str(&s);
                    out.push('\n');
                }
                Err(e) => refused.push(e.to_string()),
            }
        }
    }
    // All or nothing: output redirected into a file is installed as a
    // whole, so a device left out must not pass unnoticed.
    if !refused.is_empty() {
        anyhow::bail!(
            "nothing exported: {} cannot be written in this format:\n  {}",
            if refused.len() == 1 {
                "one device"
            } else {
                "some devices"
            },
            refused.join("\n  ")
        );
    }
    // Nothing set is an answer, not a failure (as `verify` says 0 for it):
    // the note on stderr, nothing on stdout.
    if out.is_empty() {
        crate::say_err!("pptune has set nothing it still owns on these devices: nothing to export");
        return Ok(ExitCode::SUCCESS);
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}
