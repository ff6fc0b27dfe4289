#!/usr/bin/env bash
# What the daemon's heap holds after bursts of links that came and went:
# the release binary given runs under heaptrack in a throwaway network
# namespace (embedded default policy with a 1 s interval, recording on),
# BURSTS times 500 veth pairs are added, seen for 4 s and deleted, and the
# daemon is killed in place (-9) 4 s after the last burst, so its
# allocations not yet freed are what it held then; heaptrack_print lists
# them ("leaked") by call site, the largest first. BURSTS=0 gives the
# baseline. Root; heaptrack from Debian's package.
#
#   benches/daemon-live-heap.sh [--bursts N] BINARY OUT   # OUT.zst, OUT.txt
set -euo pipefail
BURSTS=2
if [ "${1:-}" = --bursts ]; then BURSTS="$2"; shift 2; fi
[ $# -eq 2 ] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BIN="$1"; OUT="$2"
[ "$(id -u)" = 0 ] || { echo "daemon-live-heap: needs root (network namespaces)" >&2; exit 2; }
command -v heaptrack >/dev/null || { echo "daemon-live-heap: needs heaptrack (apt-get install heaptrack)" >&2; exit 2; }
ns="ppheap$$"; d=$(mktemp -d)
trap 'pkill -9 -f "config $d/policy.yaml run" 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; rm -rf "$d"' EXIT
ip netns add "$ns"
printf 'timing:\n  interval: 1s\n  window: 3s\n' > "$d/policy.yaml"
ip netns exec "$ns" ip link set lo up
env -u RUST_BACKTRACE RUNTIME_DIRECTORY="$d/run" STATE_DIRECTORY="$d/state" \
    ip netns exec "$ns" heaptrack -o "$OUT" "$BIN" --config "$d/policy.yaml" run > "$d/log" 2>&1 &
sleep 6
for i in $(seq 500); do echo "link add d$i type veth peer name e$i"; done > "$d/add"
for i in $(seq 500); do echo "link del d$i"; done > "$d/del"
for _ in $(seq "$BURSTS"); do
    ip netns exec "$ns" ip -batch "$d/add"; sleep 4
    ip netns exec "$ns" ip -batch "$d/del"; sleep 4
done
pkill -9 -f "config $d/policy.yaml run"
sleep 3
# --print-flamegraph 0 would write a file named 0: run where it lands.
(cd "$d" && heaptrack_print -f "$OUT.zst" --print-peaks 0 --print-allocators 0 \
    --print-temporary 0 --print-leaks 1 --print-histogram 0 --print-massif 0 \
    --print-flamegraph 0 -n 16 -s 12) > "$OUT.txt" 2>/dev/null
grep -E "total memory leaked|peak heap" "$OUT.txt" || heaptrack_print -f "$OUT.zst" 2>/dev/null | grep -E "total memory leaked|peak heap"
