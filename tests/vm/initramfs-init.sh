#!/bin/sh
# PID 1 of the initramfs that tests/vm/kernel.sh builds for a packaged
# (Debian-built) test kernel. Debian builds 9p (and on 6.1 virtio_pci) as
# modules, so the kernel cannot mount run.sh's 9p root by itself: this loads
# the modules listed in /modules.order (dependencies first, as modprobe
# --show-depends gave them), mounts the root that run.sh names on the kernel
# command line (root=, rootflags=) read-only at /newroot, and hands PID 1 to
# the command line's init= (tests/vm/init.sh). Runs under busybox.
export PATH=/bin

fail() {
    echo "pptune-initramfs: $*" >/dev/console
    # qemu runs with -no-reboot: a reboot ends it, and run.sh reports 125.
    reboot -f
    exit 1
}

mount -t proc proc /proc || fail "cannot mount /proc"
while read -r m; do
    insmod "/lib/$m" || fail "insmod $m failed"
done </modules.order

root="" flags="" init=""
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        root=*) root="${arg#root=}" ;;
        rootflags=*) flags="${arg#rootflags=}" ;;
        init=*) init="${arg#init=}" ;;
    esac
done
[ -n "$root" ] && [ -n "$init" ] || fail "no root= or init= on the kernel command line"
mkdir -p /newroot
# A virtio_pci loaded as a module probes its devices asynchronously: the 9p
# channel may appear a moment after insmod returns. Up to 10 s.
tries=0
until mount -t 9p -o "ro,$flags" "$root" /newroot 2>/dev/null; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || fail "cannot mount the 9p root '$root'"
    usleep 100000
done
umount /proc
exec switch_root /newroot "$init"
