//! Running commands inside the pptune test VM (`tests/vm/run.sh`).
//!
//! The VM boots one of the cached test kernels (7.3, 6.12, 6.1; see
//! `docs/testbed.md`) with the host's root filesystem read-only over 9p, so a
//! test binary built on the host runs unchanged inside. Tests that need the
//! VM's kernel call [`require_vm`] first: outside the VM it prints why the
//! test is skipped and returns `None`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::repo_root;

/// A failure to run a command in the VM (not the command's own failure,
/// which is its exit status).
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("starting the VM runner {path}")]
    SpawnRunner {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the VM timed out after {0:?}")]
    Timeout(Duration),
    #[error("the VM stopped without reporting an exit status (kernel panic or crash)")]
    NoStatus,
    #[error("the VM runner was killed by a signal")]
    Killed,
}

/// Kernel versions the testbed builds.
pub const KERNELS: [&str; 3] = ["7.3", "6.12", "6.1"];

/// True inside the test VM (`run.sh` sets `PPTUNE_IN_VM=1`).
#[must_use]
pub fn in_vm() -> bool {
    std::env::var_os("PPTUNE_IN_VM").is_some_and(|v| v == "1")
}

/// The testbed kernel version the VM runs (`7.3`, `6.12`, `6.1`), if in the VM.
#[must_use]
pub fn kernel() -> Option<String> {
    if in_vm() {
        std::env::var("PPTUNE_KERNEL").ok()
    } else {
        None
    }
}

/// The cached kernel directory (its source tree is `<dir>/linux`), if in the VM.
#[must_use]
pub fn kernel_dir() -> Option<PathBuf> {
    if in_vm() {
        std::env::var_os("PPTUNE_KERNEL_DIR").map(PathBuf::from)
    } else {
        None
    }
}

/// The writable directory shared with the host, if in the VM.
#[must_use]
pub fn out_dir() -> Option<PathBuf> {
    if in_vm() {
        std::env::var_os("PPTUNE_VM_OUT").map(PathBuf::from)
    } else {
        None
    }
}

/// The host profile the VM was booted with (`tests/vm/run.sh --profile`):
/// what the RX slow path costs on it (docs/testbed.md "Host profiles").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Nothing on the refill path but the page allocator.
    Free,
    /// `init_on_alloc=1`: every page the allocator hands out is cleared.
    Distro,
    /// Distro, and pools map through the emulated Intel IOMMU; the IOTLB
    /// is invalidated on every unmap.
    IommuStrict,
    /// Distro, and pools map through the emulated Intel IOMMU; unmaps'
    /// invalidations are batched by the flush queue.
    IommuLazy,
    /// Distro, and a PCI function without an IOMMU for ppsim's devmem
    /// device: a dma-buf bound to one of its RX queues runs the kernel's
    /// devmem memory provider there.
    Devmem,
}

impl Profile {
    /// Its name on `run.sh --profile` and in `PPTUNE_VM_PROFILE`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Free => "free",
            Self::Distro => "distro",
            Self::IommuStrict => "iommu-strict",
            Self::IommuLazy => "iommu-lazy",
            Self::Devmem => "devmem",
        }
    }

    /// Whether the VM has a PCI function for ppsim to bind to (its pools
    /// then map through it, translated or not).
    #[must_use]
    pub fn dma_device(self) -> bool {
        self.iommu() || self == Self::Devmem
    }

    /// Whether pools map their pages through the IOMMU.
    #[must_use]
    pub fn iommu(self) -> bool {
        matches!(self, Self::IommuStrict | Self::IommuLazy)
    }

    /// Whether the page allocator clears every page it hands out.
    #[must_use]
    pub fn zeroes(self) -> bool {
        self != Self::Free
    }
}

/// Where the guest's tracefs is, mounted there first if it is not yet
/// (`init.sh` mounts debugfs only).
///
/// # Panics
/// When the mount fails.
#[must_use]
pub fn tracefs() -> &'static Path {
    const TRACING: &str = "/sys/kernel/tracing";
    let dir = Path::new(TRACING);
    if !dir.join("trace").exists() {
        let ok = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACING])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mounting tracefs at {TRACING}");
    }
    dir
}

/// The profile this VM was booted with (`PPTUNE_VM_PROFILE`, set by
/// `run.sh`), if in the VM.
///
/// # Panics
/// An unknown profile name: the runner and this list disagree.
#[must_use]
#[allow(clippy::panic)] // the test's own failure
pub fn profile() -> Option<Profile> {
    if !in_vm() {
        return None;
    }
    let name = std::env::var("PPTUNE_VM_PROFILE").ok()?;
    let all = [
        Profile::Free,
        Profile::Distro,
        Profile::IommuStrict,
        Profile::IommuLazy,
        Profile::Devmem,
    ];
    Some(
        all.into_iter()
            .find(|p| p.name() == name)
            .unwrap_or_else(|| panic!("PPTUNE_VM_PROFILE={name:?} is no profile this crate knows")),
    )
}

/// Gate for VM-only tests (built with the `vm` feature): the kernel
/// version inside the VM. Outside it the test fails: it cannot run, so it
/// must not pass (`tests/vm/test.sh` runs these suites inside the VM).
///
/// # Panics
/// Outside the test VM (`PPTUNE_IN_VM != 1`).
#[must_use]
#[allow(clippy::panic)] // the test's own failure
pub fn require_vm(test: &str) -> String {
    kernel().unwrap_or_else(|| {
        panic!(
            "{test}: not inside the pptune test VM (PPTUNE_IN_VM != 1); \
             run tests/vm/test.sh to run it against real kernels"
        )
    })
}

/// The kernels `tests/vm/test.sh` starts a ppsim suite on (`suites_for`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PpsimKernels {
    /// 7.3 only, the full-suite kernel: the suites that run the daemon
    /// against ppsim (6.12 runs the compatibility subset).
    Only73,
    /// Every kernel ppsim is built for: not 6.1, which has no page-pool
    /// netlink.
    AllBut61,
}

/// Gate for the ppsim suites (built with the `vm` feature): the kernel
/// version inside the VM, which must be one `tests/vm/test.sh` starts the
/// suite on, with the ppsim module to load (`PPTUNE_PPSIM_KO`). Anything
/// else fails the test: it cannot run, so it must not pass.
///
/// # Panics
/// Outside the test VM, on another kernel, or without the module.
#[must_use]
pub fn require_ppsim(test: &str, kernels: PpsimKernels) -> String {
    let k = require_vm(test);
    match kernels {
        PpsimKernels::Only73 => assert!(
            k == "7.3",
            "{test}: this suite runs on 7.3 with ppsim, not {k} (tests/vm/test.sh suites_for)"
        ),
        PpsimKernels::AllBut61 => assert!(
            k != "6.1",
            "{test}: ppsim needs page-pool netlink, which 6.1 lacks (tests/vm/test.sh suites_for)"
        ),
    }
    assert!(
        std::env::var_os("PPTUNE_PPSIM_KO").is_some(),
        "{test}: PPTUNE_PPSIM_KO is not set although the kernel is {k}"
    );
    k
}

/// A command to run in a VM: `Vm::new("7.3").timeout(..).run(cmd)`.
#[derive(Debug, Clone)]
pub struct Vm {
    kernel: String,
    timeout: Duration,
    mem_mb: u32,
    smp: u32,
    out: Option<PathBuf>,
    envs: Vec<(String, String)>,
}

/// How a command in the VM ended, with its captured output (for
/// [`Vm::output`]; [`Vm::run`] streams and leaves `stdout` empty).
#[derive(Debug, Clone)]
pub struct VmOutput {
    pub status: i32,
    pub stdout: String,
}

impl Vm {
    /// A VM with the given kernel (`7.3`, `6.12`, `6.1`, or a cached kernel
    /// directory); 300 s timeout, 1024 MiB, 2 vCPUs.
    #[must_use]
    pub fn new(kernel: &str) -> Self {
        Self {
            kernel: kernel.to_owned(),
            timeout: Duration::from_secs(300),
            mem_mb: 1024,
            smp: 2,
            out: None,
            envs: Vec::new(),
        }
    }

    #[must_use]
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    #[must_use]
    pub fn mem_mb(mut self, mb: u32) -> Self {
        self.mem_mb = mb;
        self
    }

    #[must_use]
    pub fn smp(mut self, n: u32) -> Self {
        self.smp = n;
        self
    }

    /// Share this host directory with the VM (as `PPTUNE_VM_OUT`, same path).
    #[must_use]
    pub fn out_dir(mut self, dir: &Path) -> Self {
        self.out = Some(dir.to_path_buf());
        self
    }

    /// An extra environment variable for the command (names starting with
    /// `PPTUNE_`, `RUST_` or `CARGO_` are passed into the VM).
    #[must_use]
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.envs.push((name.to_owned(), value.to_owned()));
        self
    }

    fn command<S: AsRef<OsStr>>(&self, cmd: &[S]) -> Command {
        let mut c = Command::new(repo_root().join("tests/vm/run.sh"));
        c.arg("--kernel")
            .arg(&self.kernel)
            .arg("--timeout")
            .arg(self.timeout.as_secs().max(1).to_string())
            .arg("--mem")
            .arg(self.mem_mb.to_string())
            .arg("--smp")
            .arg(self.smp.to_string());
        if let Some(out) = &self.out {
            c.arg("--out").arg(out);
        }
        c.arg("--");
        c.args(cmd);
        for (k, v) in &self.envs {
            c.env(k, v);
        }
        c
    }

    /// Run `cmd` in the VM, streaming its output to this process's stdout
    /// and stderr; returns the command's exit status.
    ///
    /// # Errors
    /// The runner could not start, the VM timed out or crashed.
    pub fn run<S: AsRef<OsStr>>(&self, cmd: &[S]) -> Result<i32, VmError> {
        let status = self
            .command(cmd)
            .stdin(Stdio::null())
            .status()
            .map_err(|source| VmError::SpawnRunner {
                path: repo_root().join("tests/vm/run.sh"),
                source,
            })?;
        self.map_status(status.code())
    }

    /// Run `cmd` in the VM and capture what it printed (the serial console:
    /// stdout and stderr interleaved).
    ///
    /// # Errors
    /// The runner could not start, the VM timed out or crashed.
    pub fn output<S: AsRef<OsStr>>(&self, cmd: &[S]) -> Result<VmOutput, VmError> {
        let out = self
            .command(cmd)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|source| VmError::SpawnRunner {
                path: repo_root().join("tests/vm/run.sh"),
                source,
            })?;
        let status = self.map_status(out.status.code())?;
        Ok(VmOutput {
            status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        })
    }

    fn map_status(&self, code: Option<i32>) -> Result<i32, VmError> {
        match code {
            Some(124) => Err(VmError::Timeout(self.timeout)),
            Some(125) => Err(VmError::NoStatus),
            Some(c) => Ok(c),
            None => Err(VmError::Killed),
        }
    }
}

/// A netdevsim device (one port) created through `/sys/bus/netdevsim`,
/// deleted on drop. Only inside the VM (the test kernel builds netdevsim in).
#[derive(Debug)]
pub struct Netdevsim {
    id: u32,
    ifname: String,
    deleted: bool,
}

/// Failures while managing netdevsim devices.
#[derive(Debug, thiserror::Error)]
pub enum NetdevsimError {
    #[error("writing {value:?} to {path}")]
    Write {
        path: String,
        value: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("netdevsim{0} has no network interface")]
    NoInterface(u32),
    #[error("running ip link set {ifname}: {stderr}")]
    Ip { ifname: String, stderr: String },
}

fn sys_write(path: &str, value: &str) -> Result<(), NetdevsimError> {
    std::fs::write(path, value).map_err(|source| NetdevsimError::Write {
        path: path.to_owned(),
        value: value.to_owned(),
        source,
    })
}

impl Netdevsim {
    /// `echo "<id> 1 <queues>" > /sys/bus/netdevsim/new_device`.
    ///
    /// # Errors
    /// The bus refused the device or no interface appeared.
    pub fn new(id: u32, queues: u32) -> Result<Self, NetdevsimError> {
        sys_write("/sys/bus/netdevsim/new_device", &format!("{id} 1 {queues}"))?;
        let mut dev = Self {
            id,
            ifname: String::new(),
            deleted: false,
        };
        let dir = format!("/sys/bus/netdevsim/devices/netdevsim{id}/net");
        // The port's netdev is registered asynchronously to the write on
        // some kernels; give it a moment.
        for _ in 0..50 {
            if let Ok(rd) = std::fs::read_dir(&dir)
                && let Some(e) = rd.filter_map(Result::ok).next()
            {
                dev.ifname = e.file_name().to_string_lossy().into_owned();
                return Ok(dev);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(NetdevsimError::NoInterface(id))
    }

    #[must_use]
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's ifindex.
    ///
    /// # Errors
    /// sysfs could not be read.
    pub fn ifindex(&self) -> Result<u32, NetdevsimError> {
        let path = format!("/sys/class/net/{}/ifindex", self.ifname);
        let s = std::fs::read_to_string(&path).map_err(|source| NetdevsimError::Read {
            path: path.clone(),
            source,
        })?;
        s.trim().parse().map_err(|_| NetdevsimError::Read {
            path,
            source: std::io::Error::other(format!("not a number: {s:?}")),
        })
    }

    /// `ip link set <if> up|down`.
    ///
    /// # Errors
    /// ip failed.
    pub fn set_up(&self, up: bool) -> Result<(), NetdevsimError> {
        let out = Command::new("ip")
            .args(["link", "set", &self.ifname, if up { "up" } else { "down" }])
            .output()
            .map_err(|source| NetdevsimError::Read {
                path: "ip".to_owned(),
                source,
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(NetdevsimError::Ip {
                ifname: self.ifname.clone(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    /// Hold (or release) one page of queue 0's pool through debugfs
    /// `pp_hold` (holding needs the device up).
    ///
    /// # Errors
    /// The write failed (e.g. ENETDOWN).
    pub fn pp_hold(&self, hold: bool) -> Result<(), NetdevsimError> {
        sys_write(
            &format!(
                "/sys/kernel/debug/netdevsim/netdevsim{}/ports/0/pp_hold",
                self.id
            ),
            if hold { "y" } else { "n" },
        )
    }

    /// Delete the device now (drop does it too).
    ///
    /// # Errors
    /// The bus refused.
    pub fn delete(mut self) -> Result<(), NetdevsimError> {
        self.deleted = true;
        sys_write("/sys/bus/netdevsim/del_device", &self.id.to_string())
    }
}

impl Drop for Netdevsim {
    fn drop(&mut self) {
        if !self.deleted {
            let _ = sys_write("/sys/bus/netdevsim/del_device", &self.id.to_string());
        }
    }
}

/// The kernel's own ynl CLI from the cached source tree, run as
/// `cli.py --spec <tree>/Documentation/netlink/specs/netdev.yaml --dump <op>
/// --output-json`; returns its JSON text. The CLI moved from
/// `tools/net/ynl/cli.py` (6.12) to `tools/net/ynl/pyynl/cli.py` (7.x).
///
/// # Errors
/// Not in the VM, no CLI in the tree, or the CLI failed.
pub fn ynl_dump(op: &str) -> Result<String, String> {
    let dir = kernel_dir().ok_or("not inside the test VM")?;
    let tree = dir.join("linux");
    let cli = ["tools/net/ynl/pyynl/cli.py", "tools/net/ynl/cli.py"]
        .iter()
        .map(|p| tree.join(p))
        .find(|p| p.exists())
        .ok_or_else(|| format!("no ynl cli.py under {}", tree.display()))?;
    let spec = tree.join("Documentation/netlink/specs/netdev.yaml");
    let mut cmd = Command::new("python3");
    cmd.arg(&cli).arg("--spec").arg(&spec);
    // The schema check needs python3-jsonschema; skip it when absent.
    if Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        cmd.arg("--no-schema");
    }
    let out = cmd
        .args(["--dump", op, "--output-json"])
        .output()
        .map_err(|e| format!("running {}: {e}", cli.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --dump {op} failed: {}",
            cli.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests;
