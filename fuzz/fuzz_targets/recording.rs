//! A recording segment as `pptune replay FILE` reads it: frames (length,
//! CRC-32), raw deflate, the CBOR record, the columnar snapshot block and
//! its layout, then replay's engine over every pass read. The input is the
//! segment after its 12-byte header (magic and format version), which the
//! target writes itself, so every input reaches the frame reader. Run with
//! a low RSS limit (fuzz/run.sh: 512 MB): every size a segment states is
//! bounded before it is allocated (daemon/record/src/file.rs, coder.rs).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

fn policy() -> &'static policy::Policy {
    static P: OnceLock<policy::Policy> = OnceLock::new();
    P.get_or_init(|| {
        config::parse_str("default", config::DEFAULT_POLICY_YAML).expect("the embedded default")
    })
}

fn segment() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = std::env::var_os("FUZZ_SCRATCH").map_or_else(
            || PathBuf::from("/dev/shm"),
            PathBuf::from,
        );
        dir.join(format!("pptune-fuzz-{}.pptrec", std::process::id()))
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut bytes = Vec::with_capacity(12 + data.len());
    bytes.extend_from_slice(b"PPTUNREC");
    bytes.extend_from_slice(&record::format::FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(segment(), &bytes).expect("scratch file");
    if let Ok(report) = record::replay::replay(segment(), policy()) {
        let _ = serde_json::to_string(&report);
    }
});
