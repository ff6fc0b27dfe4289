#!/usr/bin/env bash
# Build the kernel's ynltool (tools/net/ynl/ynltool) from a kernel source tree
# WITHOUT writing into that tree (it is the testbed's shared cache): copies
# the few directories ynl needs to DEST and builds there, generating only the
# netdev family's C code (all ynltool uses).
# (MAINTAINERS comes along: ynl_gen_c.py finds the tree root by it and loops
# forever without it.)
#
#   benches/build-ynltool.sh <kernel source tree> <dest>
set -euo pipefail
TREE="$1"; DEST="$2"
BIN="$DEST/tools/net/ynl/ynltool/ynltool"
STAMP="$DEST/.source"
if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$TREE" ]; then
    echo "$BIN"; exit 0
fi
rm -rf "$DEST"; mkdir -p "$DEST"
(cd "$TREE" && tar cf - tools/net/ynl tools/scripts tools/include tools/arch/x86/include Documentation/netlink include/uapi Makefile MAINTAINERS) |
    tar xf - -C "$DEST"
cd "$DEST/tools/net/ynl"
make -C lib >&2
make -C generated GENS=netdev >&2
ar rcs libynl.a lib/ynl.o generated/netdev-user.o
make -C ynltool >&2
echo "$TREE" > "$STAMP"
echo "$BIN"
