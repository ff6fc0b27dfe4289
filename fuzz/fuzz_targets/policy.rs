//! The policy loader: YAML text → schema check → drop-in merge over the
//! embedded default → validated policy, with every error rendered. The
//! input is split into up to three documents at "\n#---\n" lines
//! (policy.yaml, then drop-ins), as `--config DIR` merges them.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let docs: Vec<(String, String)> = text
        .splitn(3, "\n#---\n")
        .enumerate()
        .map(|(i, t)| (format!("doc{i}.yaml"), t.to_owned()))
        .collect();
    if let Err(e) = config::parse_docs(&docs) {
        let _ = config::render(&e);
    }
});
