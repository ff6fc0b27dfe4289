//! Records the git revision for `pptune --version`: `PPTUNE_GIT_REVISION`
//! from the environment when set (a build from a source tarball or a
//! distribution's build farm), otherwise `git rev-parse` of the checkout,
//! otherwise `unknown`.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    Some(s.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PPTUNE_GIT_REVISION");
    let rev = std::env::var("PPTUNE_GIT_REVISION")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            // Rebuild when HEAD moves: HEAD itself (a detached checkout or a
            // branch switch) and the branch ref it points at.
            if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
                println!("cargo:rerun-if-changed={dir}/HEAD");
            }
            if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
                && let Some(common) = git(&["rev-parse", "--git-common-dir"])
            {
                let p = Path::new(&common).join(&r);
                if p.exists() {
                    println!("cargo:rerun-if-changed={}", p.display());
                }
                println!("cargo:rerun-if-changed={common}/packed-refs");
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PPTUNE_GIT_REVISION={rev}");
}
