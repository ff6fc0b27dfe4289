#!/bin/bash
# PID 1 inside the pptune test VM (see run.sh). The root filesystem is the
# host's, read-only over 9p. Sets up the pseudo filesystems, mounts the
# writable scratch share, runs the job the host wrote there, stores its exit
# status in the share and reboots (qemu runs with -no-reboot, so it exits).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t debugfs debugfs /sys/kernel/debug
# Writable places programs expect. What the job needs from below them on the
# host (a checkout under /tmp or /var/tmp) run.sh shares explicitly as
# pptune_share<N>=PATH, mounted back at the same path below. This script
# itself may live there: bash keeps reading it through its open descriptor.
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=755 tmpfs /var/tmp 2>/dev/null

# The console is a serial line: no CR insertion, so the host sees the bytes
# the job wrote.
stty -onlcr -echo </dev/console 2>/dev/null

out=""
modprobe=""
shares=()
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        pptune_out=*) out="${arg#pptune_out=}" ;;
        pptune_share[0-9]*=*) shares+=("$arg") ;;
        pptune_modprobe=*) modprobe="${arg#pptune_modprobe=}" ;;
    esac
done

finish() {
    sync
    # systemd's reboot -ff calls reboot(2) directly without a manager.
    reboot -ff 2>/dev/null
    python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0x01234567)' 2>/dev/null
    # Last resort: PID 1 exiting panics the kernel, and panic=-1 reboots.
    exit "$1"
}

if [ -z "$out" ]; then
    echo "pptune-vm: no pptune_out= on the kernel command line" >/dev/console
    finish 125
fi
for s in "${shares[@]}"; do
    tag="${s%%=*}" path="${s#*=}"
    mkdir -p "$path"
    if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro "$tag" "$path"; then
        echo "pptune-vm: cannot mount the host's $path (share $tag)" >/dev/console
        finish 125
    fi
done
mkdir -p "$out"
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 pptune_out "$out"; then
    echo "pptune-vm: cannot mount the scratch share at $out" >/dev/console
    finish 125
fi

# A packaged kernel's modules live in the kernel's cache directory, not in
# the host's /lib/modules: the kernel's usermode modprobe (module
# auto-loading) goes through kernel.sh's wrapper that points kmod there, and
# netdevsim, built in on a source-built test kernel, is loaded up front.
if [ -n "$modprobe" ]; then
    echo "$modprobe" > /proc/sys/kernel/modprobe
    if ! "$modprobe" netdevsim; then
        echo "pptune-vm: cannot load netdevsim through $modprobe" >/dev/console
        finish 125
    fi
fi

hostname pptune-vm 2>/dev/null
ip link set lo up

/bin/bash "$out/.pptune-job.sh" </dev/null >/dev/console 2>&1
rc=$?
echo "$rc" >"$out/.pptune-exit-status.tmp" && mv "$out/.pptune-exit-status.tmp" "$out/.pptune-exit-status"
finish "$rc"
