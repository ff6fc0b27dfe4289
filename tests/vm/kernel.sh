#!/usr/bin/env bash
# Fetch (or find in the cache) a pptune test kernel.
#
#   tests/vm/kernel.sh [7.3|6.12|6.1]      (default 7.3)
#
# Everything comes from Debian's packages through a PRIVATE apt state (the
# system's apt sources are never read or changed). Two recipes:
#
# packaged (7.3, 6.1): Debian's own built kernel (vmlinuz and modules), with
#   the two modules the testbed needs that Debian does not build -- netdevsim
#   (from linux-source-<version>'s drivers/net/netdevsim) and, later, ppsim --
#   built out of tree against linux-headers-<abi> in a build root of the
#   kernel's own Debian release (mmdebstrap: its gcc and its kbuild, which
#   need that release's glibc). Debian builds 9p as modules, so the VM boots
#   through a small initramfs (busybox) that loads them and mounts the 9p
#   root. A few minutes on a cold cache instead of a kernel build.
# source (6.12): Debian's linux-source-6.12 built from tinyconfig plus the
#   options in tests/vm/kernel.config (bzImage, modules, Module.symvers),
#   because Debian's 6.12 has no CONFIG_PAGE_POOL_STATS, which ppsim reads
#   and the 6.12 suites test (docs/testbed.md, "Kernels").
#
# The result lives in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/pptune/kernels/<version>-<key>/
# with bzImage, ./linux (source parts: the ynl CLI, the netlink specs; the
# whole configured tree for a source build) and, for a packaged kernel,
# initrd.img, ./modules and ./recipe. Prints that directory on stdout;
# everything else on stderr.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VERSION="${1:-7.3}"
case "$VERSION" in
    7.3)  SUITE=trixie-backports BASE_SUITES="trixie trixie-backports" RECIPE=packaged ;;
    6.12) SUITE=trixie BASE_SUITES="" RECIPE=source ;;
    6.1)  SUITE=bookworm BASE_SUITES="bookworm" RECIPE=packaged ;;
    *) die "unknown kernel version '$VERSION' (expected 7.3, 6.12 or 6.1)" ;;
esac

ensure_packages
mkdir -p "$PPTUNE_CACHE/kernels" "$PPTUNE_CACHE/debs"

# One build per version at a time; concurrent callers wait for it.
exec 9>"$PPTUNE_CACHE/kernels/.lock-$VERSION"
flock 9

# --- private apt state: resolve and download linux-source-<version> ---------
debian_uri() {
    local uri=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

APT_DIR="$PPTUNE_CACHE/apt/$SUITE"
mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/parts" "$APT_DIR/cache/archives/partial"
cat > "$APT_DIR/parts/pptune.sources" <<SRC
Types: deb
URIs: $(debian_uri)
Suites: $SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
APT=(apt-get -q
     -o "Dir::Etc::sourcelist=/dev/null"
     -o "Dir::Etc::sourceparts=$APT_DIR/parts"
     -o "Dir::State::Lists=$APT_DIR/lists"
     -o "Dir::Cache=$APT_DIR/cache"
     -o "Debug::NoLocking=1"
     -o "APT::Sandbox::User=root")
PKG="linux-source-$VERSION"

# Reuse an already downloaded .deb if there is one (offline warm cache); the
# lists are refreshed only when no .deb is present.
DEB=$(ls -1 "$PPTUNE_CACHE/debs/${PKG}_"*.deb 2>/dev/null | sort -V | tail -n1 || true)
if [ -z "$DEB" ]; then
    log "fetching $PKG from $SUITE (private apt state in $APT_DIR)"
    "${APT[@]}" update >&2 || die "apt-get update for $SUITE failed"
    (cd "$PPTUNE_CACHE/debs" && "${APT[@]}" download "$PKG" >&2) || die "apt-get download $PKG failed"
    DEB=$(ls -1 "$PPTUNE_CACHE/debs/${PKG}_"*.deb 2>/dev/null | sort -V | tail -n1 || true)
    [ -n "$DEB" ] || die "no $PKG .deb after download"
fi
SRC_VERSION=$(dpkg-deb -f "$DEB" Version)

# The cache directory's life, the same for both recipes:
# use_cached OUT FILE prints OUT and ends here when OUT is complete (.done,
# bzImage and FILE); begin_build OUT WHAT starts it afresh with its
# build.log (LOG); fail_build STEP ends with the log's tail; end_build WHAT
# marks it complete and prints it.
use_cached() {
    if [ -f "$1/.done" ] && [ -f "$1/bzImage" ] && [ -f "$1/$2" ]; then
        echo "$1"
        exit 0
    fi
}
begin_build() {
    OUT="$1"
    log "$2 into $OUT (log: $OUT/build.log)"
    START=$(date +%s)
    rm -rf "$OUT"
    mkdir -p "$OUT"
    LOG="$OUT/build.log"
    : > "$LOG"
}
fail_build() {
    log "failed: $1; last lines of $LOG:"
    tail -n 40 "$LOG" >&2 || true
    exit 1
}
end_build() {
    local end
    end=$(date +%s)
    echo "$PKG $SRC_VERSION" > "$OUT/source-version"
    echo "$((end - START))" > "$OUT/build-seconds"
    touch "$OUT/.done"
    log "$1 in $((end - START)) s"
    echo "$OUT"
    exit 0
}

# --- packaged: Debian's built kernel, plus netdevsim built against it ------
if [ "$RECIPE" = packaged ]; then
    # The key: the source version and the recipe itself (this script, the
    # initramfs init), so a changed recipe sets the kernel up anew.
    KEY=$( { echo "packaged $PKG $SRC_VERSION"; cat "$PPTUNE_VM_DIR/kernel.sh" "$PPTUNE_VM_DIR/initramfs-init.sh"; } \
           | sha256sum | cut -c1-12)
    use_cached "$PPTUNE_CACHE/kernels/$VERSION-$KEY" initrd.img
    [ "$(id -u)" -eq 0 ] || die "setting up the packaged $VERSION kernel needs root (mmdebstrap and chroot for the module build root)"
    command -v mmdebstrap >/dev/null || die "mmdebstrap not found"
    begin_build "$PPTUNE_CACHE/kernels/$VERSION-$KEY" "setting up Debian's $VERSION kernel ($SRC_VERSION)"

    # The binary packages built from the same source version. 7.3 splits
    # the image into linux-binary/-modules/-base; 6.1 has one linux-image.
    "${APT[@]}" update >>"$LOG" 2>&1 || fail_build "apt-get update for $SUITE"
    APTC=(apt-cache "${APT[@]:2}")
    ABI=""
    for p in $("${APTC[@]}" search --names-only "^linux-headers-${VERSION//./\\.}[.0-9]*[-+].*-amd64\$" | awk '{print $1}'); do
        case "$p" in *-rt-amd64|*-cloud-amd64) continue ;; esac
        if "${APTC[@]}" show "$p" 2>/dev/null | awk '/^Version:/ {print $2}' | grep -qxF "$SRC_VERSION"; then
            ABI="${p#linux-headers-}"
            ABI="${ABI%-amd64}"
            break
        fi
    done
    [ -n "$ABI" ] || fail_build "no linux-headers-*-amd64 of version $SRC_VERSION in $SUITE"
    KVER="$ABI-amd64"
    if "${APTC[@]}" show "linux-binary-$KVER" >/dev/null 2>&1; then
        IMAGE=("linux-binary-$KVER" "linux-modules-$KVER" "linux-base-$KVER")
    else
        IMAGE=("linux-image-$KVER")
    fi
    mkdir -p "$OUT/debs"
    (cd "$OUT/debs" && "${APT[@]}" download "${IMAGE[@]}" >>"$LOG" 2>&1) \
        || fail_build "apt-get download ${IMAGE[*]}"
    mkdir -p "$OUT/unpack"
    for d in "$OUT"/debs/*.deb; do
        dpkg-deb -x "$d" "$OUT/unpack" || fail_build "dpkg-deb -x $d"
    done
    rm -rf "$OUT/debs"
    MODDIR=""
    for m in "$OUT/unpack/usr/lib/modules/$KVER" "$OUT/unpack/lib/modules/$KVER"; do
        [ -d "$m/kernel" ] && MODDIR="$m"
    done
    [ -n "$MODDIR" ] || fail_build "no modules for $KVER in ${IMAGE[*]}"
    VMLINUZ=""
    for v in "$MODDIR/vmlinuz" "$OUT/unpack/boot/vmlinuz-$KVER"; do
        [ -f "$v" ] && VMLINUZ="$v"
    done
    [ -n "$VMLINUZ" ] || fail_build "no vmlinuz for $KVER in ${IMAGE[*]}"
    cp "$VMLINUZ" "$OUT/bzImage"
    mkdir -p "$OUT/modules/lib/modules"
    mv "$MODDIR" "$OUT/modules/lib/modules/$KVER"
    rm -rf "$OUT/unpack"

    # From the source: netdevsim (Debian does not build it), and the parts
    # of the tree the VM suites and benches read (the ynl CLI and ynltool,
    # the netlink specs, the uapi headers).
    PARTS=(drivers/net/netdevsim)
    # 6.1 has no netdev family and no ynl.
    [ "$VERSION" = 6.1 ] || PARTS+=(tools/net/ynl tools/scripts tools/include tools/arch/x86/include
                                    Documentation/netlink include/uapi Makefile MAINTAINERS)
    log "unpacking ${PARTS[*]} from $PKG"
    members=()
    for p in "${PARTS[@]}"; do members+=("$PKG/$p"); done
    dpkg-deb --fsys-tarfile "$DEB" | tar -xO "./usr/src/$PKG.tar.xz" | xz -dc -T0 \
        | tar -x -C "$OUT" "${members[@]}" 2>>"$LOG" || fail_build "unpacking ${PARTS[*]} from $DEB"
    mv "$OUT/$PKG" "$OUT/linux"

    # The build root: the kernel's own Debian release with its gcc and the
    # matching headers and kbuild (whose host tools need that glibc).
    ROOT="$OUT/root"
    log "build root for $KVER (mmdebstrap ${BASE_SUITES// /, })"
    sources=()
    for s in $BASE_SUITES; do sources+=("deb $(debian_uri) $s main"); done
    mmdebstrap --variant=apt --mode=root --quiet \
        --aptopt='APT::Install-Recommends "false"' \
        --include="make,binutils,libc6-dev,linux-headers-$KVER" \
        "${BASE_SUITES%% *}" "$ROOT" "${sources[@]}" >>"$LOG" 2>&1 || fail_build "mmdebstrap"
    HEADERS="/usr/src/linux-headers-$KVER"
    [ -f "$ROOT$HEADERS/Module.symvers" ] || fail_build "no $HEADERS/Module.symvers in the build root"
    printf 'ROOT=%q\nHEADERS=%q\nKVER=%q\n' "$ROOT" "$HEADERS" "$KVER" > "$OUT/recipe"

    # netdevsim, out of tree, into the modules tree.
    mkdir -p "$ROOT/build/netdevsim"
    cp "$OUT/linux/drivers/net/netdevsim/"* "$ROOT/build/netdevsim/"
    in_build_root "$OUT" make -C "$HEADERS" M=/build/netdevsim CONFIG_NETDEVSIM=m -j"$(nproc)" modules \
        >>"$LOG" 2>&1 || fail_build "building netdevsim against $KVER"
    mkdir -p "$OUT/modules/lib/modules/$KVER/extra"
    cp "$ROOT/build/netdevsim/netdevsim.ko" "$OUT/modules/lib/modules/$KVER/extra/"
    rm -rf "$ROOT/build/netdevsim"
    depmod -b "$OUT/modules" "$KVER" >>"$LOG" 2>&1 || fail_build "depmod"
    # The guest's modprobe (init.sh sets it as the kernel's usermode
    # modprobe): the host's kmod, pointed at this modules tree.
    printf '#!/bin/sh\nexec /sbin/modprobe -d %q "$@"\n' "$OUT/modules" > "$OUT/modprobe"
    chmod 755 "$OUT/modprobe"

    # The initramfs: static busybox, the 9p root's modules, the init.
    log "initramfs"
    IR="$OUT/initramfs"
    mkdir -p "$IR/bin" "$IR/lib" "$IR/proc" "$IR/dev" "$IR/newroot"
    cp /bin/busybox "$IR/bin/busybox"
    for t in sh mount umount insmod switch_root mkdir cat reboot usleep; do ln -s busybox "$IR/bin/$t"; done
    mknod "$IR/dev/console" c 5 1
    cp "$PPTUNE_VM_DIR/initramfs-init.sh" "$IR/init"
    chmod 755 "$IR/init"
    : > "$IR/modules.order"
    # virtio_pci is built in on 7.3 (modprobe says "builtin", skipped) and
    # a module on 6.1.
    for m in virtio_pci 9p 9pnet_virtio; do
        modprobe -d "$OUT/modules" -S "$KVER" --show-depends "$m" 2>>"$LOG" | awk '$1 == "insmod" {print $2}'
    done | awk '!seen[$0]++' | while read -r ko; do
        name="$(basename "$ko")"
        case "$name" in
            *.ko.xz) xz -dc "$ko" > "$IR/lib/${name%.xz}"; name="${name%.xz}" ;;
            *.ko.zst) zstd -qdc "$ko" > "$IR/lib/${name%.zst}"; name="${name%.zst}" ;;
            *.ko) cp "$ko" "$IR/lib/$name" ;;
            *) fail_build "unknown module file $ko" ;;
        esac
        echo "$name" >> "$IR/modules.order"
    done
    grep -q '^9p\.ko$' "$IR/modules.order" || fail_build "9p.ko not found for the initramfs (modules.order: $(tr '\n' ' ' < "$IR/modules.order"))"
    (cd "$IR" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) > "$OUT/initrd.img" \
        || fail_build "cpio"
    rm -rf "$IR"

    # Boot options (run.sh appends them) that take out what a distribution
    # kernel adds and the tinyconfig test kernel does not have, where it
    # changes the suites' timing under TCG: init_on_alloc zeroes every page
    # ppsim allocates (at 16 queues its paced model fell 5 s behind, 30 ms
    # without it), the mitigations, full preemption, kfence sampling, the
    # random kernel stack offset and page-allocator shuffling.
    echo "mitigations=off preempt=none init_on_alloc=0 kfence.sample_interval=0 randomize_kstack_offset=off page_alloc.shuffle=0" \
        > "$OUT/cmdline"
    end_build "Debian's $KVER set up"
fi

# --- source: build a minimal kernel ----------------------------------------
# --- cache key
KEY=$( { cat "$PPTUNE_VM_DIR/kernel.config"; echo "$PKG $SRC_VERSION"; gcc --version | head -n1; echo "recipe 1"; } \
       | sha256sum | cut -c1-12)
use_cached "$PPTUNE_CACHE/kernels/$VERSION-$KEY" linux/Module.symvers
begin_build "$PPTUNE_CACHE/kernels/$VERSION-$KEY" "building $PKG $SRC_VERSION"

# --- unpack -----------------------------------------------------------------
TMP="$OUT/unpack"
mkdir -p "$TMP"
dpkg-deb -x "$DEB" "$TMP" || die "dpkg-deb -x $DEB failed"
TARBALL=$(ls -1 "$TMP"/usr/src/linux-source-*.tar.* | head -n1)
[ -n "$TARBALL" ] || die "no source tarball in $DEB"
tar -C "$OUT" -xf "$TARBALL" || die "unpacking $TARBALL failed"
rm -rf "$TMP"
mv "$OUT"/linux-source-* "$OUT/linux"
cd "$OUT/linux"

# --- configure --------------------------------------------------------------
OPTS=$(sed 's/#.*//' "$PPTUNE_VM_DIR/kernel.config" | tr -s ' \n\t' '\n' | grep -v '^$')
make tinyconfig >>"$LOG" 2>&1 || fail_build "make tinyconfig"
args=()
for o in $OPTS; do args+=(-e "$o"); done
scripts/config "${args[@]}"
make olddefconfig >>"$LOG" 2>&1 || fail_build "make olddefconfig"

# Every requested option that this source defines must be =y. Options this
# version does not define are reported, not fatal (e.g. a later rename).
DEFINED=$(find . -name 'Kconfig*' -not -path './tools/*' -print0 \
          | xargs -0 grep -hoE '^[[:space:]]*(menu)?config[[:space:]]+[A-Za-z0-9_]+' \
          | awk '{print $2}' | sort -u)
bad=()
for o in $OPTS; do
    if ! grep -qx "$o" <<<"$DEFINED"; then
        log "note: $PKG does not define CONFIG_$o (skipped)"
        continue
    fi
    grep -qx "CONFIG_$o=y" .config || bad+=("CONFIG_$o")
done
# These are the reason the kernel exists; insist on them by name.
for o in NETDEVSIM VETH PAGE_POOL NET_9P_VIRTIO 9P_FS MODULES DEBUG_FS; do
    grep -qx "CONFIG_$o=y" .config || bad+=("CONFIG_$o")
done
if grep -qx PAGE_POOL_STATS <<<"$DEFINED"; then
    grep -qx CONFIG_PAGE_POOL_STATS=y .config || bad+=(CONFIG_PAGE_POOL_STATS)
fi
if [ ${#bad[@]} -gt 0 ]; then
    die "$PKG: .config lacks required options after olddefconfig: $(printf '%s\n' "${bad[@]}" | sort -u | tr '\n' ' ')(a dependency is missing; see $OUT/linux/.config)"
fi

# --- build ------------------------------------------------------------------
JOBS=$(nproc)
make -j"$JOBS" bzImage >>"$LOG" 2>&1 || fail_build "make bzImage"
make -j"$JOBS" modules >>"$LOG" 2>&1 || fail_build "make modules"
[ -f Module.symvers ] || fail_build "no Module.symvers after make modules"
cp arch/x86/boot/bzImage "$OUT/bzImage"
end_build "built $PKG $SRC_VERSION"
