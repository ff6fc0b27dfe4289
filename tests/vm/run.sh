#!/usr/bin/env bash
# Run one command inside a pptune test VM and return its exit status.
#
#   tests/vm/run.sh [--kernel 7.3|6.12|6.1|DIR] [--timeout SECS] [--mem MB]
#                   [--smp N] [--icount] [--profile P] [--out DIR] -- CMD ARGS...
#
# Boots the cached test kernel (tests/vm/kernel.sh builds it on first use) in
# qemu TCG with the host's root filesystem read-only over 9p. CMD runs as root
# in the same working directory with PATH, HOME, RUST_*, CARGO_*, PPTUNE_* and
# a few other variables passed through, plus PPTUNE_IN_VM=1,
# PPTUNE_KERNEL=<version>, PPTUNE_KERNEL_DIR=<cached kernel dir>,
# PPTUNE_VM_CLOCK=<tcg|icount> (see --icount below) and
# PPTUNE_VM_OUT=<a writable directory shared with the host>. The share is the
# --out directory (default: a temporary directory removed afterwards) and is
# mounted at the same absolute path inside the VM.
#
# Inside the VM /tmp, /run and /var/tmp are fresh tmpfs, so host files under
# them are hidden by default. A checkout there (a first try under /tmp, a CI
# runner's /var/tmp) still works: the working directory, the repository,
# $CARGO_TARGET_DIR and the kernel directory, when under one of those, are
# shared with the guest read-only (like the root filesystem) and mounted at
# the same path over the tmpfs. Other host files under them stay hidden (use
# --out to hand files in or out).
#
# --profile prices the RX slow path as a kind of host does (docs/testbed.md
# "Host profiles"; packaged kernels only): free (the default: nothing on
# the refill path but the page allocator), distro (Debian's
# init_on_alloc=1: every page the allocator hands out is cleared), and
# iommu-strict / iommu-lazy (distro, plus a q35 machine with QEMU's
# emulated Intel IOMMU and its `edu` PCI test device, to which ppsim binds
# its pools' DMA mappings; IOTLB invalidated on every unmap, or batched by
# the flush queue), and devmem (distro, plus a q35 machine with the `edu`
# device and no IOMMU: ppsim's devmem device is its child, so a dma-buf
# bound to one of its RX queues with the netdev family's bind-rx is mapped
# for it and the queue runs the kernel's devmem memory provider; tests/ppsim/
# README.md "Devmem"). The guest sees it as PPTUNE_VM_PROFILE.
#
# Output streams to stdout as the command writes it. Exit status: the
# command's, or 124 on timeout, 125 if the VM ended without reporting one
# (crash, panic), 130/143 if the runner was interrupted. qemu never outlives
# the runner: it runs in its own session with a parent-death signal, and the
# runner kills it on exit, timeout, SIGINT and SIGTERM.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KERNEL=7.3
TIMEOUT=300
MEM=1024
# One vCPU by default. With two, ppsim's producer drains the pool ring while
# the consumer on the other vCPU is still returning a burst, so how many
# pages overflow the ring depends on host scheduling: an idle host gave a
# ring_full share of 0.21 at ring 256 where a loaded one gave 0.66-0.79, and
# the closed-loop and ppsim suites' thresholds failed. Deterministic suites
# first; `--smp 2` is there for measurements that want the second CPU.
SMP=1
CLOCK=tcg   # --icount: icount (the guest sees it as PPTUNE_VM_CLOCK)
PROFILE=free
OUTDIR=""
while [ $# -gt 0 ]; do
    case "$1" in
        --kernel) KERNEL="$2"; shift 2 ;;
        --timeout) TIMEOUT="$2"; shift 2 ;;
        --mem) MEM="$2"; shift 2 ;;
        --smp) SMP="$2"; shift 2 ;;
        --icount) CLOCK=icount; shift ;;
        --profile) PROFILE="$2"; shift 2 ;;
        --out) OUTDIR="$2"; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[ $# -gt 0 ] || die "no command given (usage: run.sh [options] -- CMD ARGS...)"
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "--timeout must be whole seconds"
case "$PROFILE" in
    free|distro|iommu-strict|iommu-lazy|devmem) ;;
    *) die "unknown --profile '$PROFILE' (free, distro, iommu-strict, iommu-lazy, devmem)" ;;
esac

if [ -d "$KERNEL" ] && [ -f "$KERNEL/bzImage" ]; then
    KDIR="$(cd "$KERNEL" && pwd)"
    KVER="$(awk '{print $1}' "$KDIR/source-version" 2>/dev/null | sed 's/^linux-source-//')"
else
    KDIR="$("$PPTUNE_VM_DIR/kernel.sh" "$KERNEL")"
    KVER="$KERNEL"
fi
command -v qemu-system-x86_64 >/dev/null || ensure_packages

CLEAN_OUT=0
if [ -z "$OUTDIR" ]; then
    OUTDIR="$(mktemp -d "${TMPDIR:-/tmp}/pptune-vm.XXXXXX")"
    CLEAN_OUT=1
fi
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
# The path travels on the kernel command line; keep it simple.
[[ "$OUTDIR" =~ ^[A-Za-z0-9_./+-]+$ ]] || die "--out path must not contain spaces or special characters: $OUTDIR"
rm -f "$OUTDIR/.pptune-exit-status" "$OUTDIR/.pptune-job.sh"

# Directories the guest's fresh tmpfs would hide but the job needs: shared
# explicitly as pptune_share<N>, mounted by init.sh at the same path. A path
# inside another shared one needs no share of its own.
SHARES=()
for p in "$PWD" "$PPTUNE_REPO" "${CARGO_TARGET_DIR:-}" "$KDIR"; do
    [ -n "$p" ] && [ -d "$p" ] || continue
    p="$(cd "$p" && pwd -P)"
    case "$p/" in
        /tmp/*|/var/tmp/*|/run/*) ;;
        *) continue ;;
    esac
    case "$p" in
        /tmp|/var/tmp|/run) die "cannot share $p itself with the VM (the guest needs its own); use a directory below it" ;;
    esac
    [[ "$p" =~ ^[A-Za-z0-9_./+-]+$ ]] \
        || die "$p is under a directory the VM replaces with tmpfs, so it must be shared with the guest, and its path travels on the kernel command line: it must not contain spaces or special characters (move the checkout, or set CARGO_TARGET_DIR elsewhere)"
    covered=0
    for i in "${!SHARES[@]}"; do
        s="${SHARES[$i]}"
        case "$p/" in "$s"/*) covered=1 ;; esac
        # A wider path replaces a narrower one already listed.
        case "$s/" in "$p"/*) SHARES[$i]="$p"; covered=1 ;; esac
    done
    [ "$covered" = 1 ] || SHARES+=("$p")
done
SHARE_ARGS=()
SHARE_CMDLINE=""
for i in "${!SHARES[@]}"; do
    SHARE_ARGS+=(-fsdev "local,id=share$i,path=${SHARES[$i]},security_model=none,readonly=on,multidevs=remap"
                 -device "virtio-9p-pci,fsdev=share$i,mount_tag=pptune_share$i")
    SHARE_CMDLINE="$SHARE_CMDLINE pptune_share$i=${SHARES[$i]}"
done

# The job: same cwd, chosen environment, the command with exact quoting.
{
    echo "cd $(printf '%q' "$PWD") || exit 125"
    for name in $(compgen -e); do
        case "$name" in
            PPTUNE_IN_VM|PPTUNE_KERNEL|PPTUNE_KERNEL_DIR|PPTUNE_VM_OUT|PPTUNE_VM_CLOCK|PPTUNE_VM_PROFILE) ;;
            PATH|HOME|USER|LOGNAME|LANG|LC_ALL|TERM|NO_COLOR|RUST_*|CARGO_*|PPTUNE_*)
                printf 'export %s=%q\n' "$name" "${!name}" ;;
        esac
    done
    printf 'export PPTUNE_IN_VM=1 PPTUNE_KERNEL=%q PPTUNE_KERNEL_DIR=%q PPTUNE_VM_OUT=%q PPTUNE_VM_CLOCK=%q PPTUNE_VM_PROFILE=%q\n' \
        "$KVER" "$KDIR" "$OUTDIR" "$CLOCK" "$PROFILE"
    printf 'exec'
    printf ' %q' "$@"
    printf '\n'
} > "$OUTDIR/.pptune-job.sh"

QPID=""
kill_qemu() {
    if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
        kill -TERM -- "-$QPID" 2>/dev/null || kill -TERM "$QPID" 2>/dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$QPID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$QPID" 2>/dev/null || kill -KILL "$QPID" 2>/dev/null || true
        wait "$QPID" 2>/dev/null || true
    fi
}
# The serial console also goes to this file, so that a guest that dies
# (oops, panic) can be reported by its first lines, not only its last ones
# (a CI log shows the tail, after the register dump).
CONSOLE_LOG="$(mktemp "${TMPDIR:-/tmp}/pptune-console.XXXXXX")"
cleanup() {
    kill_qemu
    rm -f "$CONSOLE_LOG"
    if [ "$CLEAN_OUT" = 1 ]; then rm -rf "$OUTDIR"; fi
}
trap cleanup EXIT
trap 'log "interrupted: stopping the VM"; kill_qemu; exit 130' INT
trap 'log "terminated: stopping the VM"; kill_qemu; exit 143' TERM

ROOTFLAGS="trans=virtio,version=9p2000.L,msize=262144,cache=loose"
# TCG's guest TSC runs at the host's TSC rate, but the guest cannot calibrate
# it (no ACPI, so no HPET/PM timer; PIT calibration fails on a busy host) and
# falls back to jiffies: no high-resolution timers, every short sleep becomes
# a 4 ms tick. Telling it the host's TSC rate gives it the TSC clocksource
# and the TSC-deadline APIC timer.
# --icount: the guest's clock counts its instructions (qemu -icount
# shift=0: one nanosecond per instruction, whatever the host is doing), so
# a CPU time read in the guest is an instruction count, repeatable where
# TCG's host-timed clock moved with the host's load. It needs the
# single-threaded TCG, and the TSC then ticks once per virtual ns.
TSC_ARGS=""
ACCEL="tcg,thread=multi"
ICOUNT_ARGS=()
if [ "$CLOCK" = icount ]; then
    ACCEL="tcg,thread=single"
    ICOUNT_ARGS=(-icount shift=0,sleep=on)
    TSC_ARGS="tsc_early_khz=1000000"
else
    host_mhz=$(awk -F': ' '/^cpu MHz/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
    if [[ "$host_mhz" =~ ^[0-9]+(\.[0-9]+)?$ ]] && grep -qw constant_tsc /proc/cpuinfo; then
        TSC_ARGS="tsc_early_khz=$(awk -v m="$host_mhz" 'BEGIN {printf "%d", m * 1000}')"
    fi
fi
# Without ACPI the guest finds its CPUs in SeaBIOS's MP table, which lists
# one processor per socket: a plain "-smp 2" (one socket, two cores) boots a
# single CPU. One socket per CPU gives the guest all of them (ppsim's
# consumer must run on another CPU than the producer).
if [[ "$SMP" =~ ^[0-9]+$ ]]; then
    SMP_ARGS="$SMP,sockets=$SMP,cores=1,threads=1"
else
    SMP_ARGS="$SMP"
fi
# A packaged (Debian-built) kernel boots through its initramfs, which loads
# the 9p modules and mounts the root; the guest's modprobe then reads the
# kernel's own modules tree (kernel.sh writes both).
INITRD_ARGS=()
MODPROBE_CMDLINE=""
if [ -f "$KDIR/initrd.img" ]; then
    INITRD_ARGS=(-initrd "$KDIR/initrd.img")
    MODPROBE_CMDLINE=" pptune_modprobe=$KDIR/modprobe"
    # The options that bring a distribution kernel's behaviour near the
    # source-built test kernel's (kernel.sh says which and why).
    [ -f "$KDIR/cmdline" ] && MODPROBE_CMDLINE="$MODPROBE_CMDLINE $(cat "$KDIR/cmdline")"
fi
# The host profile: the slow path's price (see --profile above). The
# packaged kernels have what it needs (ACPI, the Intel IOMMU driver, the
# init_on_alloc default); the source-built one has neither ACPI nor IOMMU.
MACHINE=pc
PROFILE_ARGS=()
if [ "$PROFILE" != free ]; then
    [ -f "$KDIR/cmdline" ] || die "--profile $PROFILE needs a packaged kernel (7.3 or 6.1): $KDIR has no ACPI or IOMMU driver"
    MODPROBE_CMDLINE="${MODPROBE_CMDLINE/ init_on_alloc=0/} init_on_alloc=1"
fi
case "$PROFILE" in
    iommu-strict|iommu-lazy)
        # The IOMMU first: devices created before it are not behind it.
        MACHINE=q35
        PROFILE_ARGS=(-device intel-iommu,intremap=off -device edu)
        strict=1
        [ "$PROFILE" = iommu-lazy ] && strict=0
        MODPROBE_CMDLINE="$MODPROBE_CMDLINE intel_iommu=on iommu.passthrough=0 iommu.strict=$strict"
        ;;
    devmem)
        # A DMA-capable PCI parent for the devmem device, without an IOMMU:
        # the provider's cost alone (the dma-buf's DMA addresses are its
        # pages' physical ones).
        MACHINE=q35
        PROFILE_ARGS=(-device edu)
        ;;
esac
setsid setpriv --pdeathsig KILL \
    qemu-system-x86_64 -accel "$ACCEL" "${ICOUNT_ARGS[@]}" -cpu max -machine "$MACHINE" \
    -m "$MEM" -smp "$SMP_ARGS" -nodefaults -display none -no-user-config \
    -chardev "stdio,id=console,logfile=$CONSOLE_LOG,logappend=off" -serial chardev:console -no-reboot \
    "${PROFILE_ARGS[@]}" \
    -kernel "$KDIR/bzImage" \
    "${INITRD_ARGS[@]}" \
    -fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=root,mount_tag=root \
    -fsdev "local,id=out,path=$OUTDIR,security_model=none,multidevs=remap" \
    -device virtio-9p-pci,fsdev=out,mount_tag=pptune_out \
    "${SHARE_ARGS[@]}" \
    -append "console=ttyS0 root=root rootfstype=9p rootflags=$ROOTFLAGS ro init=$PPTUNE_VM_DIR/init.sh quiet loglevel=4 panic=-1 tsc=reliable $TSC_ARGS pptune_out=$OUTDIR$SHARE_CMDLINE$MODPROBE_CMDLINE" \
    </dev/null &
QPID=$!

deadline=$((SECONDS + TIMEOUT))
timed_out=0
while kill -0 "$QPID" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        timed_out=1
        log "timeout after ${TIMEOUT}s: stopping the VM"
        kill_qemu
        break
    fi
    sleep 0.2
done
wait "$QPID" 2>/dev/null || true
QPID=""

if [ "$timed_out" = 1 ]; then
    exit 124
fi
if [ -f "$OUTDIR/.pptune-exit-status" ]; then
    rc="$(cat "$OUTDIR/.pptune-exit-status")"
    [[ "$rc" =~ ^[0-9]+$ ]] || die "unreadable exit status '$rc'"
    exit "$rc"
fi
log "the VM stopped without reporting an exit status (kernel panic or crash?)"
# The first report of the failure, from its headline to the end of its
# call trace (or 40 lines), on stderr where a test's failure shows it.
first=$(grep -n -m1 -E 'BUG:|Oops|general protection fault|WARNING: CPU|Kernel panic|watchdog: .*(lockup|stuck)|RIP: ' "$CONSOLE_LOG" | cut -d: -f1 || true)
if [ -n "$first" ]; then
    from=$((first > 3 ? first - 3 : 1))
    log "the guest's first failure report (console lines $from-):"
    sed -n "${from},\$p" "$CONSOLE_LOG" | tr -d '\r' | awk '{print} /---\[ end trace|Kernel panic/ {exit} NR >= 60 {exit}' >&2
fi
exit 125
