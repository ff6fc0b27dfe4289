#!/usr/bin/env bash
# Build ppsim.ko against a cached pptune test kernel and print its path.
#
#   tests/ppsim/build.sh [7.3|6.12|KERNEL_DIR]      (default 7.3)
#
# The sources are copied next to the kernel (the repository stays clean) and
# the result is cached by the hash of the sources: a rebuild happens only
# when a source (SRCS) or Kbuild changes. Same compiler as the
# kernel: the host gcc for a source-built kernel; for a packaged (Debian-built)
# one, its own release's gcc and kbuild in the build root kernel.sh made.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/../vm/lib.sh"

K="${1:-7.3}"
if [ -d "$K" ] && [ -f "$K/bzImage" ]; then
    KDIR="$(cd "$K" && pwd)"
else
    KDIR="$("$HERE/../vm/kernel.sh" "$K")"
fi
[ -f "$KDIR/linux/Module.symvers" ] || [ -f "$KDIR/recipe" ] \
    || die "$KDIR has no built kernel tree and no packaged-kernel build root (run tests/vm/kernel.sh)"

SRCS=(ppsim_main.c ppsim_wire.c ppsim_dma.c ppsim.h ppsim_wire.h ppsim_personality.h Kbuild)
HASH=$(cd "$HERE" && cat "${SRCS[@]}" | sha256sum | cut -c1-12)
OUT="$KDIR/ppsim/$HASH"
if [ -f "$OUT/ppsim.ko" ]; then
    echo "$OUT/ppsim.ko"
    exit 0
fi
exec 9>"$KDIR/.ppsim-lock"
flock 9
if [ ! -f "$OUT/ppsim.ko" ]; then
    rm -rf "$OUT.tmp"
    mkdir -p "$OUT.tmp"
    (cd "$HERE" && cp "${SRCS[@]}" "$OUT.tmp/")
    log "building ppsim against $KDIR"
    if [ -f "$KDIR/recipe" ]; then
        # shellcheck disable=SC1091 # written by kernel.sh: ROOT, HEADERS
        . "$KDIR/recipe"
        rm -rf "$ROOT/build/ppsim"
        mkdir -p "$ROOT/build/ppsim"
        cp "$OUT.tmp/"* "$ROOT/build/ppsim/"
        if in_build_root "$KDIR" make -C "$HEADERS" M=/build/ppsim modules >"$OUT.tmp/build.log" 2>&1; then
            cp "$ROOT/build/ppsim/ppsim.ko" "$OUT.tmp/"
            rm -rf "$ROOT/build/ppsim"
        else
            cat "$OUT.tmp/build.log" >&2
            die "ppsim build failed against $KDIR"
        fi
    elif ! make -C "$KDIR/linux" M="$OUT.tmp" modules >"$OUT.tmp/build.log" 2>&1; then
        cat "$OUT.tmp/build.log" >&2
        die "ppsim build failed against $KDIR"
    fi
    rm -rf "$OUT"
    mv "$OUT.tmp" "$OUT"
fi
echo "$OUT/ppsim.ko"
