#!/usr/bin/env bash
# Tuning outcome: pptune in enforce mode against static rings, on ppsim.
#
#   benches/outcome.sh [--smoke] [--preset zonelock|devmem|off]
#                      [--workloads a,b,...] [--enforce-secs S] [--static-secs S]
#                      [--sweep R,R,...] [--name NAME]
#
# Host: builds the outcome driver (daemon/benches/outcome.rs), the release
# pptune and ppsim.ko (tests/ppsim/build.sh 7.3), then runs the driver in
# the 7.3 test VM (tests/vm/run.sh, 1 vCPU as the test suites, memory sized for the largest
# ring swept: 16384 pages x 4 KiB x 2 queues = 128 MiB of pool rings plus
# up to 32768 held pages per queue, well inside 2048 MiB).
# The enforce runs use benches/outcome-policy.yaml (shipped thresholds,
# timing compressed ~10x: see the file).
# Results: benches/results/NAME.json (default outcome-PRESET), its
# convergence plot NAME-convergence.svg, and Markdown tables on stdout: the
# measurements and issue 7's targets judged per workload (report.py).
# --smoke: one workload, a 2-point sweep, short windows; results under
# $CARGO_TARGET_DIR/bench-smoke.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
SMOKE=0
PRESET=zonelock
WORKLOADS=""
ENFORCE=100
STATIC=8
SWEEP="256,1024,2048,4096,16384"
NAME=""
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1; shift ;;
        --preset) PRESET="$2"; shift 2 ;;
        --workloads) WORKLOADS="$2"; shift 2 ;;
        --enforce-secs) ENFORCE="$2"; shift 2 ;;
        --static-secs) STATIC="$2"; shift 2 ;;
        --sweep) SWEEP="$2"; shift 2 ;;
        --name) NAME="$2"; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "outcome: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$SMOKE" = 1 ]; then
    WORKLOADS="${WORKLOADS:-bursty-2k}"; ENFORCE=20; STATIC=2; SWEEP="256,4096"
fi
log() { printf '[outcome] %s\n' "$*" >&2; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
cd "$REPO"

log "building the outcome driver, release pptune, ppsim.ko"
# One cargo invocation for every bench target (as in observe-cost.sh):
# building a subset of packages unifies features differently and rebuilds.
BENCH_PKGS=(-p pptune-netlink -p pptune-policy -p pptune)
cargo bench "${BENCH_PKGS[@]}" --no-run >&2
cargo build --release -p pptune --bin pptune >&2
EXE=$(cargo bench "${BENCH_PKGS[@]}" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "outcome":
        print(m["executable"])' | tail -1)
KO="$(tests/ppsim/build.sh 7.3)"
export PPTUNE_PPSIM_KO="$KO"
"$CARGO_TARGET_DIR/release/pptune" --config benches/outcome-policy.yaml check >&2

VMOUT="$CARGO_TARGET_DIR/outcome-vm"
rm -rf "$VMOUT"; mkdir -p "$VMOUT"
args=(--pptune "$CARGO_TARGET_DIR/release/pptune" --policy "$REPO/benches/outcome-policy.yaml"
      --preset "$PRESET" --static-secs "$STATIC" --enforce-secs "$ENFORCE" --sweep "$SWEEP")
[ -n "$WORKLOADS" ] && args+=(--workloads "$WORKLOADS")
START=$(date +%s)
log "running in the VM: preset=$PRESET sweep=$SWEEP static=${STATIC}s enforce=${ENFORCE}s"
tests/vm/run.sh --kernel 7.3 --mem 2048 --timeout 3500 --out "$VMOUT" -- \
    bash -c "\"\$0\" \"\$@\" > $VMOUT/outcome.jsonl" "$EXE" "${args[@]}"
log "VM part took $(( $(date +%s) - START )) s"
RES="$REPO/benches/results"
[ "$SMOKE" = 1 ] && RES="$CARGO_TARGET_DIR/bench-smoke"
cp "$VMOUT/outcome.jsonl" "$RES/${NAME:-outcome-$PRESET}.jsonl"
python3 "$REPO/benches/report.py" outcome "$VMOUT/outcome.jsonl" "$RES" "${NAME:-outcome-$PRESET}" "$REPO/benches/outcome-policy.yaml"
