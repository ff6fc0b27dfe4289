#!/usr/bin/env bash
# Tuning outcome: pptune in enforce mode against static rings, on ppsim.
#
#   benches/outcome.sh [--smoke] [--preset zonelock|devmem|off]
#                      [--workloads a,b,...] [--enforce-secs S] [--static-secs S]
#                      [--sweep R,R,...] [--rounds N] [--name NAME]
#                      [--naive-secs S]
#
# Host: builds the outcome driver (daemon/benches/outcome.rs), the release
# pptune and ppsim.ko (tests/ppsim/build.sh 7.3), then runs the driver in
# the 7.3 test VM (tests/vm/run.sh, 1 vCPU as the test suites, memory sized for the largest
# ring swept: 16384 pages x 4 KiB x 2 queues = 128 MiB of pool rings plus
# up to 32768 held pages per queue, well inside 2048 MiB).
# The enforce runs use benches/outcome-policy.yaml (shipped thresholds,
# timing compressed ~10x: see the file); the queue workloads (queues-*:
# a (ring, queues) sweep, runs from 16 queues) use
# benches/outcome-policy-channels.yaml, the same with channel changes on.
# Per workload: the static sweep (--rounds interleaved rounds), the naive
# tuner (+25 % per window while ring_full >= 5 %) and pptune, each from 256.
# Results: benches/results/NAME.json (default outcome-PRESET), its
# convergence plot NAME-convergence.svg and .png (the PNG needs python3's
# cairosvg: python3 -m pip install cairosvg), and Markdown tables on stdout:
# the rows per workload and the targets judged on ppsim's modelled goodput
# (report.py).
# --smoke: one workload, a 2-point sweep, one round, short windows; results
# under $CARGO_TARGET_DIR/bench-smoke.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
SMOKE=0
PRESET=zonelock
WORKLOADS=""
ENFORCE=60
STATIC=2
ROUNDS=2
SWEEP="256,512,1024,2048,4096,8192,16384"
NAME=""
NAIVE=""
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1; shift ;;
        --preset) PRESET="$2"; shift 2 ;;
        --workloads) WORKLOADS="$2"; shift 2 ;;
        --enforce-secs) ENFORCE="$2"; shift 2 ;;
        --static-secs) STATIC="$2"; shift 2 ;;
        --sweep) SWEEP="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --name) NAME="$2"; shift 2 ;;
        --naive-secs) NAIVE="$2"; shift 2 ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "outcome: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$SMOKE" = 1 ]; then
    WORKLOADS="${WORKLOADS:-bursty-1500}"; ENFORCE=20; STATIC=2; SWEEP="256,4096"; ROUNDS=1
fi
log() { printf '[outcome] %s\n' "$*" >&2; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
cd "$REPO"

log "building the outcome driver, release pptune, ppsim.ko"
. "$REPO/benches/lib.sh"
bench_build
EXE="$(bench_exe outcome bench)"
PPTUNE="$(bench_exe pptune bin)"
KO="$(tests/ppsim/build.sh 7.3)"
export PPTUNE_PPSIM_KO="$KO"
for pol in benches/outcome-policy.yaml benches/outcome-policy-channels.yaml; do
    "$PPTUNE" --config "$pol" check >&2
done

VMOUT="$CARGO_TARGET_DIR/outcome-vm"
rm -rf "$VMOUT"; mkdir -p "$VMOUT"
args=(--pptune "$PPTUNE" --policy "$REPO/benches/outcome-policy.yaml"
      --channels-policy "$REPO/benches/outcome-policy-channels.yaml"
      --preset "$PRESET" --static-secs "$STATIC" --enforce-secs "$ENFORCE" --sweep "$SWEEP"
      --rounds "$ROUNDS")
[ -n "$WORKLOADS" ] && args+=(--workloads "$WORKLOADS")
[ -n "$NAIVE" ] && args+=(--naive-secs "$NAIVE")
START=$(date +%s)
log "running in the VM: preset=$PRESET sweep=$SWEEP x$ROUNDS static=${STATIC}s enforce=${ENFORCE}s"
tests/vm/run.sh --kernel 7.3 --mem 2048 --timeout 3500 --out "$VMOUT" -- \
    bash -c "\"\$0\" \"\$@\" > $VMOUT/outcome.jsonl" "$EXE" "${args[@]}"
log "VM part took $(( $(date +%s) - START )) s"
RES="$REPO/benches/results"
[ "$SMOKE" = 1 ] && RES="$CARGO_TARGET_DIR/bench-smoke"
mkdir -p "$RES"
cp "$VMOUT/outcome.jsonl" "$RES/${NAME:-outcome-$PRESET}.jsonl"
python3 "$REPO/benches/report.py" outcome "$VMOUT/outcome.jsonl" "$RES" "${NAME:-outcome-$PRESET}" "$REPO/benches/outcome-policy.yaml"
