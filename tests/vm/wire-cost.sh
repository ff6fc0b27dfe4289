#!/bin/bash
# Runs inside the VM: what a frame over the ppsim wire costs the guest.
#
#   tests/vm/run.sh --kernel 7.3 --icount -- tests/vm/wire-cost.sh \
#       "$(tests/ppsim/build.sh 7.3)" <target>/debug/pptraffic DURATION_MS
#
# Builds the wire by hand (A in pp-tx, B in pp-rx, B ring 256, 1 queue
# each), runs pptraffic twice (one steady stream; four streams draining in
# sync every 50 ms) for DURATION_MS each, and prints one RESULT line per run:
# frames B received, busy and total jiffies of /proc/stat (USER_HZ=100) and
# the elapsed guest time. Under --icount the busy time is guest instructions
# (1 ns each), so frames / busy seconds = frames per 10^9 instructions; two
# runs of different DURATION_MS, timed on the host, give host seconds per
# 10^9 guest instructions (docs/testbed.md "The wire").
set -euo pipefail
KO="$1"
PT="$2"
DUR="$3"
D=/sys/kernel/debug/ppsim
insmod "$KO"
echo 1 >"$D/new_device"
echo 1 >"$D/new_device"
echo "ppsim0 ppsim1" >"$D/link_wire"
ip netns add pp-tx
ip netns add pp-rx
ip link set ppsim0 netns pp-tx
ip link set ppsim1 netns pp-rx
ip -n pp-tx addr add 10.77.0.1/24 dev ppsim0
ip -n pp-rx addr add 10.77.0.2/24 dev ppsim1
for n in pp-tx pp-rx; do ip -n "$n" link set lo up; done
ip -n pp-tx link set ppsim0 up
ip -n pp-rx link set ppsim1 up
echo "clock=${PPTUNE_VM_CLOCK:-?} cpus=$(nproc)"
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
frames() { awk '{for (i = 1; i <= NF; i++) if ($i ~ /^packets=/) { split($i, a, "="); s += a[2] } } END { print s }' "$D/ppsim1/queues"; }
for spec in "steady 1" "drain 4"; do
    read -r pattern tcp <<<"$spec"
    read -r b0 t0 <<<"$(busy)"
    p0=$(frames)
    n0=$(date +%s%N)
    "$PT" --tcp "$tcp" --pattern "$pattern" --sync --pause-ms 50 --duration-ms "$DUR" \
        --port $((6000 + tcp)) | tail -n 1 | cut -c1-200
    read -r b1 t1 <<<"$(busy)"
    p1=$(frames)
    n1=$(date +%s%N)
    echo "RESULT pattern=$pattern tcp=$tcp duration_ms=$DUR frames=$((p1 - p0))" \
        "busy_jiffies=$((b1 - b0)) total_jiffies=$((t1 - t0)) elapsed_ns=$((n1 - n0))"
done
