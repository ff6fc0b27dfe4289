//! The host profiles of the testbed (`tests/vm/run.sh --profile`), each
//! checked against the kernel: a priced slow path costs what the profile
//! says because the kernel does the work, not because ppsim charges it.
//!
//! - free: the allocator hands pages back as they were freed, and the
//!   pools map nothing (the check can fail: this is its negative);
//! - distro: every page the slow path takes was cleared (`init_on_alloc`);
//! - iommu-strict / iommu-lazy: every slow-path page has an IOVA, the
//!   kernel's IOMMU code maps each page the pools take from the allocator
//!   and unmaps each one they give back (the `iommu:map`/`iommu:unmap`
//!   tracepoints against the pools' own counters), and the device's IOMMU
//!   domain is the strict or the flush-queue kind;
//! - devmem: a dma-buf bound to a devmem device's RX queue runs the
//!   kernel's devmem memory provider: payload through it, intact, every
//!   token returned, the provider's pool gone after the unbind;
//! - every profile: `pptune status` prices a miss by what the host says
//!   (the device's IOMMU domain, or nothing known).
//!
//! `tests/vm/test.sh` boots 7.3 once per profile for this suite.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use netlink::netdev::PagePool;
use pptune_tests::ppsim::Ppsim;
use pptune_tests::vm::{PpsimKernels, Profile, profile, require_ppsim, tracefs};
use pptune_tests::wire::{DRAIN, RX_NS, TX_NS, Traffic, Wire, pools_in, stats_in, wait_pools};

const HOME: Duration = Duration::from_secs(15);

fn booted_profile(test: &str) -> (String, Profile) {
    let k = require_ppsim(test, PpsimKernels::Only73);
    let p = profile().unwrap_or_else(|| panic!("{test}: PPTUNE_VM_PROFILE is not set"));
    (k, p)
}

/// Counts one tracepoint's hits with a histogram trigger (no trace buffer
/// to overflow); removed on drop.
struct Hits {
    trigger: PathBuf,
    hist: PathBuf,
}

const HIST: &str = "hist:keys=common_pid:vals=hitcount";

impl Hits {
    fn on(event: &str) -> Self {
        let dir = tracefs().join("events").join(event);
        let trigger = dir.join("trigger");
        std::fs::write(&trigger, HIST).unwrap_or_else(|e| panic!("{}: {e}", trigger.display()));
        Self {
            trigger,
            hist: dir.join("hist"),
        }
    }

    /// Hits so far (the histogram's `Totals:` line).
    fn count(&self) -> u64 {
        let text = std::fs::read_to_string(&self.hist).expect("hist");
        text.lines()
            .find_map(|l| l.trim().strip_prefix("Hits:"))
            .map(|n| n.trim().parse().expect("a hit count"))
            .unwrap_or_else(|| panic!("no Totals in {}:\n{text}", self.hist.display()))
    }
}

impl Drop for Hits {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.trigger, format!("!{HIST}"));
    }
}

/// The IOMMU domain type of PCI function `dev` (`DMA`, `DMA-FQ`, ...).
fn domain_type(dev: &str) -> String {
    let p = format!("/sys/bus/pci/devices/{dev}/iommu_group/type");
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .trim()
        .to_owned()
}

#[test]
fn the_slow_path_does_the_work_the_profile_prices() {
    let (k, prof) = booted_profile("the_slow_path_does_the_work_the_profile_prices");
    let p = Ppsim::load().expect("ppsim loads");
    let dev = p.dma_device().expect("dma_device");
    let iommu = prof.iommu().then(|| {
        let dev = dev
            .clone()
            .unwrap_or_else(|| panic!("{k} {prof:?}: ppsim bound no PCI function"));
        let want = if prof == Profile::IommuStrict {
            "DMA"
        } else {
            "DMA-FQ"
        };
        assert_eq!(domain_type(&dev), want, "{dev}'s IOMMU domain");
        (Hits::on("iommu/map"), Hits::on("iommu/unmap"))
    });
    if prof.dma_device() {
        assert!(dev.is_some(), "{prof:?}: ppsim bound no PCI function");
    } else {
        assert_eq!(dev, None, "{prof:?}: no PCI function to map through");
    }
    let c = p.calibrate().expect("calibrate");
    println!(
        "{k} {}: slow {} put {} get {} release {} (ns per page; instructions under --icount); \
         {} of {} refills dirty, {} of {} mapped",
        prof.name(),
        c.slow_ns,
        c.put_ring_ns,
        c.get_ring_ns,
        c.release_ns,
        c.dirty_refills,
        c.checked_refills,
        c.mapped,
        c.slow_pages
    );
    assert!(c.slow_pages > 0 && c.checked_refills > 0, "{c:?}");
    if prof.zeroes() {
        assert_eq!(
            c.dirty_refills, 0,
            "{prof:?}: the allocator cleared every page: {c:?}"
        );
    } else {
        // The page allocator's per-CPU lists are LIFO: the pages freed
        // past the full ring come back to the next slow path as they were.
        assert!(
            c.dirty_refills > c.checked_refills / 4,
            "{prof:?}: freed pages come back uncleared: {c:?}"
        );
    }
    if let Some((map, unmap)) = iommu {
        assert_eq!(
            c.mapped, c.slow_pages,
            "every slow-path page has an IOVA: {c:?}"
        );
        // Each calibration round's pool takes its pages from the
        // allocator and, destroyed, gives every one back.
        assert_eq!(map.count(), c.slow_pages, "one iommu_map per page taken");
        assert_eq!(
            unmap.count(),
            c.slow_pages,
            "one iommu_unmap per page given back"
        );
    } else {
        assert_eq!(c.mapped, 0, "{prof:?}: the pools map nothing: {c:?}");
    }
}

/// What pptune says a miss costs follows the device's IOMMU domain
/// (docs/decisions.md §4 "The price of a miss"). With a PCI function
/// bound, a ppsim device is its child (`SET_NETDEV_DEV`, as a NIC is), so
/// rtnetlink names its parent and pptune reads that function's group:
/// `DMA` under iommu-strict, `DMA-FQ` under iommu-lazy, no group on the
/// devmem profile (no IOMMU); without one (distro) the device has no
/// parent: nothing known.
#[test]
fn status_prices_a_miss_by_the_parents_iommu_domain() {
    let (k, prof) = booted_profile("status_prices_a_miss_by_the_parents_iommu_domain");
    let p = Ppsim::load().expect("ppsim loads");
    let dev = p.new_device(1).expect("a ppsim device");
    let (class, iommu) = match prof {
        Profile::IommuStrict => ("iommu-strict", "strict"),
        Profile::IommuLazy => ("iommu-lazy", "lazy"),
        Profile::Devmem => ("page-allocator", "no-group"),
        _ => ("unknown", "unknown"),
    };
    let out = std::process::Command::new(pptune_tests::bin::pptune_bin())
        .args(["status", "--json", "--interface", dev.name()])
        .output()
        .expect("pptune status runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    let m = &v["interfaces"][0]["miss_cost"];
    println!("{k} {}: {} a miss: {m}", prof.name(), dev.name());
    assert_eq!(m["class"], class, "{m}");
    assert_eq!(m["iommu"], iommu, "{m}");
    let f = m["factor"].as_f64().expect("a factor");
    assert_eq!(f > 1.0, prof.iommu(), "{m}");
    dev.delete().expect("delete");
}

/// Pages the pools of netns `ns` have taken from the page allocator and
/// given back, as their counters tell: given back = freed past a full
/// ring + released while the stack held them + waived (wrong node);
/// taken = what they hold now + given back.
fn taken_and_given(ns: &str) -> (u64, u64) {
    let pools = pools_in(ns);
    let ids: BTreeSet<u64> = pools.iter().filter_map(|p| p.id).collect();
    let s = stats_in(ns, &ids);
    let given = s.recycle_ring_full + s.recycle_released_refcnt + s.alloc_waive;
    let held: u64 = pools.iter().filter_map(|p| p.inflight).sum();
    (held + given, given)
}

#[test]
fn wire_pages_are_mapped_and_unmapped_by_the_iommu() {
    let (k, prof) = booted_profile("wire_pages_are_mapped_and_unmapped_by_the_iommu");
    assert!(
        prof.iommu(),
        "{k}: this test runs under the iommu profiles (tests/vm/test.sh), not {prof:?}"
    );
    let p = Ppsim::load().expect("ppsim loads");
    let w = Wire::build(&p, 1, 256);
    w.wait_b_quiet(HOME).expect("B settles");
    let before = [TX_NS, RX_NS].map(taken_and_given);
    let (map, unmap) = (Hits::on("iommu/map"), Hits::on("iommu/unmap"));
    let mut args = DRAIN.to_vec();
    args.extend(["--duration-ms", "3000", "--port", "5401"]);
    let t = Traffic::run(&pptune_tests::pptraffic!(), &args);
    assert!(t.success, "pptraffic: {}", t.stderr);
    w.wait_b_quiet(HOME).expect("B settles after the traffic");
    let (maps, unmaps) = (map.count(), unmap.count());
    drop((map, unmap));
    let after = [TX_NS, RX_NS].map(taken_and_given);
    let taken: u64 = (0..2).map(|i| after[i].0 - before[i].0).sum();
    let given: u64 = (0..2).map(|i| after[i].1 - before[i].1).sum();
    println!(
        "{k} {}: the pools took {taken} pages and gave back {given}; \
         iommu_map {maps}, iommu_unmap {unmaps}",
        prof.name()
    );
    assert!(
        given > 1000,
        "the 256 ring overflowed under the drains: {given}"
    );
    assert_eq!(maps, taken, "one iommu_map per page a pool took");
    assert_eq!(unmaps, given, "one iommu_unmap per page a pool gave back");
    if let Err(pools) = w.teardown(HOME) {
        panic!("{k}: pools outlived their devices: {pools:#?}");
    }
}

/// The devmem profile: a udmabuf bound (`bind-rx`) to RX queue 1 of a
/// devmem device B with two queues, the test flow steered there, runs the
/// kernel's devmem memory provider. While pptraffic receives with
/// `MSG_SOCK_DEVMEM`, B has a pool on that queue carrying the binding
/// (`dmabuf`); every stream byte past its header came in the dma-buf (the
/// "NIC" wrote it into the net_iov's pages) and verifies, and every token
/// went back (`SO_DEVMEM_DONTNEED`). When the binding goes (pptraffic's
/// netlink socket closes) the queue restarts without the provider, and
/// its pool is gone at once: a pool whose net_iovs were still out would
/// stay listed, detached, with them in `inflight`.
#[test]
fn devmem_queue_delivers_through_the_provider() {
    const PORT: u16 = 5501;
    let (k, prof) = booted_profile("devmem_queue_delivers_through_the_provider");
    assert_eq!(
        prof,
        Profile::Devmem,
        "{k}: this test runs under the devmem profile (tests/vm/test.sh), not {prof:?}"
    );
    let p = Ppsim::load().expect("ppsim loads");
    let w = Wire::build_devmem(&p, 2, 256);
    w.wait_b_quiet(HOME).expect("B settles");
    w.b.set_steer(PORT, 1).expect("steer the flow to queue 1");
    let ifx = w.b_ifindex();
    let port = PORT.to_string();
    let args = [
        "--devmem",
        w.b.name(),
        "--devmem-queue",
        "1",
        "--verify",
        "--tcp",
        "2",
        "--duration-ms",
        "3000",
        "--port",
        &port,
    ];
    let child = Traffic::spawn(&pptune_tests::pptraffic!(), &args);
    let with_binding = |pp: &PagePool| pp.ifindex == Some(ifx) && pp.dmabuf.is_some();
    let (pools, _) = wait_pools(RX_NS, Duration::from_secs(3), |p| {
        p.iter().any(with_binding)
    });
    let provider = pools.into_iter().find(|pp| with_binding(pp));
    let t = Traffic::wait(child);
    assert!(t.success, "pptraffic: {}\n{:#?}", t.stderr, t.lines);
    t.assert_intact("devmem streams");
    let provider = provider.expect("B had a pool with the dma-buf while the streams ran");
    let id = t.summary()["dmabuf_id"].as_u64().expect("dmabuf_id");
    assert_eq!(provider.dmabuf.map(u64::from), Some(id), "{provider:?}");
    for f in t.flows() {
        let d = &f["devmem"];
        let n = |key: &str| d[key].as_u64().unwrap_or_else(|| panic!("{key} in {f}"));
        println!(
            "{k} devmem: flow {} {} bytes, {} from the dma-buf in {} frags, {} tokens back in {} calls",
            f["flow"],
            f["bytes"],
            n("dmabuf_bytes"),
            n("frags"),
            n("tokens_returned"),
            n("dontneed_calls")
        );
        assert!(n("dmabuf_bytes") + 4 >= n("frags"), "{f}");
        assert!(
            n("dmabuf_bytes") > 1 << 20,
            "the stream came through the provider: {f}"
        );
        assert_eq!(n("readable_bytes"), 0, "no byte missed the provider: {f}");
        assert_eq!(
            n("tokens_returned"),
            n("frags"),
            "every token returned: {f}"
        );
    }
    w.wait_b_quiet(HOME)
        .expect("B settles after the unbind: the provider's pools are gone");
    let left: Vec<_> = pools_in(RX_NS)
        .into_iter()
        .filter(|pp| pp.dmabuf.is_some())
        .collect();
    assert!(
        left.is_empty(),
        "pools of the binding outlived it: {left:#?}"
    );
    if let Err(pools) = w.teardown(HOME) {
        panic!("{k}: pools outlived their devices: {pools:#?}");
    }
}
