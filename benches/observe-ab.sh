#!/usr/bin/env bash
# A/B of two builds of the observe pass, in the instruction-counted VM.
#
#   benches/observe-ab.sh [--pools N] [--rounds R] [--passes P]
#                         [--expect-same PCT] [--results DIR] A_DIR B_DIR
#   benches/observe-ab.sh --status [--pools N] [--rounds R] [--results DIR] A_DIR B_DIR
#
# A_DIR and B_DIR each hold an `observe_pass` bench binary (as staged in
# $CARGO_TARGET_DIR/bench-bin by benches/observe-cost.sh; build the other
# side from a git worktree of the commit to compare). B_DIR also gives the
# raw floor (`raw_floor`). One 7.3 VM boot with `tests/vm/run.sh --icount`
# (the guest clock counts instructions, BENCHMARKS.md §2.1), netdevsim
# devices with 128 queues each up to N pools (default 2048), then R rounds
# (default 3) of A, B and the floor, the order rotated each round, P passes
# each (default: benches/lib.sh bench_passes). Prints, per round and as the median
# (min-max) over rounds: B/A, A/floor and B/floor; writes ab.json and the
# raw ab.jsonl to DIR (default $CARGO_TARGET_DIR/observe-ab).
# --expect-same PCT: exit 1 unless B/A is within PCT % of 1 in every round
# (A and B the same binary: the VM's determinism, checked by the CI smoke).
# --status: the same for `pptune status --json` as a whole process (A_DIR
# and B_DIR each hold a `pptune`): R rounds of 5 runs of each side
# (benches/proc_cost.py, the order flipped each round), each beside 5 runs
# of `pptune --version`, the process alone (start-up and exit: what a
# larger binary costs before any work), then where the time
# goes: a `perf record -e cpu-clock` profile of 20 runs of each side,
# kernel and user symbols (perf-A.txt, perf-B.txt in DIR; under -icount a
# sample is a count of guest instructions, the kernel's page faults and
# the dynamic loader included).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
POOLS=2048
ROUNDS=3
PASSES=""
SAME=""
RESULTS=""
IN_VM=0
STATUS=0
while [ $# -gt 0 ]; do
    case "$1" in
        --pools) POOLS="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --passes) PASSES="$2"; shift 2 ;;
        --expect-same) SAME="$2"; shift 2 ;;
        --results) RESULTS="$2"; shift 2 ;;
        --in-vm) IN_VM=1; shift ;;
        --status) STATUS=1; shift ;;
        -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "observe-ab: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# = 2 ] || { echo "observe-ab: want A_DIR and B_DIR (see --help)" >&2; exit 2; }
for d in "$1" "$2"; do
    [ -d "$d" ] || { echo "observe-ab: no directory $d" >&2; exit 2; }
done
A="$(cd "$1" && pwd)"
B="$(cd "$2" && pwd)"
if [ "$STATUS" = 1 ]; then want=("$A/pptune" "$B/pptune")
else want=("$A/observe_pass" "$B/observe_pass" "$B/raw_floor"); fi
for f in "${want[@]}"; do
    [ -x "$f" ] || { echo "observe-ab: no executable $f" >&2; exit 2; }
done
[[ "$POOLS" =~ ^[0-9]+$ && "$ROUNDS" =~ ^[0-9]+$ ]] || { echo "observe-ab: --pools and --rounds take whole numbers" >&2; exit 2; }
log() { printf '[observe-ab] %s\n' "$*" >&2; }
. "$REPO/benches/lib.sh"
[ -n "$PASSES" ] || PASSES=$(bench_passes "$POOLS")

# ---------------------------------------------------------------- in the VM
if [ "$IN_VM" = 1 ]; then
    OUT="$PPTUNE_VM_OUT/ab.jsonl"
    : > "$OUT"
    nsim_up_to "$POOLS"
    if [ "$STATUS" = 1 ]; then
        log "kernel $(uname -r), clock $PPTUNE_VM_CLOCK, $NSIM_POOLS pools: $ROUNDS rounds of \`status --json\`"
        cost() { # label pptune-args...: 5 runs of side $s's pptune in round $r
            local label=$1; shift
            python3 "$REPO/benches/proc_cost.py" --label "$label" --pools "$NSIM_POOLS" \
                --runs 5 -- "$d/pptune" "$@" \
                | sed "s/^{/{\"round\":$r,\"side\":\"$s\",/" | tee -a "$OUT"
        }
        for r in $(seq "$ROUNDS"); do
            if [ $((r % 2)) = 1 ]; then sides=(A B); else sides=(B A); fi
            for s in "${sides[@]}"; do
                d=$A; [ "$s" = B ] && d=$B
                # The process alone (start-up, argument parsing, exit),
                # then the command.
                cost pptune-start --version
                cost pptune-status status --json
            done
        done
        # perf writes its data with mmap, which the 9p share refuses.
        for s in A B; do
            d=$A; [ "$s" = B ] && d=$B
            perf record -q -e cpu-clock -F 25000 -o "/tmp/perf-$s.data" -- \
                sh -c "for i in \$(seq 20); do $d/pptune status --json >/dev/null; done"
            perf report -i "/tmp/perf-$s.data" --comm pptune --no-children --sort dso,sym \
                --stdio > "$PPTUNE_VM_OUT/perf-$s.txt" 2>/dev/null
        done
        nsim_del_all
        exit 0
    fi
    log "kernel $(uname -r), clock $PPTUNE_VM_CLOCK, $NSIM_POOLS pools: $ROUNDS rounds of $PASSES passes"
    run() { # side
        case "$1" in
            A) "$A/observe_pass" --passes "$PASSES" ;;
            B) "$B/observe_pass" --passes "$PASSES" ;;
            floor) "$B/raw_floor" --passes "$PASSES" ;;
        esac | sed "s/^{/{\"round\":$r,\"side\":\"$1\",/" | tee -a "$OUT"
    }
    sides=(A B floor)
    for r in $(seq "$ROUNDS"); do
        for i in 0 1 2; do run "${sides[$(( (i + r - 1) % 3 ))]}"; done
    done
    nsim_del_all
    exit 0
fi

# ---------------------------------------------------------------- on the host
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
RES="${RESULTS:-$CARGO_TARGET_DIR/observe-ab}"
VMOUT="$CARGO_TARGET_DIR/observe-ab-vm"
rm -rf "$VMOUT"; mkdir -p "$VMOUT" "$RES"
log "A=$A B=$B, $POOLS pools"
"$REPO/tests/vm/run.sh" --kernel 7.3 --icount --mem 2048 --timeout 1800 --out "$VMOUT" -- \
    "$REPO/benches/observe-ab.sh" --in-vm --pools "$POOLS" --rounds "$ROUNDS" --passes "$PASSES" \
    $([ "$STATUS" = 1 ] && echo --status) "$A" "$B"
cp "$VMOUT/ab.jsonl" "$RES/"
if [ "$STATUS" = 1 ]; then cp "$VMOUT"/perf-[AB].txt "$RES/"; fi
python3 "$REPO/benches/report.py" ab "$RES/ab.jsonl" "$RES" "$A" "$B" ${SAME:+"$SAME"}
