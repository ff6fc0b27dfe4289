#!/usr/bin/env bash
# What a page costs on each page_pool path, per host profile (docs/testbed.md
# "Host profiles"): ppsim's calibrate on a pool made as an RX queue's, in
# guest instructions (7.3 under --icount: one guest nanosecond is one
# instruction, whatever the host is doing).
#
#   benches/slowpath-cost.sh [--boots N] [PROFILE...]
#        (default: 3 boots of each of free, distro, iommu-strict, iommu-lazy)
#
# Each boot reads calibrate twice (7 rounds of 1,024 pages each: the
# figures are medians over the rounds); the boots of the profiles are
# interleaved. Results: benches/results/slowpath-cost.jsonl (one line per
# read) and a table on stdout: per profile the median over every read and
# the range, a recycled page (put into the ring + taken back) against a
# recycle miss (freed past a full ring + taken again by the slow path).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
BOOTS=3
if [ "${1:-}" = --boots ]; then BOOTS="$2"; shift 2; fi
PROFILES=("$@")
[ ${#PROFILES[@]} -gt 0 ] || PROFILES=(free distro iommu-strict iommu-lazy)
KO="$(tests/ppsim/build.sh 7.3)"
OUT="$REPO/benches/results/slowpath-cost.jsonl"
GIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- tests/ppsim || echo +dirty)"
: > "$OUT.tmp"
for ((b = 1; b <= BOOTS; b++)); do
    for p in "${PROFILES[@]}"; do
        echo "[slowpath-cost] boot $b/$BOOTS: $p" >&2
        tests/vm/run.sh --kernel 7.3 --icount --profile "$p" --timeout 600 -- sh -c \
            "insmod '$KO' && for i in 1 2; do echo CAL \$(cat /sys/kernel/debug/ppsim/calibrate); done" \
            | tr -d '\r' | awk -v p="$p" -v b="$b" -v g="$GIT" '$1 == "CAL" {
                printf "{\"profile\": \"%s\", \"boot\": %d, \"git\": \"%s\"", p, b, g
                for (i = 2; i <= NF; i++) { split($i, kv, "="); printf ", \"%s\": %s", kv[1], kv[2] }
                print "}" }' >> "$OUT.tmp"
    done
done
mv "$OUT.tmp" "$OUT"
python3 - "$OUT" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
order = []
for r in rows:
    if r["profile"] not in order:
        order.append(r["profile"])
def fig(rs, k):
    v = sorted(r[k] for r in rs)
    return statistics.median(v), v[0], v[-1]
print(f"slow-path cost per page, guest instructions (--icount), {sys.argv[1]}, commit {rows[0]['git']}")
print()
print("| profile | reads | recycled (put + get) | freed past a full ring | slow-path refill | miss − recycled | dirty refills | mapped |")
print("|---|---|---|---|---|---|---|---|")
for p in order:
    rs = [r for r in rows if r["profile"] == p]
    rec = sorted(r["put_ring_ns"] + r["get_ring_ns"] for r in rs)
    miss = sorted(r["release_ns"] + r["slow_ns"] - r["put_ring_ns"] - r["get_ring_ns"] for r in rs)
    cell = lambda t: f"{t[0]:.0f} ({t[1]}–{t[2]})"
    rel, slow = fig(rs, "release_ns"), fig(rs, "slow_ns")
    dirty = sum(r["dirty_refills"] for r in rs); checked = sum(r["checked_refills"] for r in rs)
    mapped = sum(r["mapped"] for r in rs); pages = sum(r["slow_pages"] for r in rs)
    print(f"| {p} | {len(rs)} | {cell((statistics.median(rec), rec[0], rec[-1]))} | {cell(rel)} | {cell(slow)} "
          f"| {cell((statistics.median(miss), miss[0], miss[-1]))} | {dirty}/{checked} | {mapped}/{pages} |")
EOF
