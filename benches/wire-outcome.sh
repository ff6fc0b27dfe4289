#!/usr/bin/env bash
# Tuning outcome on real traffic (issue 29 parts 2-3): static RX rings, the
# rules operators use, and pptune, on TCP over the ppsim wire, judged by
# the kernel's counters and the application (daemon/benches/wire_outcome.rs
# says what is measured and how).
#
#   benches/wire-outcome.sh            # the whole run -> benches/results/wire-outcome.*
#   benches/wire-outcome.sh --smoke    # checks the bench still runs (CI)
#   benches/wire-outcome.sh --remedy   # time to remedy at the shipped default
#   benches/wire-outcome.sh --rebuild --profile P [--passes 0,1]   # BENCHMARKS §3.R on one priced profile
#   benches/wire-outcome.sh [--name NAME] [--jobs N] [--profile P] -- DRIVER-OPTIONS...   # an ad-hoc run
#
# Host: builds the driver, the release pptune (one `cargo bench --no-run`,
# benches/lib.sh), pptraffic (debug, as tests/vm/wire-cost.sh measured it)
# and ppsim.ko (tests/ppsim/build.sh 7.3); boots --jobs (default 2) 7.3
# VMs side by side under --icount (1 vCPU, 2048 MiB each: ring 16384 posts
# 64 MiB and the pool ring may hold as much again), the workloads dealt
# round-robin between them, and runs the driver in each. Every figure is in
# guest instructions (icount), so the VMs do not time each other; only the
# host's wall clock is shared. pptune runs with
# benches/outcome-policy.yaml (see benches/results/wire-outcome-first-run.md
# for why it fits the wire unchanged). Results: NAME.jsonl (one line per
# measurement), NAME-run.json (VM time), NAME-tables.md (the tables and
# verdicts of benches/wire_report.py; BENCHMARKS §3 is the reading of the
# current run). --smoke: one workload, 2 rings, 1 round,
# short windows, results under $CARGO_TARGET_DIR/bench-smoke.
# --remedy: pptune alone with benches/remedy-policy.yaml (the shipped
# default, enforcing) on the drain workload, six 240 s runs from ring 256
# (two VMs), each starting its traffic at a random offset into pptune's
# sampling interval, B's counters read every second: the time from the
# first second whose ring_full share is >= 20 % to pptune's first change,
# and to the remedy, after which the share stays under 5 % (wire-remedy.*).
# --rebuild: BENCHMARKS §3.R's run on one host profile (rebuild-P.*;
# iommu-strict's first round also swept 16384): drain-pinned and udp
# (devmem and devmem-a2a on devmem), rings 256, 1024, 2048 and 4096 in 3
# interleaved rounds, max once, doubling, one-shot, naive and pptune 3
# times each, every row at 45 s of traffic. The whole outcome run is split
# one profile per run, and each run's passes (workload x pass: a round of
# the sweep, then a repeat of every tuner) are dealt to the two VMs, so
# drain-pinned's three slow passes do not all fall on one VM (whole, it
# reached the 6,000 s limit: BENCHMARKS §3.R2). A unit (9 points) takes
# about 33 min of host here (iommu-strict ran 6 points in 1,307 s), a
# whole profile about 100: --passes 0,1 and then --passes 2 split it into
# two runs (devmem: 82 and 35 min on a host also running other VMs and
# builds, BENCHMARKS §3.R4), each writing
# rebuild-P-pKL.*, and each merging every part there is into rebuild-P.*
# (the rows of a pass are the same whichever run made them).
# --profile: the host profile the VMs boot with (tests/vm/run.sh --profile:
# free, distro, iommu-strict, iommu-lazy, devmem; default free). The devmem
# workloads (devmem, devmem-a2a: received through the dma-buf provider)
# need --profile devmem; add --trace-provider to the driver's options for
# a traced point per ring of the provider's operations
# (benches/devmem_report.py makes their tables).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
SMOKE=0
REMEDY=0
REBUILD=0
ONSET_SEED=
NAME=wire-outcome
# --name wins over the name a mode (--smoke, --remedy, --rebuild) gives.
NAME_GIVEN=
JOBS=2
PROFILE=free
# Set: the VMs are dealt (workload, pass) units, these passes of each
# workload (the driver's --passes), instead of whole workloads.
PASSES=
ADHOC=()
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1; shift ;;
        --remedy) REMEDY=1; shift ;;
        --rebuild) REBUILD=1; shift ;;
        --name) NAME="$2"; NAME_GIVEN=1; shift 2 ;;
        --jobs) JOBS="$2"; shift 2 ;;
        --profile) PROFILE="$2"; shift 2 ;;
        --passes) PASSES="$2"; shift 2 ;;
        --) shift; ADHOC=("$@"); break ;;
        -h|--help) sed -n '2,53p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "wire-outcome: unknown option $1" >&2; exit 2 ;;
    esac
done
log() { printf '[wire-outcome] %s\n' "$*" >&2; }
# --rebuild's rounds of the sweep and repeats of every tuner: its passes.
REBUILD_PASSES=3
if [ -n "$PASSES" ] && { [ "$REBUILD" = 0 ] ||
        ! [[ ",$PASSES," =~ ^(,[0-9]+)+,$ ]] ||
        [ "$(tr , '\n' <<< "$PASSES" | sort -n | tail -1)" -ge "$REBUILD_PASSES" ]; }; then
    echo "wire-outcome: --passes takes --rebuild's passes, 0 to $((REBUILD_PASSES - 1)) (as 0,1), not '$PASSES'" >&2
    exit 2
fi
PART_OF=
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
cd "$REPO"

# The whole run: 6 workloads x 13 rings x 2 rounds, then 5 tuned runs each
# and the settle check on the stationary bursty ones (drain-pinned, udp).
WORKLOADS=drain-pinned,udp,steady,mice,slow,splice
ARGS=(--rounds 2 --warmup-secs 2 --window-secs 3 --ctl-window-secs 3 --quiet-secs 9
      --pptune-quiet-secs 30 --max-run-secs 90
      --tuners max-once,doubling,one-shot,naive,pptune,settle --settle-calm-secs 30)
if [ "$SMOKE" = 1 ]; then
    [ -n "$NAME_GIVEN" ] || NAME=wire-outcome-smoke
    JOBS=1
    WORKLOADS=drain
    ARGS=(--sweep 256,4096 --rounds 1 --warmup-secs 1 --window-secs 2
          --tuners doubling,pptune --quiet-secs 3 --pptune-quiet-secs 8 --max-run-secs 12)
fi
if [ "$REBUILD" = 1 ]; then
    [ -n "$NAME_GIVEN" ] || NAME="rebuild-$PROFILE"
    if [ -n "$PASSES" ]; then
        PART_OF="$NAME"
        NAME="$NAME-p${PASSES//,/}"
    else
        PASSES=$(seq -s, 0 $((REBUILD_PASSES - 1)))
    fi
    WORKLOADS=drain-pinned,udp
    [ "$PROFILE" = devmem ] && WORKLOADS=devmem,devmem-a2a
    ARGS+=(--sweep 256,1024,2048,4096 --rounds "$REBUILD_PASSES" --repeats "$REBUILD_PASSES"
           --tuners max-once,doubling,one-shot,naive,pptune
           --age-secs 45 --pptune-quiet-secs 20 --max-run-secs 90)
fi
POLICY=benches/outcome-policy.yaml
if [ "$REMEDY" = 1 ]; then
    [ -n "$NAME_GIVEN" ] || NAME=wire-remedy
    POLICY=benches/remedy-policy.yaml
    # No static sweep (0 rounds of it): pptune alone, two runs, each until
    # 240 s: the first change, and a follow-up after its 2-minute
    # evaluation if a severe miss outlives it (docs/decisions.md §2).
    # Two VMs of three runs each (six in all), each run's traffic
    # starting at a random offset into pptune's sampling interval (a seed
    # per VM: --onset-seed), so the time to remedy is not the phase the
    # start-up happens to give.
    JOBS=2
    WORKLOADS=drain,drain
    ONSET_SEED=1
    ARGS=(--rounds 0 --tuners pptune,pptune,pptune --ctl-window-secs 1
          --window-secs 3 --pptune-quiet-secs 1000 --max-run-secs 240)
fi
# An ad-hoc --workloads replaces the list (the driver takes the last one).
for ((i = 0; i < ${#ADHOC[@]}; i++)); do
    [ "${ADHOC[$i]}" = --workloads ] && WORKLOADS="${ADHOC[$((i + 1))]}"
done
ARGS+=("${ADHOC[@]}")

# The commit the binaries are built from (the tree may move during a run).
GIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!benches/results' || echo +dirty)"
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

# The units (a workload, or with PASSES a workload's pass: W:K),
# workload by workload, dealt round-robin to JOBS groups, one VM each;
# each unit is one run of the driver.
IFS=, read -ra WL <<< "$WORKLOADS"
UNITS=()
for w in "${WL[@]}"; do
    if [ -n "$PASSES" ]; then
        for k in ${PASSES//,/ }; do UNITS+=("$w:$k"); done
    else
        UNITS+=("$w")
    fi
done
[ "$JOBS" -ge 1 ] || JOBS=1
[ "$JOBS" -le "${#UNITS[@]}" ] || JOBS=${#UNITS[@]}
GROUPS_=()
for ((i = 0; i < ${#UNITS[@]}; i++)); do
    g=$((i % JOBS))
    GROUPS_[$g]="${GROUPS_[$g]:+${GROUPS_[$g]} }${UNITS[$i]}"
done
VMROOT="$CARGO_TARGET_DIR/wire-outcome-vm/$NAME"
rm -rf "$VMROOT"; mkdir -p "$VMROOT"
# Content-named copies: 9p may serve a rebuilt binary's stale pages.
cp "$PT" "$VMROOT/pptraffic-$(sha256sum "$PT" | cut -c1-12)"
PT="$(ls "$VMROOT"/pptraffic-*)"
START=$(date +%s)
PIDS=()
for ((g = 0; g < JOBS; g++)); do
    VMOUT="$VMROOT/part$g"; mkdir -p "$VMOUT"
    {
        printf 's=$(date +%%s); r=0; : > %q; : > %q\n' "$VMOUT/$NAME.jsonl" "$VMOUT/units.times"
        i=0
        for unit in ${GROUPS_[$g]}; do
            w=${unit%%:*}
            # A seed per unit (one driver run each): per VM as before for
            # the first, and no two units of a run alike.
            seed=${ONSET_SEED:+$((ONSET_SEED + g + i * JOBS))}
            i=$((i + 1))
            printf 'u=$(date +%%s); '
            printf '%q' "$EXE"
            printf ' %q' --pptraffic "$PT" --pptune "$PPTUNE" --policy "$REPO/$POLICY" "${ARGS[@]}" \
                --workloads "$w" ${seed:+--onset-seed $seed}
            [ "$unit" = "$w" ] || printf ' --passes %q' "${unit#*:}"
            printf ' >> %q; ur=$?; [ $ur = 0 ] || r=$ur\n' "$VMOUT/$NAME.jsonl"
            printf 'echo "%s $(( $(date +%%s) - u )) $ur" >> %q\n' "$unit" "$VMOUT/units.times"
        done
        printf 'echo "$(( $(date +%%s) - s )) $r" > %q; exit $r\n' "$VMOUT/vm.times"
    } > "$VMOUT/job.sh"
    log "VM $g (icount): ${GROUPS_[$g]}"
    tests/vm/run.sh --kernel 7.3 --icount --profile "$PROFILE" --mem 2048 --timeout 6000 --out "$VMOUT" -- \
        bash "$VMOUT/job.sh" > "$VMOUT/console.log" 2>&1 &
    PIDS+=($!)
done
vmrc=0
for ((g = 0; g < JOBS; g++)); do
    wait "${PIDS[$g]}" || { vmrc=$?; log "VM $g failed ($vmrc): tail of $VMROOT/part$g/console.log"; tail -20 "$VMROOT/part$g/console.log" >&2; }
done
TOTAL=$(( $(date +%s) - START ))
RES="$REPO/benches/results"
[ "$SMOKE" = 1 ] && RES="$CARGO_TARGET_DIR/bench-smoke"
mkdir -p "$RES"
rm -f "$RES/$NAME.jsonl"
VM_S=0; VM_RC=0; PARTS=()
for ((g = 0; g < JOBS; g++)); do
    VMOUT="$VMROOT/part$g"
    [ -f "$VMOUT/$NAME.jsonl" ] && cat "$VMOUT/$NAME.jsonl" >> "$RES/$NAME.jsonl"
    read -r s r < "$VMOUT/vm.times" || { s=-1; r=-1; }
    # Each unit's guest seconds and exit ([] if the VM never wrote any).
    UT=$(awk '{printf "%s{\"unit\": \"%s\", \"virtual_s\": %s, \"exit\": %s}", (NR > 1 ? ", " : ""), $1, $2, $3}' \
        "$VMOUT/units.times" 2>/dev/null || true)
    PARTS+=("{\"workloads\": \"${GROUPS_[$g]}\", \"driver_virtual_s\": $s, \"driver_exit\": $r, \"units\": [$UT]}")
    [ "$s" -gt "$VM_S" ] && VM_S=$s
    [ "$r" = 0 ] || VM_RC=$r
done
printf '{"git": "%s", "profile": "%s", "driver_virtual_s": %s, "driver_exit": %s, "host_total_s": %s, "vms": [%s]}\n' \
    "$GIT" "$PROFILE" "$VM_S" "$VM_RC" "$TOTAL" "$(IFS=,; echo "${PARTS[*]}")" > "$RES/$NAME-run.json"
log "VMs: at most $VM_S s of guest (virtual) time each, exit $VM_RC; host: $TOTAL s in all"
rc=$vmrc
if [ -n "$PART_OF" ]; then
    # This run's part stands on its own (its tables below) and joins the
    # others there are in the profile's merged rows and run record. A
    # whole (unsplit) run's files there are kept, renamed -whole.*.
    if [ -f "$RES/$PART_OF-run.json" ] && ! grep -q '"parts"' "$RES/$PART_OF-run.json"; then
        for ext in .jsonl -run.json -tables.md; do
            [ -f "$RES/$PART_OF$ext" ] && mv "$RES/$PART_OF$ext" "$RES/$PART_OF-whole$ext"
        done
        log "kept the whole run's $RES/$PART_OF.* as $PART_OF-whole.*"
    fi
    cat "$RES/$PART_OF"-p*.jsonl > "$RES/$PART_OF.jsonl"
    python3 -c 'import json, sys
parts = [json.load(open(f)) for f in sys.argv[2:]]
json.dump({"git": " ".join(sorted({p["git"] for p in parts})), "profile": parts[0]["profile"],
           "parts": [dict(p, name=f.rsplit("/", 1)[-1][:-len("-run.json")]) for p, f in zip(parts, sys.argv[2:])]},
          open(sys.argv[1], "w"))' "$RES/$PART_OF-run.json" "$RES/$PART_OF"-p*-run.json
    python3 "$REPO/benches/wire_report.py" "$RES/$PART_OF.jsonl" "$RES/$PART_OF-run.json" > "$RES/$PART_OF-tables.md" || rc=1
    log "merged: $RES/$PART_OF-tables.md ($(ls "$RES/$PART_OF"-p*.jsonl | wc -l) part(s))"
fi
if [ -f "$RES/$NAME.jsonl" ]; then
    python3 "$REPO/benches/wire_report.py" "$RES/$NAME.jsonl" "$RES/$NAME-run.json" > "$RES/$NAME-tables.md" || rc=1
    cat "$RES/$NAME-tables.md"
else
    rc=1
fi
exit $rc
