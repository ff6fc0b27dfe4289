//! `pptune export`: what pptune set, in another owner's format (systemd
//! `.link`, NetworkManager, TuneD: the owners `act::coexist` reads).

use std::collections::BTreeMap;
use std::process::ExitCode;

use policy::Knob;
use policy::snapshot::Device;

use super::{read_record, require_known};
use crate::act::coexist::{LinkFacts, keys};
use crate::sample::kernel_netlink::NetlinkKernel;
use crate::sample::{Kernel, SampleScope};

/// `pptune export`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Only this interface (repeatable).
    #[arg(long = "interface", short = 'i', value_name = "NAME")]
    pub interfaces: Vec<String>,
}

/// `pptune export`: the values pptune set, per device present, in the
/// chosen owner's format.
pub async fn export(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let (format, interfaces) = (args.format, &args.interfaces);
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
        let values: BTreeMap<Knob, u32> = rec
            .as_ref()
            .map(crate::act::verify::expectations)
            .unwrap_or_default()
            .into_iter()
            .filter(|(id, ..)| id.key() == d.id.key())
            .map(|(_, _, k, v)| (k, v))
            .collect();
        if !values.is_empty() {
            match owner_config(format, d, &values) {
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

/// `pptune export` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// A `.link` file per device for `/etc/systemd/network/`.
    SystemdLink,
    /// A NetworkManager keyfile `[ethtool]` fragment and the `nmcli` command.
    Networkmanager,
    /// A TuneD profile fragment (one `[net]`-type section per device).
    Tuned,
}

/// Whether an interface name can be written as itself where a format reads
/// a pattern or a list: a `.link` `OriginalName=` glob list, a TuneD
/// `devices=` list or section name, a file name. Linux allows any byte in
/// a name but `/`, `:`, NUL and white space; `*`, `?`, `[`, `!`, `,`, `$`
/// or a quote would be read as syntax there.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+'))
}

/// `s` as one word for a POSIX shell: single-quoted unless it is plain.
fn shell_word(s: &str) -> String {
    if plain_name(s) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Why a device's values cannot be exported in a format.
#[derive(Debug, thiserror::Error)]
#[error(
    "{name}: {why}; rename the interface (a .link file's Name=, udev) or choose another --format"
)]
pub struct ExportError {
    name: String,
    why: &'static str,
}

/// The values of `d` as the owner's configuration, ready to install. The
/// device is matched by a stable identifier where the format has one
/// (permanent MAC, then udev path); by its name only where the name means
/// itself in that format ([`plain_name`]), else it is refused.
///
/// # Errors
/// The format could only match the device by a name it would read as a
/// pattern or a list.
pub fn owner_config(
    format: ExportFormat,
    d: &Device,
    values: &BTreeMap<Knob, u32>,
) -> Result<String, ExportError> {
    let f = LinkFacts::of(d);
    let refuse = |why| ExportError {
        name: f.name.clone(),
        why,
    };
    // In comments and file names only.
    let shown = if plain_name(&f.name) {
        f.name.clone()
    } else {
        format!("ifindex{}", d.ifindex)
    };
    let rows = || keys().filter_map(|k| values.get(&k.0).map(|v| (k, *v)));
    let mut s = String::new();
    match format {
        ExportFormat::SystemdLink => {
            let (key, val) = match (&f.mac, &f.path) {
                (Some(m), _) => ("PermanentMACAddress", m.clone()),
                (None, Some(p)) => ("Path", p.clone()),
                (None, None) if plain_name(&f.name) => ("OriginalName", f.name.clone()),
                (None, None) => {
                    return Err(refuse(
                        "no permanent MAC address or udev path to match it by, and OriginalName= \
                         would read its name as a glob list",
                    ));
                }
            };
            s.push_str(&format!(
                "# /etc/systemd/network/10-pptune-{shown}.link: the values pptune converged to.\n\
                 # A matching .link file replaces 99-default.link for this device, so its\n\
                 # naming and MAC policies are repeated here. Applied when the device\n\
                 # appears (udevadm trigger, or a reboot).\n\
                 [Match]\n{key}={val}\n\n[Link]\nNamePolicy=keep kernel database onboard slot path\n\
                 AlternativeNamesPolicy=database onboard slot path\nMACAddressPolicy=persistent\n"
            ));
            for (k, v) in rows() {
                s.push_str(&format!("{}={v}\n", k.1));
            }
        }
        ExportFormat::Networkmanager => {
            let args: Vec<String> = rows()
                .map(|(k, v)| format!("ethtool.{} {v}", k.2))
                .collect();
            s.push_str(&format!(
                "# {shown}: the values pptune converged to, for the connection profile of {shown}:\n\
                 #   nmcli connection modify \"$(nmcli -g GENERAL.CONNECTION device show {word})\" {}\n\
                 # or add this section to its keyfile in /etc/NetworkManager/system-connections/:\n\
                 [ethtool]\n",
                args.join(" "),
                word = shell_word(&f.name)
            ));
            for (k, v) in rows() {
                s.push_str(&format!("{}={v}\n", k.2));
            }
        }
        ExportFormat::Tuned => {
            if !plain_name(&f.name) {
                return Err(refuse(
                    "TuneD matches devices by name only, and its devices= would read this name \
                     as a pattern or a list",
                ));
            }
            s.push_str(&format!(
                "# {name}: the values pptune converged to; add to your TuneD profile's tuned.conf.\n\
                 [net_{name}]\ntype=net\ndevices={name}\n",
                name = f.name
            ));
            for kind in ["ring", "channels"] {
                let words: Vec<String> = rows()
                    .filter(|(k, _)| k.3.0 == kind)
                    .map(|(k, v)| format!("{} {v}", k.3.1))
                    .collect();
                if !words.is_empty() {
                    s.push_str(&format!("{kind}={}\n", words.join(" ")));
                }
            }
        }
    }
    Ok(s)
}
