#!/usr/bin/env bash
# The daemon's memory across bursts of links that come and go, quickly, on
# the host's kernel in a throwaway network namespace (root; no VM): the
# release binaries given are each started in their own namespace with
# the embedded default policy (interval 1 s, recording on), then BATCHES
# times 500 veth pairs (1,000 links, none selected: no page pools) are
# added, seen for 4 s, deleted and let go for 4 s. Prints VmRSS, RssAnon
# (heap, stacks) and RssFile (the binary's pages run so far) at the start
# and after each batch; the binaries take turns, REPEATS rounds.
# benches/daemon-rss.sh is the full figure in the VM (netdevsim NICs,
# 30,000 dummy lifetimes); this one compares builds in minutes. Each
# daemon runs with the Environment= of packaging/systemd/pptune.service
# (the allocator settings it ships with), as the unit runs it; --bare
# leaves it out, as a binary started by hand runs.
#
#   benches/daemon-rss-netns.sh [--batches N] [--repeats N] [--bare] BINARY...
set -euo pipefail
BATCHES=3
REPEATS=1
UNIT_ENV=()
mapfile -t UNIT_ENV < <(sed -n 's/^Environment=//p' "$(dirname "$0")/../packaging/systemd/pptune.service")
while [ $# -gt 0 ]; do
    case "$1" in
        --batches) BATCHES="$2"; shift 2 ;;
        --repeats) REPEATS="$2"; shift 2 ;;
        --bare) UNIT_ENV=(); shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "daemon-rss-netns: name at least one pptune binary" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "daemon-rss-netns: needs root (network namespaces)" >&2; exit 2; }

one() { # BINARY
    local b=$1 ns d dpid pid
    ns="pprss$$"
    d=$(mktemp -d)
    ip netns add "$ns"
    trap 'kill "$dpid" 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; rm -rf "$d"' RETURN
    printf 'timing:\n  interval: 1s\n  window: 3s\n' > "$d/policy.yaml"
    ip netns exec "$ns" ip link set lo up
    env -u RUST_BACKTRACE RUNTIME_DIRECTORY="$d/run" STATE_DIRECTORY="$d/state" "${UNIT_ENV[@]}" \
        ip netns exec "$ns" "$b" --config "$d/policy.yaml" run >"$d/log" 2>&1 &
    dpid=$!
    sleep 4
    pid=$dpid
    for c in $(pgrep -P "$dpid" || true); do pid=$c; done
    mem() { awk '/^(VmRSS|RssAnon|RssFile):/ {printf "%s %s ", $1, $2}' "/proc/$pid/status"; }
    echo "$b start $(mem) env ${UNIT_ENV[*]:-none}"
    local i n
    for i in $(seq 500); do echo "link add d$i type veth peer name e$i"; done > "$d/add"
    for i in $(seq 500); do echo "link del d$i"; done > "$d/del"
    for n in $(seq "$BATCHES"); do
        ip netns exec "$ns" ip -batch "$d/add"; sleep 4
        ip netns exec "$ns" ip -batch "$d/del"; sleep 4
        echo "$b batch $n $(mem)"
    done
}

for _ in $(seq "$REPEATS"); do
    for b in "$@"; do one "$b"; done
done
