#!/usr/bin/env bash
# Tuning outcome on real traffic (issue 29 parts 2-3): static RX rings, the
# rules operators use, and pptune, on TCP over the ppsim wire, judged by
# the kernel's counters and the application (daemon/benches/wire_outcome.rs
# says what is measured and how).
#
#   benches/wire-outcome.sh            # the whole run -> benches/results/wire-outcome.*
#   benches/wire-outcome.sh --smoke    # checks the bench still runs (CI)
#   benches/wire-outcome.sh --remedy   # time to remedy at the shipped default
#   benches/wire-outcome.sh [--name NAME] -- DRIVER-OPTIONS...   # an ad-hoc run
#
# Host: builds the driver, the release pptune (one `cargo bench --no-run`,
# benches/lib.sh), pptraffic (debug, as tests/vm/wire-cost.sh measured it)
# and ppsim.ko (tests/ppsim/build.sh 7.3); boots ONE 7.3 VM under --icount
# (1 vCPU, 2048 MiB: ring 16384 posts 64 MiB and the pool ring may hold as
# much again) and runs the driver in it. pptune runs with
# benches/outcome-policy.yaml (see benches/results/wire-outcome.md for why
# it fits the wire unchanged). Results: NAME.jsonl (one line per
# measurement), NAME-run.json (VM time), NAME-tables.md (the tables and
# verdicts of benches/wire_report.py; benches/results/wire-outcome.md is the
# hand-written reading of one run). --smoke: one workload, 2 rings, 1 round,
# short windows, results under $CARGO_TARGET_DIR/bench-smoke.
# --remedy: pptune alone with benches/remedy-policy.yaml (the shipped
# default, enforcing) on the drain workload, --rounds 3 runs from ring 256,
# B's counters read every second: the time from the first second whose
# ring_full share is >= 20 % to pptune's first change (wire-remedy.*).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
SMOKE=0
REMEDY=0
NAME=wire-outcome
ADHOC=()
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1; shift ;;
        --remedy) REMEDY=1; shift ;;
        --name) NAME="$2"; shift 2 ;;
        --) shift; ADHOC=("$@"); break ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "wire-outcome: unknown option $1" >&2; exit 2 ;;
    esac
done
log() { printf '[wire-outcome] %s\n' "$*" >&2; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
cd "$REPO"

# The whole run: 2 workloads x 13 rings x 2 rounds, then 5 tuned runs each.
ARGS=(--workloads drain,steady --rounds 2 --warmup-secs 2 --window-secs 3
      --ctl-window-secs 3 --quiet-secs 9 --pptune-quiet-secs 30 --max-run-secs 90)
if [ "$SMOKE" = 1 ]; then
    NAME=wire-outcome-smoke
    ARGS=(--workloads drain --sweep 256,4096 --rounds 1 --warmup-secs 1 --window-secs 2
          --tuners doubling,pptune --quiet-secs 3 --pptune-quiet-secs 8 --max-run-secs 12)
fi
POLICY=benches/outcome-policy.yaml
if [ "$REMEDY" = 1 ]; then
    NAME=wire-remedy
    POLICY=benches/remedy-policy.yaml
    # No static sweep (0 rounds of it): pptune alone, three runs, each
    # until 150 s (the shipped windows' path would change at ~90-100 s).
    ARGS=(--workloads drain --rounds 0 --tuners pptune,pptune,pptune --ctl-window-secs 1
          --window-secs 3 --pptune-quiet-secs 1000 --max-run-secs 150)
fi
ARGS+=("${ADHOC[@]}")

log "building the driver, release pptune, pptraffic, ppsim.ko"
. "$REPO/benches/lib.sh"
bench_build
EXE="$(bench_exe wire_outcome bench)"
PPTUNE="$(bench_exe pptune bin)"
cargo build -p pptune-tests --bin pptraffic --message-format=json-render-diagnostics \
    > "$CARGO_TARGET_DIR/pptraffic-build.json"
PT="$(python3 -c 'import json,sys
print([m["executable"] for m in map(json.loads, open(sys.argv[1]))
       if m.get("reason") == "compiler-artifact" and m.get("executable")
       and m["target"]["name"] == "pptraffic"][-1])' "$CARGO_TARGET_DIR/pptraffic-build.json")"
KO="$(tests/ppsim/build.sh 7.3)"
export PPTUNE_PPSIM_KO="$KO"
"$PPTUNE" --config "$POLICY" check >&2

VMOUT="$CARGO_TARGET_DIR/wire-outcome-vm"
rm -rf "$VMOUT"; mkdir -p "$VMOUT"
# Content-named copies: 9p may serve a rebuilt binary's stale pages.
cp "$PT" "$VMOUT/pptraffic-$(sha256sum "$PT" | cut -c1-12)"
PT="$(ls "$VMOUT"/pptraffic-*)"
{
    printf 's=$(date +%%s); %q' "$EXE"
    printf ' %q' --pptraffic "$PT" --pptune "$PPTUNE" --policy "$REPO/$POLICY" "${ARGS[@]}"
    printf ' > %q; r=$?\n' "$VMOUT/$NAME.jsonl"
    printf 'echo "$(( $(date +%%s) - s )) $r" > %q; exit $r\n' "$VMOUT/vm.times"
} > "$VMOUT/job.sh"
START=$(date +%s)
log "running in the VM (icount): $NAME"
vmrc=0
tests/vm/run.sh --kernel 7.3 --icount --mem 2048 --timeout 4800 --out "$VMOUT" -- bash "$VMOUT/job.sh" || vmrc=$?
TOTAL=$(( $(date +%s) - START ))
RES="$REPO/benches/results"
[ "$SMOKE" = 1 ] && RES="$CARGO_TARGET_DIR/bench-smoke"
mkdir -p "$RES"
[ -f "$VMOUT/$NAME.jsonl" ] && cp "$VMOUT/$NAME.jsonl" "$RES/$NAME.jsonl"
read -r VM_S VM_RC < "$VMOUT/vm.times" || { VM_S=-1; VM_RC=-1; }
GIT="$(git rev-parse --short HEAD)"
printf '{"git": "%s", "driver_virtual_s": %s, "driver_exit": %s, "host_total_s": %s}\n' \
    "$GIT" "$VM_S" "$VM_RC" "$TOTAL" > "$RES/$NAME-run.json"
log "VM: $VM_S s of guest (virtual) time, exit $VM_RC; host: $TOTAL s in all"
rc=$vmrc
if [ -f "$RES/$NAME.jsonl" ]; then
    python3 "$REPO/benches/wire_report.py" "$RES/$NAME.jsonl" "$RES/$NAME-run.json" > "$RES/$NAME-tables.md" || rc=1
    cat "$RES/$NAME-tables.md"
else
    rc=1
fi
exit $rc
