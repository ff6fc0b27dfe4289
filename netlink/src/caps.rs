//! What the running kernel and this process can do, as data.

use crate::ctrl::{Family, Op};
use crate::error::Error;

/// `CAP_NET_ADMIN`'s bit in the capability sets.
const CAP_NET_ADMIN_BIT: u32 = 12;

/// The capability probe's result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// `/proc/sys/kernel/osrelease` (what `uname -r` prints).
    pub kernel_release: String,
    /// The netdev family's registered operations; `None` if the family is
    /// missing (kernel before 6.3, or no netdev genetlink).
    pub netdev_ops: Option<Vec<Op>>,
    /// The ethtool family's operations; `None` if the family is missing
    /// (kernel without `CONFIG_ETHTOOL_NETLINK`).
    pub ethtool_ops: Option<Vec<Op>>,
    /// The process's effective set has CAP_NET_ADMIN.
    pub cap_net_admin: bool,
}

impl Capabilities {
    /// Build from resolved families (either may be missing).
    pub fn new(netdev: Option<&Family>, ethtool: Option<&Family>) -> Result<Self, Error> {
        Ok(Self {
            kernel_release: kernel_release()?,
            netdev_ops: netdev.map(|f| f.ops.clone()),
            ethtool_ops: ethtool.map(|f| f.ops.clone()),
            cap_net_admin: has_cap_net_admin()?,
        })
    }

    /// The netdev operation `cmd` is registered (see [`crate::netdev::cmd`]).
    #[must_use]
    pub fn netdev_op(&self, cmd: u8) -> Option<Op> {
        self.netdev_ops
            .as_ref()?
            .iter()
            .copied()
            .find(|o| o.id == u32::from(cmd))
    }

    /// The ethtool operation `cmd` is registered (see [`crate::ethtool::req`]).
    #[must_use]
    pub fn ethtool_op(&self, cmd: u8) -> Option<Op> {
        self.ethtool_ops
            .as_ref()?
            .iter()
            .copied()
            .find(|o| o.id == u32::from(cmd))
    }
}

/// The running kernel's release string.
pub fn kernel_release() -> Result<String, Error> {
    let path = "/proc/sys/kernel/osrelease";
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|source| Error::ReadFile {
            path: path.to_owned(),
            source,
        })
}

/// CAP_NET_ADMIN in the effective set (`CapEff` in `/proc/self/status`).
///
/// This is the initial-user-namespace view that `GENL_ADMIN_PERM` checks;
/// ethtool SET's `GENL_UNS_ADMIN_PERM` could also pass inside a user
/// namespace that owns the netns, which this does not try to detect.
pub fn has_cap_net_admin() -> Result<bool, Error> {
    let path = "/proc/self/status";
    let s = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    Ok(parse_cap_eff(&s).is_some_and(|caps| caps & (1u64 << CAP_NET_ADMIN_BIT) != 0))
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// CLOCK_BOOTTIME now, in whole seconds (the clock of `detach-time`),
/// read from `/proc/uptime`, which the kernel derives from boottime.
pub fn boottime_secs() -> Result<u64, Error> {
    let path = "/proc/uptime";
    let s = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    Ok(parse_uptime(&s).unwrap_or(0))
}

fn parse_uptime(s: &str) -> Option<u64> {
    let first = s.split_whitespace().next()?;
    let secs = first.split('.').next()?;
    secs.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_parsing() {
        let s = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t0000000000001000\n";
        assert_eq!(parse_cap_eff(s), Some(0x1000));
        assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
        assert_eq!(parse_uptime("12345.67 999.0\n"), Some(12345));
    }
}
