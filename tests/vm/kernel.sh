#!/usr/bin/env bash
# Build (or find in the cache) a pptune test kernel.
#
#   tests/vm/kernel.sh [7.3|6.12|6.1]      (default 7.3)
#
# Fetches Debian's linux-source-<version> through a PRIVATE apt state (the
# system's apt sources are never read or changed), builds tinyconfig plus the
# options in tests/vm/kernel.config, checks the resulting .config, and builds
# bzImage and modules (Module.symvers, so out-of-tree modules like ppsim link).
# The result lives in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/pptune/kernels/<version>-<key>/
# with the configured source tree kept in ./linux (ppsim builds against it).
# The key hashes the config fragment, the exact Debian source version and the
# compiler version. Prints that directory on stdout; everything else on stderr.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VERSION="${1:-7.3}"
case "$VERSION" in
    7.3)  SUITE=trixie-backports ;;
    6.12) SUITE=trixie ;;
    6.1)  SUITE=bookworm ;;
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

# --- cache key --------------------------------------------------------------
KEY=$( { cat "$PPTUNE_VM_DIR/kernel.config"; echo "$PKG $SRC_VERSION"; gcc --version | head -n1; echo "recipe 1"; } \
       | sha256sum | cut -c1-12)
OUT="$PPTUNE_CACHE/kernels/$VERSION-$KEY"
if [ -f "$OUT/.done" ] && [ -f "$OUT/bzImage" ] && [ -f "$OUT/linux/Module.symvers" ]; then
    echo "$OUT"
    exit 0
fi

log "building $PKG $SRC_VERSION into $OUT (log: $OUT/build.log)"
START=$(date +%s)
rm -rf "$OUT"
mkdir -p "$OUT"
LOG="$OUT/build.log"
: > "$LOG"

fail_build() {
    log "build failed: $1; last lines of $LOG:"
    tail -n 40 "$LOG" >&2 || true
    exit 1
}

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
echo "$PKG $SRC_VERSION" > "$OUT/source-version"
END=$(date +%s)
echo "$((END - START))" > "$OUT/build-seconds"
touch "$OUT/.done"
log "built $PKG $SRC_VERSION in $((END - START)) s"
echo "$OUT"
