//! Driver name, firmware and model of a network device.
//!
//! ethtool netlink has no drvinfo message, so this is the one place pptune
//! uses an ioctl (`SIOCETHTOOL` / `ETHTOOL_GDRVINFO`, unprivileged). The
//! ioctl is tried first because it answers for the caller's network
//! namespace; `/sys/class/net/<if>/device/driver` reflects the namespace
//! sysfs was mounted in, which inside `ip netns exec` or after `setns` may
//! be another namespace with a same-named device. sysfs is the fallback.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x3;

/// `struct ethtool_drvinfo` (`include/uapi/linux/ethtool.h`).
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// What `ETHTOOL_GDRVINFO` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrvInfo {
    pub driver: String,
    pub version: String,
    pub fw_version: String,
    pub bus_info: String,
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    crate::attr::kernel_text(&b[..end]).into_owned()
}

/// `ETHTOOL_GDRVINFO` on `ifname` in the calling thread's netns.
pub fn drvinfo(ifname: &str) -> io::Result<DrvInfo> {
    let name = crate::attr::kernel_bytes(ifname);
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: plain socket(2) call; the returned fd is checked and then owned.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh, valid descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut info = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        n_priv_flags: 0,
        n_stats: 0,
        testinfo_len: 0,
        eedump_len: 0,
        regdump_len: 0,
    };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(name.iter()) {
        *dst = *src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = std::ptr::addr_of_mut!(info).cast();
    // SAFETY: SIOCETHTOOL with ETHTOOL_GDRVINFO reads `ifr` (a NUL-terminated
    // name, checked shorter than IFNAMSIZ above, and a pointer to `info`) and
    // writes at most size_of::<EthtoolDrvinfo>() bytes into `info`, which
    // lives until after the call; the fd is valid for the call's duration.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(DrvInfo {
        driver: cstr(&info.driver),
        version: cstr(&info.version),
        fw_version: cstr(&info.fw_version),
        bus_info: cstr(&info.bus_info),
    })
}

/// `basename(readlink /sys/class/net/<if>/device/driver)`.
pub fn sysfs_driver(ifname: &str) -> io::Result<String> {
    let name = crate::attr::kernel_bytes(ifname);
    if name.contains(&b'/') || *name == *b"." || *name == *b".." {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let name = std::ffi::OsStr::from_bytes(&name).to_owned();
    let link = std::fs::read_link(
        std::path::Path::new("/sys/class/net")
            .join(name)
            .join("device/driver"),
    )?;
    link.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
}

/// The driver name: the ioctl, else sysfs, else `None`.
#[must_use]
pub fn driver_name(ifname: &str) -> Option<String> {
    match drvinfo(ifname) {
        Ok(d) if !d.driver.is_empty() => Some(d.driver),
        _ => sysfs_driver(ifname).ok(),
    }
}

/// What a device is, for grouping a fleet: its driver, its firmware
/// version and its model (PCI vendor:device).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub driver: String,
    /// `ethtool -i`'s `firmware-version`; `None` when the driver reports
    /// none (empty, or `N/A`).
    pub firmware: Option<String>,
    /// `vendor:device` of its PCI function (`8086:159b`), read from sysfs
    /// by the bus address the driver reports; `None` off PCI.
    pub model: Option<String>,
}

/// The device's [`Identity`]: the ioctl (driver, firmware, bus address),
/// the driver from sysfs when the ioctl fails; `None` when neither knows
/// the driver.
#[must_use]
pub fn identity(ifname: &str) -> Option<Identity> {
    match drvinfo(ifname) {
        Ok(d) if !d.driver.is_empty() => {
            let firmware = Some(d.fw_version).filter(|f| !f.is_empty() && f != "N/A");
            let model = pci_model(std::path::Path::new("/sys/bus/pci/devices"), &d.bus_info);
            Some(Identity {
                driver: d.driver,
                firmware,
                model,
            })
        }
        _ => sysfs_driver(ifname).ok().map(|driver| Identity {
            driver,
            ..Identity::default()
        }),
    }
}

/// `vendor:device` of PCI function `bus_info` (`0000:3b:00.0`) under
/// `root` (`/sys/bus/pci/devices`: by bus address, the same in every
/// network namespace); `None` for anything that is not a PCI address or
/// has no such function.
#[must_use]
pub fn pci_model(root: &std::path::Path, bus_info: &str) -> Option<String> {
    // dddd:bb:dd.f, hex digits.
    let b = bus_info.as_bytes();
    let hex = |r: std::ops::Range<usize>| {
        b.get(r)
            .is_some_and(|s| s.iter().all(u8::is_ascii_hexdigit))
    };
    let pci = b.len() == 12
        && b.get(4) == Some(&b':')
        && b.get(7) == Some(&b':')
        && b.get(10) == Some(&b'.')
        && hex(0..4)
        && hex(5..7)
        && hex(8..10)
        && hex(11..12);
    if !pci {
        return None;
    }
    let id = |f: &str| -> Option<String> {
        let v = std::fs::read_to_string(root.join(bus_info).join(f)).ok()?;
        let v = v.trim().strip_prefix("0x")?;
        (v.len() == 4 && v.bytes().all(|c| c.is_ascii_hexdigit())).then(|| v.to_ascii_lowercase())
    };
    Some(format!("{}:{}", id("vendor")?, id("device")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PCI function's ids as sysfs writes them (`0x8086\n`), lower-case;
    /// nothing for a bus address that is not PCI's, one that is absent, or
    /// ids that are not four hex digits.
    #[test]
    fn pci_model_reads_vendor_and_device() {
        let root = tempfile::tempdir().unwrap();
        let f = root.path().join("0000:3b:00.0");
        std::fs::create_dir(&f).unwrap();
        std::fs::write(f.join("vendor"), "0x8086\n").unwrap();
        std::fs::write(f.join("device"), "0x159B\n").unwrap();
        assert_eq!(
            pci_model(root.path(), "0000:3b:00.0").as_deref(),
            Some("8086:159b")
        );
        for other in [
            "",
            "netdevsim1",
            "0000:3b:00.1",
            "../../etc:00.0",
            "0000:3b:00:0",
        ] {
            assert_eq!(pci_model(root.path(), other), None, "{other}");
        }
        std::fs::write(f.join("device"), "0x15\n").unwrap();
        assert_eq!(pci_model(root.path(), "0000:3b:00.0"), None);
    }
}
