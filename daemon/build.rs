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
                // A loose ref is the branch's truth; a packed one lives in
                // packed-refs until a commit writes the loose file (watch
                // its directory for that). Naming a path that does not
                // exist would make Cargo rebuild the crate on every build.
                let loose = Path::new(&common).join(&r);
                let watched = if loose.exists() {
                    vec![loose]
                } else {
                    let dir = loose.parent().map(Path::to_path_buf);
                    dir.into_iter()
                        .chain([Path::new(&common).join("packed-refs")])
                        .collect()
                };
                for w in watched.iter().filter(|w| w.exists()) {
                    println!("cargo:rerun-if-changed={}", w.display());
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PPTUNE_GIT_REVISION={rev}");
}
