#!/usr/bin/env bash
# Rerun every pptune benchmark; results as JSON under benches/results/.
#
#   benches/run-all.sh            # everything (~1 h with warm caches)
#   benches/run-all.sh --smoke    # only checks the benches still run (CI)
#   benches/run-all.sh --only micro|observe|outcome|wire
#
# 1. cost of observing, in the VM -> benches/results/observe-cost.json/.svg
#    (and vm-snapshot-2048.json, the render micro-bench's recorded input);
#    --smoke also runs the A/B tool (benches/observe-ab.sh) on one build
#    against itself
# 2. host criterion micro-benchmarks (decode, decide, /metrics render)
#    -> benches/results/micro.json (+ micro-render.log: the render CPU-time line)
# 3. tuning outcome, in the VM   -> benches/results/outcome-{zonelock,devmem,queues,settle}.json
#    (+ outcome-run.json: each part's VM time; under an hour)
# 4. tuning outcome on real traffic (the ppsim wire, --icount)
#    -> benches/results/wire-outcome.{jsonl,md} (+ wire-outcome-run.json)
# The VM parts need root, qemu and the cached test kernel (tests/vm/kernel.sh
# builds it on first use). --smoke writes under $CARGO_TARGET_DIR/bench-smoke
# and leaves benches/results alone.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
SMOKE=0
ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1; shift ;;
        --only) ONLY="$2"; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run-all: unknown option $1" >&2; exit 2 ;;
    esac
done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
cd "$REPO"
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }
RES="$REPO/benches/results"
[ "$SMOKE" = 1 ] && RES="$CARGO_TARGET_DIR/bench-smoke"
mkdir -p "$RES"
failed=()

. "$REPO/benches/lib.sh"
smoke=()
[ "$SMOKE" = 1 ] && smoke=(--smoke)
if want observe; then
    echo "== cost of observing (VM)"
    benches/observe-cost.sh "${smoke[@]}" || failed+=(observe)
    if [ "$SMOKE" = 1 ]; then
        # The A/B tool on one build against itself: proves it runs, and
        # that the instruction-counted VM repeats a pass within 0.5 %.
        benches/observe-ab.sh --pools 128 --rounds 2 --expect-same 0.5 \
            --results "$RES/observe-ab" "$CARGO_TARGET_DIR/bench-bin" "$CARGO_TARGET_DIR/bench-bin" ||
            failed+=(observe-ab)
    fi
fi
if want micro; then
    echo "== micro-benchmarks (criterion)"
    rm -rf "$CARGO_TARGET_DIR/criterion"
    load="$(cut -d' ' -f1-3 /proc/loadavg)"
    if [ "$SMOKE" = 1 ]; then
        # --test runs each benchmark once: proves they build and their own
        # sanity checks hold, measures nothing.
        cargo bench "${BENCH_PKGS[@]}" --bench decode --bench decide --bench render -- --test ||
            failed+=(micro)
        cargo bench "${BENCH_PKGS[@]}" --bench observe_replay -- --devices 2 --queues 8 --passes 2 ||
            failed+=(replay)
    else
        # The observe pass on recorded-shape bytes (host): 2048 and 10,000 pools.
        for shape in "16 128" "100 100"; do
            set -- $shape
            cargo bench "${BENCH_PKGS[@]}" --bench observe_replay -- --devices "$1" --queues "$2" \
                --passes 20 | tee -a "$RES/observe-replay.jsonl" || failed+=(replay)
        done
        if cargo bench "${BENCH_PKGS[@]}" --bench decode --bench decide --bench render -- --quick |
            tee "$RES/micro-render.log"; then
            python3 benches/report.py micro "$CARGO_TARGET_DIR/criterion" "$RES" "$load"
        else
            failed+=(micro)
        fi
    fi
fi

if want outcome; then
    echo "== tuning outcome (VM)"
    if [ "$SMOKE" = 1 ]; then
        benches/outcome.sh --smoke || failed+=(outcome)
    else
        # The whole §3.0 run in one VM boot: zonelock and devmem on the
        # non-power-of-two bursts, steady, idle, the rate-limited and the
        # held-pages workloads; the queue-count case; the settle run ("0
        # changes in 10 minutes after convergence"). Prints each part's VM
        # time and the total (benches/results/outcome-model.md §3.0).
        benches/outcome.sh || failed+=(outcome)
    fi
fi

if want wire; then
    echo "== tuning outcome on the wire (VM, icount)"
    # Static rings, max-once, doubling, one-shot, naive and pptune on TCP
    # over the ppsim wire (BENCHMARKS §3).
    benches/wire-outcome.sh "${smoke[@]}" || failed+=(wire)
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "run-all: FAILED: ${failed[*]}"
    exit 1
fi
echo "run-all: all benchmarks ran (results in $RES)"
