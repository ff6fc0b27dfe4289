//! The VM runner itself (`tests/vm/run.sh` through [`super::Vm`]),
//! exercised from the host: exit status and environment reach the caller,
//! and a timeout stops the VM with no qemu left behind.
//!
//! Runs on the host only (there is no VM inside the VM) and boots the 7.3
//! test kernel that `tests/vm/kernel.sh 7.3` names (`tests/run-all.sh` sets
//! it up first): the tests are `#[ignore]`d for a plain `cargo test`; run
//! with `--include-ignored` they set the kernel up if it is missing, and
//! fail if that fails.

// Helpers outside #[test] fns fail the test the same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::Duration;

use super::{Vm, VmError, in_vm};

/// The directory of the current 7.3 test kernel, as `tests/vm/kernel.sh`
/// names it (the key of today's recipe; on a cache hit it only looks it up,
/// otherwise it sets the kernel up). Not a scan of the cache: a machine
/// that ran older recipes holds several `7.3-*` directories, and any of
/// them could be picked.
fn test_kernel(test: &str) -> PathBuf {
    assert!(!in_vm(), "{test} runs on the host (it boots VMs itself)");
    let script = crate::repo_root().join("tests/vm/kernel.sh");
    let out = std::process::Command::new(&script)
        .arg("7.3")
        .output()
        .unwrap_or_else(|e| panic!("{test}: running {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{test}: {} 7.3 failed ({}): {}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        dir.join("bzImage").is_file(),
        "{test}: kernel.sh named {} but it holds no bzImage",
        dir.display()
    );
    dir
}

#[test]
#[ignore = "boots the test VM: needs the 7.3 test kernel (tests/vm/kernel.sh 7.3)"]
fn exit_status_and_environment_come_back() {
    let k = test_kernel("exit_status_and_environment_come_back");
    let out = Vm::new(&k.to_string_lossy())
        .timeout(Duration::from_secs(120))
        .env("PPTUNE_RUNNER_PROBE", "x y")
        .output(&[
            "sh",
            "-c",
            "echo \"in=$PPTUNE_IN_VM kernel=$PPTUNE_KERNEL probe=$PPTUNE_RUNNER_PROBE cwd=$PWD\"; \
             test -w \"$PPTUNE_VM_OUT\" && echo out-writable; exit 7",
        ])
        .expect("the VM runs");
    assert_eq!(out.status, 7, "the command's status: {}", out.stdout);
    let cwd = std::env::current_dir().expect("cwd");
    assert!(
        out.stdout
            .contains(&format!("in=1 kernel=7.3 probe=x y cwd={}", cwd.display())),
        "environment and cwd inside: {}",
        out.stdout
    );
    assert!(out.stdout.contains("out-writable"), "{}", out.stdout);
}

#[test]
#[ignore = "boots the test VM: needs the 7.3 test kernel (tests/vm/kernel.sh 7.3)"]
fn timeout_stops_the_vm_and_leaves_no_qemu() {
    let k = test_kernel("timeout_stops_the_vm_and_leaves_no_qemu");
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Vm::new(&k.to_string_lossy())
        .timeout(Duration::from_secs(20))
        .out_dir(dir.path())
        .run(&["sleep", "600"])
        .expect_err("a hung command times out");
    assert!(matches!(err, VmError::Timeout(_)), "{err}");
    // No qemu still running with our share on its command line.
    let marker = dir.path().to_string_lossy().into_owned();
    let leftovers: Vec<_> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("qemu-system") && c.contains(&marker))
        .collect();
    assert!(
        leftovers.is_empty(),
        "qemu outlived the runner: {leftovers:?}"
    );
}

#[test]
#[ignore = "boots the test VM: needs the 7.3 test kernel (tests/vm/kernel.sh 7.3)"]
fn a_checkout_under_tmp_and_a_target_dir_under_var_tmp_are_visible_in_the_vm() {
    let k =
        test_kernel("a_checkout_under_tmp_and_a_target_dir_under_var_tmp_are_visible_in_the_vm");
    // A "checkout" under /tmp (the runner scripts and a file), a target
    // directory under /var/tmp: the guest mounts fresh tmpfs over both.
    let checkout = tempfile::Builder::new()
        .prefix("pptune-checkout.")
        .tempdir_in("/tmp")
        .expect("tempdir in /tmp");
    let target = tempfile::Builder::new()
        .prefix("pptune-target.")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp");
    let vm_dir = checkout.path().join("tests/vm");
    std::fs::create_dir_all(&vm_dir).unwrap();
    let repo = crate::repo_root();
    for f in ["run.sh", "init.sh", "lib.sh", "kernel.sh"] {
        std::fs::copy(repo.join("tests/vm").join(f), vm_dir.join(f)).unwrap();
    }
    std::fs::write(checkout.path().join("marker"), "from-the-checkout\n").unwrap();
    std::fs::write(target.path().join("marker"), "from-the-target-dir\n").unwrap();
    let out = std::process::Command::new(vm_dir.join("run.sh"))
        .args(["--kernel", &k.to_string_lossy(), "--timeout", "120", "--"])
        .args([
            "sh",
            "-c",
            "cat marker \"$CARGO_TARGET_DIR/marker\"; echo \"cwd=$PWD\"",
        ])
        .current_dir(checkout.path())
        .env("CARGO_TARGET_DIR", target.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("from-the-checkout"), "{stdout}");
    assert!(stdout.contains("from-the-target-dir"), "{stdout}");
    assert!(
        stdout.contains(&format!("cwd={}", checkout.path().display())),
        "{stdout}"
    );

    // A path the kernel command line cannot carry is refused before boot,
    // saying which path and why.
    let odd = checkout.path().join("with space");
    std::fs::create_dir(&odd).unwrap();
    let t0 = tokio::time::Instant::now();
    let out = std::process::Command::new(vm_dir.join("run.sh"))
        .args(["--kernel", &k.to_string_lossy(), "--", "true"])
        .current_dir(&odd)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(
        stderr.contains(&format!(
            "{} is under a directory the VM replaces with tmpfs",
            odd.display()
        )),
        "{stderr}"
    );
}
