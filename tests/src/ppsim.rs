//! Driving `ppsim`, the simulated page_pool NIC (`tests/ppsim/`), from tests
//! and benchmarks. Everything goes through its debugfs control files (see
//! `tests/ppsim/README.md`); rings and channels are set with the real
//! ethtool interface by the caller (pptune's netlink client, or
//! [`PpsimDev::ethtool_set_rx_ring`] for scripts that do not want it).
//!
//! Needs root and the ppsim module built for the running kernel, i.e. the
//! test VM; `tests/vm/test.sh` passes the module's path in `PPTUNE_PPSIM_KO`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::Duration;

const DEBUGFS: &str = "/sys/kernel/debug/ppsim";

/// What went wrong while driving ppsim. Each names the file or command.
#[derive(Debug, thiserror::Error)]
pub enum PpsimError {
    #[error("PPTUNE_PPSIM_KO is not set (tests/vm/test.sh sets it to the built module)")]
    ModuleUnknown,
    #[error("loading the ppsim module {path}: {stderr}")]
    Load { path: PathBuf, stderr: String },
    #[error("running {cmd}")]
    Spawn {
        cmd: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{cmd} failed: {stderr}")]
    Command { cmd: String, stderr: String },
    #[error("writing {value:?} to {path}")]
    Write {
        path: PathBuf,
        value: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {path}: {what}")]
    Parse { path: PathBuf, what: String },
    #[error("no new ppsim device appeared after new_device")]
    NoNewDevice,
}

/// A named slow-path cost preset (`cost_preset` file). The values each
/// sets, and where they come from, are in `tests/ppsim/README.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostPreset {
    /// No charged cost: plain kernel behaviour.
    Off,
    /// Zone-lock contention on a many-core host (40 µs per slow refill and
    /// per 64 pages freed past a full ring).
    ZoneLock,
    /// A device-memory pool's gen_pool (100 µs per slow refill, 2.5 ms per
    /// 64 pages freed past a full ring).
    Devmem,
}

impl CostPreset {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::ZoneLock => "zonelock",
            Self::Devmem => "devmem",
        }
    }
}

/// A driver family a ppsim device can behave like (`personality` file;
/// `tests/ppsim/ppsim_personality.h`, rows of docs/drivers.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Personality {
    /// ppsim's own: driver `ppsim`, pool = ring, ring 64..16384.
    Ppsim,
    /// `gve`: pool = 4 × ring, ring a power of two or EINVAL (512..4096),
    /// a live ring change sizes the new pool from the old ring.
    Gve,
    /// `bnxt_en` with aggregation rings: pool = rx-jumbo = min(4 × rx,
    /// 8191), rx ≤ 2047.
    Bnxt,
    /// `bnxt_en` without aggregation rings: pool fixed at 1024, rx ≤ 8191.
    BnxtNoAgg,
    /// `mlx5_core` striding RQ: pool = ring × stride / page (0.5 at MTU
    /// 1500), floor 256; ring rounded up to a power of two, 16..8192.
    Mlx5Striding,
    /// `rvu_nicpf` (octeontx2): pool = min(2048, ring); ring 16·4^k.
    Octeontx2,
    /// `ppsim-pow2`, a driver pptune has no row for: pool = ring, a ring
    /// that is not a power of two is refused with EINVAL and no extack.
    Pow2,
}

impl Personality {
    /// Every personality, for tests that run a scenario under each.
    pub const ALL: [Self; 7] = [
        Self::Ppsim,
        Self::Gve,
        Self::Bnxt,
        Self::BnxtNoAgg,
        Self::Mlx5Striding,
        Self::Octeontx2,
        Self::Pow2,
    ];

    /// The value of the `personality` file.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Ppsim => "ppsim",
            Self::Gve => "gve",
            Self::Bnxt => "bnxt",
            Self::BnxtNoAgg => "bnxt-noagg",
            Self::Mlx5Striding => "mlx5-striding",
            Self::Octeontx2 => "octeontx2",
            Self::Pow2 => "pow2",
        }
    }

    /// The driver name `ethtool -i` shows.
    #[must_use]
    pub fn driver(self) -> &'static str {
        match self {
            Self::Ppsim => "ppsim",
            Self::Gve => "gve",
            Self::Bnxt | Self::BnxtNoAgg => "bnxt_en",
            Self::Mlx5Striding => "mlx5_core",
            Self::Octeontx2 => "rvu_nicpf",
            Self::Pow2 => "ppsim-pow2",
        }
    }
}

/// The traffic and cost knobs, all at once. `Default` is ppsim's own
/// defaults: unlimited rate, 64-page bursts, no hold, no cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    /// Arrivals per second per queue; 0 = as fast as the producer can.
    pub rate_pps: u32,
    /// Pages the consumer returns at once (1..=16384).
    pub burst_pages: u32,
    /// How long the consumer keeps a complete burst before returning it.
    pub hold_us: u32,
    /// Cost charged per slow-path refill (alloc.slow event), µs.
    pub slow_cost_us: u32,
    /// Cost charged per 64 pages freed past a full recycle ring, µs.
    pub release_cost_us: u32,
    /// Each other queue charged at the same moment adds this % to a cost.
    pub contention_pct: u32,
    /// % of returned pages the stack still references (released by the
    /// pool, not recycled: the untunable held-pages case).
    pub stack_ref_pct: u32,
    /// The device's line rate in the modelled figure, pages/s (0 = none).
    pub line_pps: u32,
    /// Paced delivery: each queue delivers at its modelled rate divided by
    /// this, so the kernel's rx-packets rate follows the model (0 = off,
    /// the charged stalls apply instead). Applies from the next start.
    pub pace_scale: u32,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            rate_pps: 0,
            burst_pages: 64,
            hold_us: 0,
            slow_cost_us: 0,
            release_cost_us: 0,
            contention_pct: 0,
            stack_ref_pct: 0,
            line_pps: 0,
            pace_scale: 0,
        }
    }
}

impl Knobs {
    /// The queue-count anchor (tests/ppsim/README.md "Queue count"; the
    /// outcome bench's `CONTENDED` case carries the same three numbers):
    /// the zone lock's 6 µs per bulk, 44 % more per other queue on the
    /// slow path, and a 3.4 Mpps line rate — goodput at the default ring
    /// peaks at 6 queues and falls to 0.69 of that at 16, the field
    /// report's 63.6 → 43.3 Gbit/s. `burst_pages` per return.
    #[must_use]
    pub fn queue_anchor(burst_pages: u32) -> Self {
        Self {
            burst_pages,
            slow_cost_us: 6,
            release_cost_us: 6,
            contention_pct: 44,
            line_pps: 3_400_000,
            ..Self::default()
        }
    }

    /// The outcome run's `queues-held` workload: every page held by the
    /// stack (released, refilled from the slow path at any ring) under the
    /// anchor's contention, delivery paced to the model at 1/50 so the
    /// kernel's rx-packets rate follows the modelled figure ("Paced
    /// delivery").
    #[must_use]
    pub fn queues_held() -> Self {
        Self {
            stack_ref_pct: 100,
            pace_scale: 50,
            ..Self::queue_anchor(64)
        }
    }

    /// The knobs with a preset's cost values.
    #[must_use]
    pub fn with_preset(mut self, p: CostPreset) -> Self {
        let (s, r) = match p {
            CostPreset::Off => (0, 0),
            CostPreset::ZoneLock => (40, 40),
            CostPreset::Devmem => (100, 2500),
        };
        self.slow_cost_us = s;
        self.release_cost_us = r;
        self
    }
}

/// The `goodput` file: cumulative device counters and the window since
/// traffic was last started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Goodput {
    pub now_ns: u64,
    /// Pages received and delivered to the consumer, all queues, ever.
    pub delivered: u64,
    /// Arrivals lost: RX ring full, backlog full, allocation failure.
    pub dropped: u64,
    /// Total time charged by the cost model (stalls), ns.
    pub charged_ns: u64,
    pub window_ns: u64,
    pub window_delivered: u64,
    pub window_dropped: u64,
    pub goodput_pps: u64,
    /// Modelled busy time, summed over the device's queues, ns: a fixed
    /// cost per delivered page plus the preset's cost per slow-path refill
    /// and per release bulk past a full ring, scaled by contention
    /// (tests/ppsim/README.md, "Modelled goodput").
    pub model_ns: u64,
    /// Active queues when read.
    pub queues: u64,
    /// Arrival rate per queue (0 = unlimited).
    pub rate_pps: u64,
    /// The device's line rate in the model, pages/s (0 = none).
    pub line_pps: u64,
    /// `model_ns` and `delivered` as they were at each queue's last burst
    /// return (whole receive-and-return cycles), summed over the queues:
    /// what the modelled figure is taken from.
    pub model_done_ns: u64,
    pub model_done_pk: u64,
}

impl Goodput {
    /// Delivered pages per second between two readings.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn pps_since(&self, earlier: &Goodput) -> f64 {
        let dt = self.now_ns.saturating_sub(earlier.now_ns);
        if dt == 0 {
            return 0.0;
        }
        self.delivered.saturating_sub(earlier.delivered) as f64 * 1e9 / dt as f64
    }

    /// Modelled goodput between two readings: delivered pages per second of
    /// modelled time, the queues running in parallel (each queue's time is
    /// the mean of theirs), counted over the whole receive-and-return
    /// cycles each queue completed in between. With a fixed arrival rate a queue cannot run
    /// ahead of its arrivals, so its time is at least the wall time; and
    /// the device delivers no faster than its line rate (`line_pps`, when
    /// set). Does not depend on the host's speed: the figure the outcome
    /// benchmark decides on.
    #[must_use]
    pub fn modelled_pps_since(&self, earlier: &Goodput) -> f64 {
        self.modelled_since(earlier, self.rate_pps > 0)
    }

    /// The modelled **capacity** between two readings: as
    /// [`Goodput::modelled_pps_since`] without the arrival rate's bound,
    /// i.e. the pages per second the queues' modelled busy time would give
    /// (line rate still applies). Equal to the modelled goodput when the
    /// rate is unlimited. With a fixed arrival rate every ring whose
    /// capacity exceeds it delivers that rate, so goodput cannot rank the
    /// rings; capacity (the inverse of the modelled CPU cost per page)
    /// still does, and does not depend on whether the emulated CPU kept up.
    #[must_use]
    pub fn capacity_pps_since(&self, earlier: &Goodput) -> f64 {
        self.modelled_since(earlier, false)
    }

    #[allow(clippy::cast_precision_loss)]
    fn modelled_since(&self, earlier: &Goodput, bounded_by_arrivals: bool) -> f64 {
        let model = self.model_done_ns.saturating_sub(earlier.model_done_ns) as f64
            / self.queues.max(1) as f64;
        let t = if bounded_by_arrivals {
            model.max(self.now_ns.saturating_sub(earlier.now_ns) as f64)
        } else {
            model
        };
        let delivered = self.model_done_pk.saturating_sub(earlier.model_done_pk) as f64;
        let t = if self.line_pps > 0 {
            t.max(delivered * 1e9 / self.line_pps as f64)
        } else {
            t
        };
        if t <= 0.0 {
            return 0.0;
        }
        delivered * 1e9 / t
    }
}

/// One line of the `queues` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueState {
    pub queue: u32,
    pub ring: u32,
    pub pool_id: u32,
    pub napi_id: u32,
    pub held: u64,
    pub packets: u64,
    pub bytes: u64,
    pub alloc_fail: u64,
    pub drops_ring: u64,
    pub drops_backlog: u64,
    pub returned: u64,
    pub bursts: u64,
    pub slow_events: u64,
    pub ring_full_pages: u64,
    pub charged_ns: u64,
    pub capped: u64,
    /// The pool's real ring size (`ptr_ring` size after the page_pool
    /// clamp and default), 0 without a pool.
    pub pool_size: u32,
    /// RX buffers posted to the "device" (held from the pool, in inflight).
    pub posted: u64,
    /// Release bulks past a full ring (ring_full pages / 64, rounded up).
    pub release_bulks: u64,
    /// This queue's modelled busy time, ns.
    pub model_ns: u64,
    /// Paced delivery: wall-clock lag the queue could not make up and
    /// wrote off (the emulated CPU did not keep up), ns.
    pub pace_behind_ns: u64,
    /// Wire mode: frames lost because no RX descriptor was free.
    pub overruns: u64,
    /// Wire mode: filled descriptors the NAPI has not taken yet.
    pub wire_filled: u64,
    /// Header split: payload refills the memory provider served (the
    /// pool's cache and ring were empty), their time in all and the
    /// longest, guest ns.
    pub mp_allocs: u64,
    pub mp_alloc_ns: u64,
    pub mp_alloc_max_ns: u64,
}

/// The loaded ppsim module.
#[derive(Debug)]
pub struct Ppsim {
    root: PathBuf,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, PpsimError> {
    let full = format!("{cmd} {}", args.join(" "));
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|source| PpsimError::Spawn {
            cmd: full.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(PpsimError::Command {
            cmd: full,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn write(path: &Path, value: &str) -> Result<(), PpsimError> {
    fs::write(path, value).map_err(|source| PpsimError::Write {
        path: path.to_path_buf(),
        value: value.to_owned(),
        source,
    })
}

fn read(path: &Path) -> Result<String, PpsimError> {
    fs::read_to_string(path).map_err(|source| PpsimError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_kv<T: Default>(
    path: &Path,
    line: &str,
    mut set: impl FnMut(&mut T, &str, u64) -> bool,
) -> Result<T, PpsimError> {
    let mut v = T::default();
    for field in line.split_whitespace() {
        let (k, val) = field.split_once('=').ok_or_else(|| PpsimError::Parse {
            path: path.to_path_buf(),
            what: format!("field {field:?} is not key=value"),
        })?;
        let n: u64 = val.parse().map_err(|_| PpsimError::Parse {
            path: path.to_path_buf(),
            what: format!("{k}={val:?} is not a number"),
        })?;
        // Unknown keys are ignored so the module can add figures.
        let _ = set(&mut v, k, n);
    }
    Ok(v)
}

fn u32_of(path: &Path, k: &str, n: u64) -> Result<u32, PpsimError> {
    u32::try_from(n).map_err(|_| PpsimError::Parse {
        path: path.to_path_buf(),
        what: format!("{k}={n} does not fit 32 bits"),
    })
}

/// ppsim's `calibrate`: per-page times of each pool path, on a pool made
/// as an RX queue's (under `--icount`, guest instructions), medians over
/// its rounds, and what the slow path's pages showed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calibration {
    /// A page taken by the slow path (bulk refill from the page allocator,
    /// cleared on a distro host, mapped through an IOMMU).
    pub slow_ns: u64,
    /// A page put into a pool ring with room.
    pub put_ring_ns: u64,
    /// A page taken back from the ring.
    pub get_ring_ns: u64,
    /// A page put into a full ring: unmapped and freed.
    pub release_ns: u64,
    /// Slow-path pages that still held what was written into them before
    /// they were freed (the allocator did not clear them).
    pub dirty_refills: u64,
    /// Slow-path pages the zeroing check looked at.
    pub checked_refills: u64,
    /// Slow-path pages whose DMA address is not their physical address
    /// (mapped through an IOMMU).
    pub mapped: u64,
    /// Slow-path pages in all.
    pub slow_pages: u64,
}

impl Calibration {
    /// A recycled page: put into the ring, taken back.
    #[must_use]
    pub fn recycled_ns(&self) -> u64 {
        self.put_ring_ns + self.get_ring_ns
    }

    /// A recycle miss: freed past a full ring, then bought back by the
    /// slow path.
    #[must_use]
    pub fn miss_ns(&self) -> u64 {
        self.release_ns + self.slow_ns
    }
}

impl Ppsim {
    /// Run ppsim's calibration (debugfs `calibrate`; seconds of guest time).
    ///
    /// # Errors
    /// Read or parse failure.
    pub fn calibrate(&self) -> Result<Calibration, PpsimError> {
        let p = self.root.join("calibrate");
        let s = read(&p)?;
        parse_kv(&p, s.trim(), |c: &mut Calibration, k, n| {
            match k {
                "slow_ns" => c.slow_ns = n,
                "put_ring_ns" => c.put_ring_ns = n,
                "get_ring_ns" => c.get_ring_ns = n,
                "release_ns" => c.release_ns = n,
                "dirty_refills" => c.dirty_refills = n,
                "checked_refills" => c.checked_refills = n,
                "mapped" => c.mapped = n,
                "slow_pages" => c.slow_pages = n,
                _ => return false,
            }
            true
        })
    }

    /// The PCI function ppsim's pools map through (`0000:00:01.0`), if the
    /// VM has one (the iommu profiles).
    ///
    /// # Errors
    /// Read failure.
    pub fn dma_device(&self) -> Result<Option<String>, PpsimError> {
        let s = read(&self.root.join("dma_device"))?;
        let s = s.trim();
        Ok((s != "none").then(|| s.to_owned()))
    }
}

impl Ppsim {
    /// Load the module from `PPTUNE_PPSIM_KO` unless it is loaded already.
    ///
    /// # Errors
    /// No module path, or insmod failed.
    pub fn load() -> Result<Self, PpsimError> {
        if !Path::new("/sys/module/ppsim").exists() {
            let ko = std::env::var_os("PPTUNE_PPSIM_KO").ok_or(PpsimError::ModuleUnknown)?;
            let ko = PathBuf::from(ko);
            let out =
                Command::new("insmod")
                    .arg(&ko)
                    .output()
                    .map_err(|source| PpsimError::Spawn {
                        cmd: format!("insmod {}", ko.display()),
                        source,
                    })?;
            if !out.status.success() {
                return Err(PpsimError::Load {
                    path: ko,
                    stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                });
            }
        }
        Ok(Self {
            root: PathBuf::from(DEBUGFS),
        })
    }

    fn devices(&self) -> Result<Vec<String>, PpsimError> {
        let rd = fs::read_dir(&self.root).map_err(|source| PpsimError::Read {
            path: self.root.clone(),
            source,
        })?;
        let mut v: Vec<String> = rd
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        Ok(v)
    }

    /// Deletes every ppsim device there is (one a failed test left behind:
    /// the tests in a VM run one at a time).
    ///
    /// # Errors
    /// The device list could not be read or a deletion failed.
    pub fn delete_all(&self) -> Result<(), PpsimError> {
        for name in self.devices()? {
            write(&self.root.join("del_device"), &name)?;
        }
        Ok(())
    }

    /// Create a device with `queues` combined channels (1..=16), RX ring 256.
    ///
    /// # Errors
    /// The write failed or no new device showed up.
    pub fn new_device(&self, queues: u32) -> Result<PpsimDev, PpsimError> {
        self.create(&queues.to_string())
    }

    /// Create a devmem device (README.md "Devmem"): a child of the PCI
    /// function ppsim bound, with queue management ops, header split and
    /// unreadable RX buffers on a queue a dma-buf is bound to.
    ///
    /// # Errors
    /// The write failed (ENODEV: no PCI function bound, the devmem host
    /// profile gives one) or no new device showed up.
    pub fn new_devmem_device(&self, queues: u32) -> Result<PpsimDev, PpsimError> {
        self.create(&format!("{queues} devmem"))
    }

    fn create(&self, spec: &str) -> Result<PpsimDev, PpsimError> {
        let before = self.devices()?;
        write(&self.root.join("new_device"), spec)?;
        let after = self.devices()?;
        let name = after
            .into_iter()
            .find(|d| !before.contains(d))
            .ok_or(PpsimError::NoNewDevice)?;
        Ok(PpsimDev {
            dir: self.root.join(&name),
            del: self.root.join("del_device"),
            name,
        })
    }
}

/// One ppsim network device.
#[derive(Debug)]
pub struct PpsimDev {
    name: String,
    dir: PathBuf,
    del: PathBuf,
}

impl PpsimDev {
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's ifindex.
    ///
    /// # Errors
    /// sysfs could not be read.
    pub fn ifindex(&self) -> Result<u32, PpsimError> {
        let p = PathBuf::from(format!("/sys/class/net/{}/ifindex", self.name));
        let s = read(&p)?;
        s.trim().parse().map_err(|_| PpsimError::Parse {
            path: p,
            what: format!("ifindex {s:?}"),
        })
    }

    /// `ip link set <dev> up|down`.
    ///
    /// # Errors
    /// `ip` failed.
    pub fn set_up(&self, up: bool) -> Result<(), PpsimError> {
        run(
            "ip",
            &["link", "set", &self.name, if up { "up" } else { "down" }],
        )
        .map(|_| ())
    }

    /// `ip link set <dev> name <new>` (the device must be down). Its
    /// debugfs directory keeps the name it was created with; deleting it
    /// goes by the new one.
    ///
    /// # Errors
    /// `ip` failed.
    pub fn rename(&mut self, new: &str) -> Result<(), PpsimError> {
        run("ip", &["link", "set", "dev", &self.name, "name", new])?;
        new.clone_into(&mut self.name);
        Ok(())
    }

    /// `ethtool -G <dev> rx <n>` (for scripts; tests use pptune's client).
    ///
    /// # Errors
    /// ethtool failed (its message is in the error).
    pub fn ethtool_set_rx_ring(&self, n: u32) -> Result<(), PpsimError> {
        run("ethtool", &["-G", &self.name, "rx", &n.to_string()]).map(|_| ())
    }

    /// The wire's steering rule: TCP segments to `port` go to RX queue
    /// `queue` (`steer`; port 0 removes it).
    ///
    /// # Errors
    /// The write failed.
    pub fn set_steer(&self, port: u16, queue: u32) -> Result<(), PpsimError> {
        write(&self.dir.join("steer"), &format!("{port} {queue}"))
    }

    /// `ethtool -L <dev> combined <n>`.
    ///
    /// # Errors
    /// ethtool failed.
    pub fn ethtool_set_channels(&self, n: u32) -> Result<(), PpsimError> {
        run("ethtool", &["-L", &self.name, "combined", &n.to_string()]).map(|_| ())
    }

    fn knob(&self, name: &str, v: u32) -> Result<(), PpsimError> {
        write(&self.dir.join(name), &v.to_string())
    }

    /// Write all knobs.
    ///
    /// # Errors
    /// A debugfs write failed.
    pub fn set_knobs(&self, k: &Knobs) -> Result<(), PpsimError> {
        self.knob("rate_pps", k.rate_pps)?;
        self.knob("burst_pages", k.burst_pages)?;
        self.knob("hold_us", k.hold_us)?;
        self.knob("slow_cost_us", k.slow_cost_us)?;
        self.knob("release_cost_us", k.release_cost_us)?;
        self.knob("contention_pct", k.contention_pct)?;
        self.knob("stack_ref_pct", k.stack_ref_pct)?;
        self.knob("line_pps", k.line_pps)?;
        self.knob("pace_scale", k.pace_scale)
    }

    /// `refuse_sets`: while on, the device refuses every ring and channel
    /// set (EBUSY, with an extack message on ring sets).
    ///
    /// # Errors
    /// The debugfs write failed.
    pub fn set_refuse_sets(&self, on: bool) -> Result<(), PpsimError> {
        self.knob("refuse_sets", u32::from(on))
    }

    /// How many sets the device refused because of `refuse_sets` (the
    /// kernel side's count of attempts).
    ///
    /// # Errors
    /// The debugfs read failed or did not parse.
    pub fn refused_sets(&self) -> Result<u32, PpsimError> {
        let p = self.dir.join("refused");
        let s = read(&p)?;
        s.trim().parse().map_err(|_| PpsimError::Parse {
            path: p,
            what: format!("{s:?}"),
        })
    }

    /// Read the knobs back.
    ///
    /// # Errors
    /// A debugfs read failed.
    pub fn knobs(&self) -> Result<Knobs, PpsimError> {
        let get = |n: &str| -> Result<u32, PpsimError> {
            let p = self.dir.join(n);
            let s = read(&p)?;
            s.trim().parse().map_err(|_| PpsimError::Parse {
                path: p,
                what: format!("{s:?}"),
            })
        };
        Ok(Knobs {
            rate_pps: get("rate_pps")?,
            burst_pages: get("burst_pages")?,
            hold_us: get("hold_us")?,
            slow_cost_us: get("slow_cost_us")?,
            release_cost_us: get("release_cost_us")?,
            contention_pct: get("contention_pct")?,
            stack_ref_pct: get("stack_ref_pct")?,
            line_pps: get("line_pps")?,
            pace_scale: get("pace_scale")?,
        })
    }

    /// Make the device behave like a driver family (only while it is down;
    /// the RX ring goes to the personality's default).
    ///
    /// # Errors
    /// The write failed (EBUSY while up).
    pub fn set_personality(&self, p: Personality) -> Result<(), PpsimError> {
        write(&self.dir.join("personality"), p.name())
    }

    /// The personality the device has now.
    ///
    /// # Errors
    /// The read failed.
    pub fn personality(&self) -> Result<String, PpsimError> {
        Ok(read(&self.dir.join("personality"))?.trim().to_owned())
    }

    /// Select a cost preset by name (sets slow_cost_us and release_cost_us).
    ///
    /// # Errors
    /// The write failed.
    pub fn set_preset(&self, p: CostPreset) -> Result<(), PpsimError> {
        write(&self.dir.join("cost_preset"), p.name())
    }

    /// Move the consumer kthreads to `cpu` (0 = the producers' CPU: a
    /// consumer that falls behind now and then, as on one vCPU).
    ///
    /// # Errors
    /// The write failed (offline CPU).
    pub fn set_consumer_cpu(&self, cpu: u32) -> Result<(), PpsimError> {
        write(&self.dir.join("consumer_cpu"), &cpu.to_string())
    }

    /// Start the traffic engine on every queue (resets the goodput window).
    ///
    /// # Errors
    /// The write failed.
    pub fn start(&self) -> Result<(), PpsimError> {
        write(&self.dir.join("running"), "1")
    }

    /// Stop traffic; the consumers then give back what they hold.
    ///
    /// # Errors
    /// The write failed.
    pub fn stop(&self) -> Result<(), PpsimError> {
        write(&self.dir.join("running"), "0")
    }

    /// Read the goodput file.
    ///
    /// # Errors
    /// Read or parse failure.
    pub fn goodput(&self) -> Result<Goodput, PpsimError> {
        let p = self.dir.join("goodput");
        let s = read(&p)?;
        parse_kv(&p, s.trim(), |g: &mut Goodput, k, n| {
            match k {
                "now_ns" => g.now_ns = n,
                "delivered" => g.delivered = n,
                "dropped" => g.dropped = n,
                "charged_ns" => g.charged_ns = n,
                "window_ns" => g.window_ns = n,
                "window_delivered" => g.window_delivered = n,
                "window_dropped" => g.window_dropped = n,
                "goodput_pps" => g.goodput_pps = n,
                "model_ns" => g.model_ns = n,
                "queues" => g.queues = n,
                "rate_pps" => g.rate_pps = n,
                "line_pps" => g.line_pps = n,
                "model_done_ns" => g.model_done_ns = n,
                "model_done_pk" => g.model_done_pk = n,
                _ => return false,
            }
            true
        })
    }

    /// Goodput over `d` of wall time: delivered pages per second.
    ///
    /// # Errors
    /// Read or parse failure.
    pub fn measure_goodput(&self, d: Duration) -> Result<(f64, Goodput, Goodput), PpsimError> {
        let a = self.goodput()?;
        sleep(d);
        let b = self.goodput()?;
        Ok((b.pps_since(&a), a, b))
    }

    /// Per-queue state (active queues only).
    ///
    /// # Errors
    /// Read or parse failure.
    pub fn queues(&self) -> Result<Vec<QueueState>, PpsimError> {
        let p = self.dir.join("queues");
        let s = read(&p)?;
        let mut out = Vec::new();
        for line in s.lines().filter(|l| !l.trim().is_empty()) {
            let mut bad = None;
            let q = parse_kv(&p, line, |q: &mut QueueState, k, n| {
                let r32 = |n| u32_of(&p, k, n);
                match k {
                    "queue" | "ring" | "pool_id" | "napi_id" | "pool_size" => match r32(n) {
                        Ok(v) => match k {
                            "queue" => q.queue = v,
                            "ring" => q.ring = v,
                            "pool_id" => q.pool_id = v,
                            "pool_size" => q.pool_size = v,
                            _ => q.napi_id = v,
                        },
                        Err(e) => bad = Some(e),
                    },
                    "held" => q.held = n,
                    "packets" => q.packets = n,
                    "bytes" => q.bytes = n,
                    "alloc_fail" => q.alloc_fail = n,
                    "drops_ring" => q.drops_ring = n,
                    "drops_backlog" => q.drops_backlog = n,
                    "returned" => q.returned = n,
                    "bursts" => q.bursts = n,
                    "slow_events" => q.slow_events = n,
                    "ring_full_pages" => q.ring_full_pages = n,
                    "charged_ns" => q.charged_ns = n,
                    "capped" => q.capped = n,
                    "posted" => q.posted = n,
                    "release_bulks" => q.release_bulks = n,
                    "model_ns" => q.model_ns = n,
                    "pace_behind_ns" => q.pace_behind_ns = n,
                    "overruns" => q.overruns = n,
                    "wire_filled" => q.wire_filled = n,
                    "mp_allocs" => q.mp_allocs = n,
                    "mp_alloc_ns" => q.mp_alloc_ns = n,
                    "mp_alloc_max_ns" => q.mp_alloc_max_ns = n,
                    _ => return false,
                }
                true
            })?;
            if let Some(e) = bad {
                return Err(e);
            }
            out.push(q);
        }
        Ok(out)
    }

    /// Delete the device (pools with pages still out become orphans).
    ///
    /// # Errors
    /// The write failed.
    pub fn delete(self) -> Result<(), PpsimError> {
        write(&self.del, &self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::Goodput;

    /// Two readings 1 s apart over which 2 queues went through 0.25 s of
    /// modelled time each and completed 100,000 pages.
    fn readings(rate_pps: u64, line_pps: u64) -> (Goodput, Goodput) {
        let g0 = Goodput {
            queues: 2,
            rate_pps,
            line_pps,
            ..Goodput::default()
        };
        let g1 = Goodput {
            now_ns: 1_000_000_000,
            model_done_ns: 500_000_000,
            model_done_pk: 100_000,
            ..g0
        };
        (g0, g1)
    }

    #[test]
    fn capacity_ignores_the_arrival_rate_and_goodput_does_not() {
        let (g0, g1) = readings(50_000, 0);
        // Goodput: bounded by the 1 s of wall time the arrivals took.
        assert!((g1.modelled_pps_since(&g0) - 100_000.0).abs() < 1e-6);
        // Capacity: 100,000 pages in 0.25 s of modelled time.
        assert!((g1.capacity_pps_since(&g0) - 400_000.0).abs() < 1e-6);
    }

    #[test]
    fn without_a_rate_capacity_is_the_goodput_and_both_keep_the_line_rate() {
        let (g0, g1) = readings(0, 0);
        assert_eq!(g1.capacity_pps_since(&g0), g1.modelled_pps_since(&g0));
        let (g0, g1) = readings(50_000, 200_000);
        assert!((g1.capacity_pps_since(&g0) - 200_000.0).abs() < 1e-6);
    }
}
