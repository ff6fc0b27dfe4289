#!/usr/bin/env bash
# Unauthenticated work on the real daemon (RELIABILITY.md §8, class 5):
# `pptune run` in a throwaway network namespace with a 1 s interval and
# basic auth (a cost-10 hash), 3,000 requests with wrong passwords, 200 at
# once; prints the daemon's most threads and RSS, its CPU over the flood,
# the oldest last-sample age `status --json` showed, and the answers.
#
#   tests/probes/auth-flood.sh [PPTUNE]   (default: target/debug/pptune)
#
# Root (the namespace); writes only under a temporary directory.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN="${1:-target/debug/pptune}"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
D="$(mktemp -d "${TMPDIR:-/tmp}/pptune-flood.XXXXXX")"
HASH='$2y$10$X0nJbOdcD2OBnL0cGLx5cuHs7nYQnPZo7R2zb3mShVbDl.VHWsPKW'
printf "basic_auth_users:\n  prom: '%s'\n" "$HASH" >"$D/web.yml"
chmod 600 "$D/web.yml"
printf 'mode: observe\ntiming:\n  interval: 1s\ndaemon:\n  metrics_listen: 127.0.0.1:9864\n  metrics_web_config: %s/web.yml\n' "$D" >"$D/p.yaml"
RUNTIME_DIRECTORY=$D STATE_DIRECTORY=$D unshare -n sh -c \
    'ip link set lo up; ip link add ppt0 type veth peer name ppt1; exec "$0" --config "$1" run --log-format json' \
    "$BIN" "$D/p.yaml" 2>"$D/log" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf "$D"' EXIT
sleep 3
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
c0=$(cpu)
t0=$(date +%s.%N)
nsenter -t $PID -n sh -c 'seq 3000 | xargs -P 200 -I{} curl -s -o /dev/null -w "%{http_code}\n" -m 20 -u prom:wrong{} http://127.0.0.1:9864/metrics' >"$D/codes" &
FL=$!
maxthr=0 maxage=0 maxrss=0
while kill -0 $FL 2>/dev/null; do
    thr=$(awk '/^Threads/{print $2}' "/proc/$PID/status")
    rss=$(awk '/^VmRSS/{print $2}' "/proc/$PID/status")
    age=$(RUNTIME_DIRECTORY=$D nsenter -t $PID -n "$BIN" status --json 2>/dev/null |
        python3 -c 'import sys, json; print(json.load(sys.stdin)["daemon"]["last_sample_age_s"])' 2>/dev/null || echo 0)
    ((thr > maxthr)) && maxthr=$thr
    ((rss > maxrss)) && maxrss=$rss
    ((age > maxage)) && maxage=$age
    sleep 0.5
done
c1=$(cpu)
t1=$(date +%s.%N)
echo "threads max $maxthr, CPU $(((c1 - c0) / 100)).$(printf %02d $(((c1 - c0) % 100))) s over $(echo "$t1 - $t0" | bc) s, RSS max $maxrss KiB, last sample age max $maxage s"
sort "$D/codes" | uniq -c
