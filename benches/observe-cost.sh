#!/usr/bin/env bash
# Cost of one observe pass, in the VM testbed, against the kernel's own tools.
#
#   benches/observe-cost.sh [--smoke] [--sizes "16 128 512 2048"] [--no-build]
#                           [--results DIR] [--shadow]
#
# On the host: builds the bench binaries (netlink/benches/raw_floor.rs,
# daemon/benches/observe_pass.rs), the release `pptune`, and `ynltool` from
# the cached 7.3 source tree (in a copy under $CARGO_TARGET_DIR), then boots
# the 7.3 test VM (tests/vm/run.sh) and re-runs itself inside with --in-vm.
# Inside: netdevsim devices with 128 queues each (16 pools: one device with
# 16 queues), links up, and for each pool count:
#   pptune-pass   in-process: sample (every dump + decode + aggregation),
#                 policy::decide, metrics observe + encode       (per pass)
#   raw-floor     the same netlink requests, netlink-sys + hand-built
#                 messages, one reused buffer                    (per pass)
#                 (pass and floor alternate over 5 rounds; each line
#                 carries its "round")
#   pptune-status `pptune status --json` as a whole process       (per run)
#   ynl-cli       the kernel's pyynl cli.py --dump page-pool-stats-get
#   ynltool       ynltool page-pool stats                         (per run)
#   baseline      `true` under the same process wrapper (its overhead)
#   daemon-cpu    `pptune run` (embedded default policy: observe, 10 s
#                 interval) at the largest size, its CPU over DAEMON_SECS
#                 (default 600; --smoke: 20; 0 skips it; the environment's
#                 or --daemon-secs N, handed to the VM) after a 30 s start
#   emulation     the host micro-bench (observe_replay, 2048 pools of
#                 recorded-shape bytes, userspace only) run on the host and
#                 in the VM: their CPU ratio is what the emulation inflates
#                 userspace work by, to read daemon-cpu as native
# The VM runs with qemu's -icount (tests/vm/run.sh --icount): the guest's
# clock counts its instructions, one nanosecond each, so every CPU time read
# inside (pass, floor, processes, the daemon) is an instruction count,
# repeatable whatever the shared host is doing; TCG's own clock counted host
# stalls and moved a pass/floor ratio between 1.2 and 1.9 with the host's
# load. Instructions are not seconds on a real CPU: see BENCHMARKS.md §2.1.
# Results: benches/results/observe-cost.json (+ .svg plot, and the 2048-pool
# snapshot benches/results/vm-snapshot-2048.json for the render bench).
# --smoke: 16 pools only, few passes, results to $CARGO_TARGET_DIR instead.
# --results DIR: write the results (and the raw observe-cost.jsonl) there
# instead of benches/results (a rerun that should not replace the recorded
# ones).
# --shadow: only the shadow policy's cost (daemon/src/service/shadow.rs):
# per size, 3 rounds, each of two `pptune-shadow` lines (pass time without
# the shadow, the shadow's time, their ratio), in an order that flips each
# round: "path":"unchanged" (observe_pass --shadow: a shadow that changed
# nothing) and "path":"modelled" (--shadow-prior 1024: a shadow whose fleet
# prior changed every netdevsim device at the warm-up tick, so it models
# all of them), written to observe-shadow.jsonl in the results directory.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
SMOKE=0
IN_VM=0
NO_BUILD=0
RESULTS=""
SHADOW=0
SIZES="16 128 512 2048"
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1; SIZES="16"; shift ;;
        --sizes) SIZES="$2"; shift 2 ;;
        --in-vm) IN_VM=1; shift ;;
        --no-build) NO_BUILD=1; shift ;;
        --results) RESULTS="$2"; shift 2 ;;
        --shadow) SHADOW=1; shift ;;
        --daemon-secs) DAEMON_SECS="$2"; shift 2 ;;
        -h|--help) sed -n '2,49p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "observe-cost: unknown option $1" >&2; exit 2 ;;
    esac
done
log() { printf '[observe-cost] %s\n' "$*" >&2; }
[[ "${DAEMON_SECS:-0}" =~ ^[0-9]+$ ]] || { log "DAEMON_SECS / --daemon-secs takes whole seconds, not ${DAEMON_SECS}"; exit 2; }
. "$REPO/benches/lib.sh"

# ---------------------------------------------------------------- in the VM
if [ "$IN_VM" = 1 ]; then
    OUT="$PPTUNE_VM_OUT/observe-cost.jsonl"
    : > "$OUT"
    TREE="$PPTUNE_KERNEL_DIR/linux"
    B="$PPTUNE_BENCH_BIN"   # directory with raw_floor, observe_pass, pptune, ynltool
    run_proc() { python3 "$REPO/benches/proc_cost.py" "$@" | tee -a "$OUT"; }
    log "kernel $(uname -r), $(nproc) vCPU, $(awk '/MemTotal/ {print $2}' /proc/meminfo) KiB, clock ${PPTUNE_VM_CLOCK:-tcg}"
    printf '{"tool":"vm","kernel":"%s","vcpus":%d,"mem_kib":%d,"clock":"%s"}\n' "$(uname -r)" "$(nproc)" \
        "$(awk '/MemTotal/ {print $2}' /proc/meminfo)" "${PPTUNE_VM_CLOCK:-tcg}" | tee -a "$OUT"
    run_proc --label baseline --runs 5 -- true
    for n in $SIZES; do
        nsim_up_to "$n"
        # Passes and runs scale down with size so each row takes seconds.
        if [ "$SMOKE" = 1 ]; then passes=3; runs=2; yruns=1; rounds=2
        else passes=$(bench_passes "$n")
             runs=$(( n <= 128 ? 10 : 5 )); yruns=3; rounds=5
        fi
        log "$n pools wanted ($(ls -d /sys/bus/netdevsim/devices/netdevsim* | wc -l) devices): $rounds rounds of $passes passes, $runs runs"
        if [ "$SHADOW" = 1 ]; then
            shadow() {
                "$B/observe_pass" --passes "$passes" "${@:3}" | grep '"pptune-shadow"' \
                    | sed "s/^{/{\"round\":$1,\"path\":\"$2\",/" | tee -a "$OUT"
            }
            for r in 1 2 3; do
                if [ $((r % 2)) = 1 ]; then
                    shadow "$r" unchanged --shadow
                    shadow "$r" modelled --shadow-prior 1024
                else
                    shadow "$r" modelled --shadow-prior 1024
                    shadow "$r" unchanged --shadow
                fi
            done
            continue
        fi
        save=()
        [ "$n" = 2048 ] && save=(--save-snapshot "$PPTUNE_VM_OUT/vm-snapshot-2048.json")
        # Pass and floor alternate over $rounds rounds (the order flips
        # each round), and report.py takes the ratio within each round and
        # its median and spread: under -icount the rounds agree within
        # 0.5 %, and the spread shows it (without it, on TCG's clock, two
        # blocks timed minutes apart gave 1.2-1.9).
        for r in $(seq "$rounds"); do
            tag() { sed "s/^{/{\"round\":$r,/" | tee -a "$OUT"; }
            if [ $((r % 2)) = 1 ]; then
                "$B/observe_pass" --passes "$passes" "${save[@]}" | tag
                "$B/raw_floor" --passes "$passes" | tag
            else
                "$B/raw_floor" --passes "$passes" | tag
                "$B/observe_pass" --passes "$passes" | tag
            fi
        done
        run_proc --label pptune-status --pools "$n" --runs "$runs" -- "$B/pptune" status --json
        run_proc --label ynltool --pools "$n" --runs "$runs" -- "$B/ynltool" page-pool stats
        run_proc --label ynl-cli --pools "$n" --runs "$yruns" -- python3 \
            "$TREE/tools/net/ynl/pyynl/cli.py" \
            --spec "$TREE/Documentation/netlink/specs/netdev.yaml" \
            --dump page-pool-stats-get
    done
    if [ "$SHADOW" = 1 ]; then nsim_del_all; exit 0; fi
    # The daemon as shipped, at the last (largest) size.
    if [ "$SMOKE" = 1 ]; then dsecs=${DAEMON_SECS:-20}; else dsecs=${DAEMON_SECS:-600}; fi
    if [ "$dsecs" -gt 0 ]; then
        ddir=$(mktemp -d)
        RUNTIME_DIRECTORY="$ddir/run" STATE_DIRECTORY="$ddir/state" \
            "$B/pptune" run --metrics-listen 127.0.0.1:0 >"$ddir/log" 2>&1 &
        dpid=$!
        sleep 30
        kill -0 "$dpid" || { log "the daemon died:"; cat "$ddir/log" >&2; exit 1; }
        ticks() { awk '{print $14 + $15}' "/proc/$dpid/stat"; }
        t0=$(ticks); w0=$(date +%s.%N)
        sleep "$dsecs"
        t1=$(ticks); w1=$(date +%s.%N)
        rss=$(awk '/VmHWM/ {print $2}' "/proc/$dpid/status")
        kill "$dpid"; wait "$dpid" || true
        hz=$(getconf CLK_TCK)
        python3 - "$t0" "$t1" "$w0" "$w1" "$hz" "$NSIM_POOLS" "$rss" <<'PY' | tee -a "$OUT"
import json, sys
t0, t1, w0, w1, hz, pools, rss = sys.argv[1:]
cpu = (int(t1) - int(t0)) / int(hz)
wall = float(w1) - float(w0)
print(json.dumps({"tool": "daemon-cpu", "pools": int(pools), "wall_s": round(wall, 1),
                  "cpu_s": round(cpu, 2), "share_pct": round(100 * cpu / wall, 3),
                  "maxrss_kib": int(rss)}))
PY
        rm -rf "$ddir"
        "$B/observe_replay" --devices 16 --queues 128 --passes 20 | grep replay-pass \
            | sed 's/"tool":"replay-pass"/"tool":"emulation-vm"/' | tee -a "$OUT"
    fi
    nsim_del_all
    exit 0
fi

# ---------------------------------------------------------------- on the host
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
cd "$REPO"
BIN="$CARGO_TARGET_DIR/bench-bin"
KDIR="$(tests/vm/kernel.sh 7.3)"
if [ "$NO_BUILD" = 1 ]; then
    log "--no-build: using the binaries already in $BIN"
else
log "building bench binaries and release pptune"
bench_build
mkdir -p "$BIN"
cp "$(bench_exe raw_floor bench)" "$BIN/raw_floor"
cp "$(bench_exe observe_pass bench)" "$BIN/observe_pass"
cp "$(bench_exe observe_replay bench)" "$BIN/observe_replay"
cp "$(bench_exe pptune bin)" "$BIN/pptune"

"$REPO/benches/build-ynltool.sh" "$KDIR/linux" "$CARGO_TARGET_DIR/ynltree" >&2
cp "$CARGO_TARGET_DIR/ynltree/tools/net/ynl/ynltool/ynltool" "$BIN/ynltool"
fi

VMOUT="$CARGO_TARGET_DIR/observe-cost-vm"
rm -rf "$VMOUT"; mkdir -p "$VMOUT"
# The same userspace work on the host, for the emulation ratio (the VM
# part runs it again inside).
"$BIN/observe_replay" --devices 16 --queues 128 --passes 20 | grep replay-pass \
    | sed 's/"tool":"replay-pass"/"tool":"emulation-host"/' > "$VMOUT/emulation-host.jsonl"
export PPTUNE_BENCH_BIN="$BIN"
START=$(date +%s)
log "running in the VM (sizes: $SIZES)"
tests/vm/run.sh --kernel 7.3 --icount --mem 2048 --timeout 3000 --out "$VMOUT" -- \
    "$REPO/benches/observe-cost.sh" --in-vm --sizes "$SIZES" $([ "$SMOKE" = 1 ] && echo --smoke) \
    $([ "$SHADOW" = 1 ] && echo --shadow) ${DAEMON_SECS:+--daemon-secs "$DAEMON_SECS"}
log "VM part took $(( $(date +%s) - START )) s"
if [ "$SHADOW" = 1 ]; then
    RES="${RESULTS:-$REPO/benches/results}"
    mkdir -p "$RES"
    cp "$VMOUT/observe-cost.jsonl" "$RES/observe-shadow.jsonl"
    cat "$RES/observe-shadow.jsonl"
    exit 0
fi

cat "$VMOUT/emulation-host.jsonl" >> "$VMOUT/observe-cost.jsonl"

if [ -n "$RESULTS" ]; then
    RES="$RESULTS"
    mkdir -p "$RES"
    cp "$VMOUT/observe-cost.jsonl" "$RES/"
    [ -f "$VMOUT/vm-snapshot-2048.json" ] && cp "$VMOUT/vm-snapshot-2048.json" "$RES/"
elif [ "$SMOKE" = 1 ]; then
    RES="$CARGO_TARGET_DIR/bench-smoke"
else
    RES="$REPO/benches/results"
    [ -f "$VMOUT/vm-snapshot-2048.json" ] && cp "$VMOUT/vm-snapshot-2048.json" "$RES/"
fi
mkdir -p "$RES"
python3 "$REPO/benches/report.py" observe-cost "$VMOUT/observe-cost.jsonl" "$RES"
