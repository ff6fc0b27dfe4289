#!/usr/bin/env bash
# Capture page-pool fixtures from a kernel with netdevsim and
# CONFIG_PAGE_POOL_STATS, inside the VM testbed (never on a host):
#
#   cargo build -p pptune-netlink --example capture
#   tests/vm/run.sh --kernel 7.3 --out /tmp/ppcap -- \
#       netlink/examples/capture-vm.sh "$CARGO_TARGET_DIR/debug/examples/capture" /tmp/ppcap
#
# States captured: live pools after `ip link set up`; a detached pool
# (netdevsim's debugfs pp_hold keeps one page out across `down`, so the
# pool gets detach-time); its add/change/del notifications; an orphaned
# pool (page still held when the device is deleted: no ifindex).
set -euo pipefail
BIN=$1
OUT=$2
P=vm-${PPTUNE_KERNEL:-7.3}-nsim-
mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
modprobe netdevsim 2>/dev/null || true
ip link set lo up
echo "1 1 4" > /sys/bus/netdevsim/new_device
for _ in $(seq 50); do
    [ -d /sys/bus/netdevsim/devices/netdevsim1/net ] && break
    sleep 0.1
done
IF=$(ls /sys/bus/netdevsim/devices/netdevsim1/net/)
HOLD=/sys/kernel/debug/netdevsim/netdevsim1/ports/0/pp_hold
echo "netdevsim port: $IF"

"$BIN" "$OUT" - "$P" watch 5 &
W=$!
sleep 1
ip link set "$IF" up
sleep 0.3
echo y > "$HOLD"
ip link set "$IF" down   # the pool with the held page is detached
sleep 0.3
ip link set "$IF" up
wait "$W"

"$BIN" "$OUT" "$IF" "$P"   # live pools + the detached one, rings, channels …

echo n > "$HOLD"          # release: the detached pool is freed (del-ntf)
sleep 2
echo y > "$HOLD"
echo 1 > /sys/bus/netdevsim/del_device   # page still held: orphaned pool
sleep 0.5
"$BIN" "$OUT" - "${P}orphan-"
ls -l "$OUT"
