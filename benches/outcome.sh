#!/usr/bin/env bash
# Tuning outcome: pptune in enforce mode against static rings, on ppsim.
#
#   benches/outcome.sh                    # the whole run of benches/results/outcome-model.md §3.0
#   benches/outcome.sh --parts devmem,queues   # some of its parts
#   benches/outcome.sh --smoke            # checks the bench still runs (CI)
#   benches/outcome.sh --preset zonelock|devmem|off [--workloads a,b,...]
#                      [--enforce-secs S] [--static-secs S] [--warmup-secs S]
#                      [--sweep R,R,...] [--rounds N] [--naive-secs S]
#                      [--quiet-secs Q] [--name NAME]   # one ad-hoc part
#
# The whole run has four parts, all in ONE boot of the 7.3 test VM
# (tests/vm/run.sh, 1 vCPU as the test suites, 2048 MiB: 16384 pages x
# 4 KiB x 2 queues = 128 MiB of pool rings plus up to 32768 held pages per
# queue), each writing benches/results/outcome-PART.json:
#   zonelock  the §3.0 workloads under the zonelock preset
#   devmem    the same workloads under the devmem preset
#   queues    the queue-count case (queues-*: a (ring, queues) sweep, runs
#             from 16 queues, benches/outcome-policy-channels.yaml)
#   settle    bursty-2500, pptune watched until 10 minutes after its last
#             change ("0 changes in 10 minutes after convergence")
# and it prints each part's VM time, the boot's and the total (also in
# benches/results/outcome-run.json).
#
# Host: builds the outcome driver (daemon/benches/outcome.rs), the release
# pptune and ppsim.ko (tests/ppsim/build.sh 7.3) once. The enforce runs use
# benches/outcome-policy.yaml (shipped thresholds, timing compressed ~10x:
# see the file). Per workload: the static sweep (--rounds interleaved
# rounds, each point a --warmup-secs warm-up and a --static-secs window),
# the naive tuner (+25 % per 3 s window while ring_full >= 5 %) and pptune,
# each from 256; pptune is watched until --quiet-secs without a change
# (one cooldown + evaluation period of the policy, 30 s; 60 s on the queue
# workloads, whose first change may come after 30 s) or --enforce-secs.
# Results per part: NAME.json, its convergence plot NAME-convergence.svg
# and .png (the PNG needs python3's cairosvg: python3 -m pip install
# cairosvg), and Markdown tables on stdout: the rows per workload and the
# targets judged on ppsim's modelled goodput (report.py).
# --smoke: one workload, a 2-point sweep, one round, short windows; results
# under $CARGO_TARGET_DIR/bench-smoke.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
SMOKE=0
PARTS=""
ADHOC=()
PRESET=zonelock
NAME=""
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1; shift ;;
        --parts) PARTS="$2"; shift 2 ;;
        --preset) PRESET="$2"; ADHOC+=("$1" "$2"); shift 2 ;;
        --name) NAME="$2"; shift 2 ;;
        --workloads|--enforce-secs|--static-secs|--warmup-secs|--sweep|--rounds|--naive-secs|--quiet-secs)
            ADHOC+=("$1" "$2"); shift 2 ;;
        -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "outcome: unknown option $1" >&2; exit 2 ;;
    esac
done
log() { printf '[outcome] %s\n' "$*" >&2; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
cd "$REPO"

# The parts of the whole run (benches/results/outcome-model.md §3.0). Every
# part starts from COMMON; later options override earlier ones in the driver.
FULL_SWEEP=256,512,1024,2048,4096,8192,16384
COMMON=(--sweep "$FULL_SWEEP" --rounds 2 --warmup-secs 0.5 --static-secs 1 --enforce-secs 60
        --quiet-secs 30)
OW=bursty-300,bursty-1500,bursty-2500,bursty-6000,bursty-10000,steady,idle,bursty-1k-100kpps,held
part_args() {
    case "$1" in
        zonelock) echo --preset zonelock --workloads "$OW" ;;
        devmem) echo --preset devmem --workloads "$OW" ;;
        queues) echo --preset zonelock --workloads queues-contended,queues-held,queues-uncontended \
            --enforce-secs 180 --naive-secs 50 --quiet-secs 60 ;;
        settle) echo --preset zonelock --workloads bursty-2500 --rounds 1 --sweep 256,4096 \
            --naive-secs 30 --quiet-secs 600 --enforce-secs 720 ;;
        *) echo "outcome: unknown part $1 (zonelock, devmem, queues, settle)" >&2; return 2 ;;
    esac
}

# names[i] runs the driver with "${COMMON[@]} ${extra[i]}".
names=()
extra=()
if [ "$SMOKE" = 1 ]; then
    names=(outcome-smoke)
    extra=("--preset $PRESET --workloads bursty-1500 --enforce-secs 20 --sweep 256,4096 --rounds 1")
elif [ ${#ADHOC[@]} -gt 0 ]; then
    [ -z "$PARTS" ] || { echo "outcome: --parts or ad-hoc options, not both" >&2; exit 2; }
    names=("${NAME:-outcome-$PRESET}")
    extra=("$(printf '%q ' "${ADHOC[@]}")")
else
    IFS=, read -r -a want <<< "${PARTS:-zonelock,devmem,queues,settle}"
    for p in "${want[@]}"; do
        names+=("outcome-$p")
        extra+=("$(part_args "$p")")
    done
fi

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
# The guest runs the parts one after the other and records each one's
# seconds and exit status in parts.times.
{
    echo 'set -u; rc=0'
    for i in "${!names[@]}"; do
        printf 's=$(date +%%s); %q' "$EXE"
        printf ' %q' --pptune "$PPTUNE" --policy "$REPO/benches/outcome-policy.yaml" \
            --channels-policy "$REPO/benches/outcome-policy-channels.yaml" "${COMMON[@]}"
        printf ' %s > %q; r=$?\n' "${extra[$i]}" "$VMOUT/${names[$i]}.jsonl"
        printf 'echo "%s $(( $(date +%%s) - s )) $r" >> %q; [ $r = 0 ] || rc=1\n' "${names[$i]}" "$VMOUT/parts.times"
    done
    echo 'exit $rc'
} > "$VMOUT/parts.sh"
START=$(date +%s)
log "running in the VM: ${names[*]}"
vmrc=0
tests/vm/run.sh --kernel 7.3 --mem 2048 --timeout 5400 --out "$VMOUT" -- bash "$VMOUT/parts.sh" || vmrc=$?
TOTAL=$(( $(date +%s) - START ))

RES="$REPO/benches/results"
[ "$SMOKE" = 1 ] && RES="$CARGO_TARGET_DIR/bench-smoke"
mkdir -p "$RES"
rc=$vmrc
for n in "${names[@]}"; do
    if ! grep -q "^$n [0-9]* 0$" "$VMOUT/parts.times" 2>/dev/null; then
        log "part $n failed or did not run"; rc=1; continue
    fi
    cp "$VMOUT/$n.jsonl" "$RES/$n.jsonl"
    python3 "$REPO/benches/report.py" outcome "$VMOUT/$n.jsonl" "$RES" "$n" "$REPO/benches/outcome-policy.yaml" || rc=1
done
python3 - "$VMOUT/parts.times" "$TOTAL" "$RES/outcome-run.json" "$SMOKE" <<'EOF'
import json, subprocess, sys
times, total, out, smoke = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
parts = []
try:
    for line in open(times):
        name, secs, rc = line.split()
        parts.append({"part": name, "vm_s": int(secs), "exit": int(rc)})
except FileNotFoundError:
    pass
vm = sum(p["vm_s"] for p in parts)
print("\n| part | VM time |\n|---|---|")
for p in parts:
    print(f"| {p['part']}{'' if p['exit'] == 0 else ' (FAILED)'} | {p['vm_s']} s ({p['vm_s'] / 60:.1f} min) |")
print(f"| boot, module load, shutdown | {total - vm} s |")
print(f"| **total** (tests/vm/run.sh, start to end) | **{total} s ({total / 60:.1f} min)** |")
git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
if not smoke:
    json.dump({"git": git, "parts": parts, "boot_s": total - vm, "total_s": total},
              open(out, "w"), indent=1)
EOF
exit $rc
