//! The embedded default policy as compact JSON (`$OUT_DIR/default.json`):
//! what a load with no policy file deserializes (`DEFAULT_POLICY_JSON`).
//! Parsing the commented YAML was most of such a load, and every
//! `pptune status`, `plan` and `check` on a host without a policy file
//! makes one (2.7 M of the 3.8 M instructions `status` ran on a host
//! without pools). `src/default.yaml` stays the one source: this is its
//! value, not a second copy, and a test checks that the spanned path (the
//! one every policy file takes) makes the same policy of it.
#![allow(clippy::expect_used)] // a build script fails the build by panicking, with the message

fn main() {
    println!("cargo::rerun-if-changed=src/default.yaml");
    let yaml = std::fs::read_to_string("src/default.yaml").expect("src/default.yaml");
    let value: serde_json::Value =
        serde_saphyr::from_str(&yaml).expect("the embedded default policy parses");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("default.json"), value.to_string()).expect("default.json written");
}
