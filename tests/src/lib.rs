//! Test harness: the `pptune` binary (`bin`), the loop on the fake kernel
//! (`daemon`), the fake kernel (`fake`), the VM runner (`vm`), the daemon
//! as a process in the VM (`vm_daemon`), the ppsim driver (`ppsim`), a
//! device's pools and rings over netlink (`pools`), an HTTP GET for the
//! metrics endpoint (`http`), the samples of what it serves (`exposition`)
//! and two ppsim devices joined as a wire across two network namespaces
//! (`wire`; its traffic program is `src/bin/pptraffic/`). And
//! [`repo_root`], where every test finds the repository's files.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

pub mod bin;
pub mod daemon;
pub mod exposition;
pub mod fake;
pub mod http;
pub mod pools;
pub mod ppsim;
pub mod vm;
pub mod vm_daemon;
pub mod wire;

/// The repository root (this crate lives in `<root>/tests`).
#[must_use]
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
