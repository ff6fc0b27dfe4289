#!/usr/bin/env bash
# What the daemon's memory needs on a host of N devices, and whether it
# stays flat under device churn, in the VM testbed (real kernel, real
# netlink, the release binary as shipped).
#
#   benches/daemon-rss.sh [--no-build] [--results DIR] [--churn N] [--churn-only]
#
# On the host: builds the release `pptune` (benches/lib.sh) and boots the
# 7.3 test VM (4 GiB) that re-runs this script with --in-vm. Inside, one
# `pptune run` (the systemd unit's Environment=, embedded default policy,
# recording on at its 64 MiB cap,
# metrics served; only the interval lowered to 2 s so each step takes
# seconds) watches a host that grows in two ladders:
#   nics    netdevsim devices of 16 RX queues (16 page pools each), links
#           up: 1, 4, 16, 64 devices (16 to 1,024 pools) — the devices
#           pptune selects and judges;
#   links   pool-less dummy links added beside 4 NICs: 1,000, 4,000,
#           8,000 — a container host's veths, which pptune sees in every
#           link dump but does not select;
# and at each step, after 3 more passes: VmRSS (and its parts: RssAnon,
# the heap and stacks; RssFile, the binary's pages run so far), VmHWM, the exposition's
# size and series count, and the recording's size. Then churn: the NICs
# replaced (each a new netdevsim device, new ifindex, new pools) --churn
# times (default 2,000) and 30,000 dummy lifetimes, RSS before and after.
# --churn-only: no ladders; the churn starts from a fresh daemon watching
# 4 NICs, so its RSS before is not a ladder's high-water mark.
# Results: benches/results/daemon-rss.jsonl (one JSON line per step;
# --churn-only: daemon-rss-churn.jsonl).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
IN_VM=0
NO_BUILD=0
RESULTS=""
CHURN=2000
CHURN_ONLY=0
while [ $# -gt 0 ]; do
    case "$1" in
        --in-vm) IN_VM=1; shift ;;
        --no-build) NO_BUILD=1; shift ;;
        --results) RESULTS="$2"; shift 2 ;;
        --churn) CHURN="$2"; shift 2 ;;
        --churn-only) CHURN_ONLY=1; shift ;;
        -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "daemon-rss: unknown option $1" >&2; exit 2 ;;
    esac
done
log() { printf '[daemon-rss] %s\n' "$*" >&2; }
. "$REPO/benches/lib.sh"

# ---------------------------------------------------------------- in the VM
if [ "$IN_VM" = 1 ]; then
    OUT="$PPTUNE_VM_OUT/daemon-rss.jsonl"
    : > "$OUT"
    B="$PPTUNE_BENCH_BIN"
    PORT=9977
    dir=$(mktemp -d)
    printf 'timing:\n  interval: 2s\n  window: 6s\n' > "$dir/policy.yaml"
    # As the unit runs it: with its Environment= (the allocator settings).
    # (no process substitution: the VM has no /dev/fd)
    unit_env=()
    while IFS= read -r e; do
        if [ -n "$e" ]; then unit_env+=("$e"); fi
    done <<< "$(sed -n 's/^Environment=//p' "$REPO/packaging/systemd/pptune.service")"
    env RUNTIME_DIRECTORY="$dir/run" STATE_DIRECTORY="$dir/state" "${unit_env[@]}" \
        "$B/pptune" --config "$dir/policy.yaml" run --metrics-listen "127.0.0.1:$PORT" \
        >"$dir/log" 2>&1 &
    dpid=$!
    scrape() { python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=60).read().decode())' \
        "http://127.0.0.1:$PORT/metrics"; }
    samples() { scrape | awk '$1 == "pptune_samples_total" {print int($2)}'; }
    alive() { kill -0 "$dpid" 2>/dev/null || { log "the daemon died:"; cat "$dir/log" >&2; exit 1; }; }
    # settle: 3 more successful passes than now.
    settle() {
        local want=$(( $(samples) + 3 ))
        for _ in $(seq 600); do
            alive
            [ "$(samples)" -ge "$want" ] && return 0
            sleep 0.5
        done
        log "no 3 passes in 300 s"; exit 1
    }
    point() { # ladder step
        settle
        scrape > "$dir/expo"
        python3 - "$1" "$2" "$NSIM_DEVS" "$NSIM_POOLS" "$DUMMIES" "$dpid" "$dir/state" "$dir/expo" <<'PY' | tee -a "$OUT"
import json, os, sys
ladder, step, nics, pools, dummies, pid, state, expo = sys.argv[1:9]
expo = open(expo).read()
st = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status") if ":" in l)
kib = lambda k: int(st[k].split()[0])
rec = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(state) for f in fs)
print(json.dumps({"ladder": ladder, "step": step, "nics": int(nics), "pools": int(pools),
    "dummies": int(dummies), "rss_kib": kib("VmRSS"), "hwm_kib": kib("VmHWM"),
    "anon_kib": kib("RssAnon"), "file_kib": kib("RssFile"),
    "threads": int(st["Threads"]), "expo_bytes": len(expo.encode()),
    "series": sum(1 for l in expo.splitlines() if l and not l.startswith("#")),
    "state_bytes": rec}))
PY
    }
    NSIM_DEVS=0
    DUMMIES=0
    nic() { nsim_add 16; NSIM_DEVS=$((NSIM_DEVS + 1)); }
    dummies_to() { # count
        local f="$dir/batch" i
        : > "$f"
        for i in $(seq "$((DUMMIES + 1))" "$1"); do echo "link add d$i type dummy"; done > "$f"
        ip -batch "$f"
        DUMMIES=$1
    }
    dummies_del() {
        local f="$dir/batch" i
        for i in $(seq 1 "$DUMMIES"); do echo "link del d$i"; done > "$f"
        ip -batch "$f"
        DUMMIES=0
    }
    log "kernel $(uname -r), $(nproc) vCPU, $(awk '/MemTotal/ {print $2}' /proc/meminfo) KiB"
    alive
    point start 0
    if [ "$CHURN_ONLY" = 1 ]; then
        for _ in 1 2 3 4; do nic; done
    else
    for n in 1 4 16 64; do
        while [ "$NSIM_DEVS" -lt "$n" ]; do nic; done
        point nics "$n"
    done
    # Back to 4 NICs for the link ladder.
    nsim_del_all; NSIM_DEVS=0; NSIM_NEXT_ID=1
    for _ in 1 2 3 4; do nic; done
    point links 0
    for n in 1000 4000 8000; do
        dummies_to "$n"
        point links "$n"
    done
    dummies_del
    fi
    point churn-before 0
    # NIC churn: one of the 4 replaced at a time (delete, then a new
    # netdevsim device: new ifindex, new pools), a pass every 20.
    for i in $(seq "$CHURN"); do
        victim=$(ls -d /sys/bus/netdevsim/devices/netdevsim* | head -1)
        echo "${victim##*netdevsim}" > /sys/bus/netdevsim/del_device
        NSIM_POOLS=$((NSIM_POOLS - 16)); NSIM_DEVS=$((NSIM_DEVS - 1))
        nic
        [ $((i % 20)) = 0 ] && { alive; sleep 2; }
    done
    point churn-nics "$CHURN"
    # 30,000 dummy lifetimes, 1,000 at a time, each batch seen by a pass;
    # read after the 1st, 10th, 20th and 30th (the first batch's peak is
    # the allocator's high-water mark: growth is what comes after it).
    for b in $(seq 30); do
        dummies_to 1000
        settle
        dummies_del
        case $b in 1|10|20|30) point churn-links "$((b * 1000))" ;; esac
    done
    kill "$dpid"; wait "$dpid" || true
    nsim_del_all
    exit 0
fi

# ---------------------------------------------------------------- on the host
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target-bench}"
cd "$REPO"
BIN="$CARGO_TARGET_DIR/bench-bin"
if [ "$NO_BUILD" = 1 ]; then
    log "--no-build: using $BIN/pptune"
else
    log "building the release pptune"
    bench_build
    mkdir -p "$BIN"
    cp "$(bench_exe pptune bin)" "$BIN/pptune"
fi
VMOUT="$CARGO_TARGET_DIR/daemon-rss-vm"
rm -rf "$VMOUT"; mkdir -p "$VMOUT"
export PPTUNE_BENCH_BIN="$BIN"
START=$(date +%s)
tests/vm/run.sh --kernel 7.3 --mem 4096 --timeout 5400 --out "$VMOUT" -- \
    "$REPO/benches/daemon-rss.sh" --in-vm --churn "$CHURN" $([ "$CHURN_ONLY" = 1 ] && echo --churn-only)
log "VM part took $(( $(date +%s) - START )) s"
RES="${RESULTS:-$REPO/benches/results}"
mkdir -p "$RES"
NAME=daemon-rss; [ "$CHURN_ONLY" = 1 ] && NAME=daemon-rss-churn
cp "$VMOUT/daemon-rss.jsonl" "$RES/$NAME.jsonl"
cat "$RES/$NAME.jsonl"
