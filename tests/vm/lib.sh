# Shared helpers for the pptune VM testbed scripts (sourced, not run).
# shellcheck shell=bash

PPTUNE_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/pptune"
PPTUNE_VM_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PPTUNE_REPO="$(cd "$PPTUNE_VM_DIR/../.." && pwd)"

log() { printf '[testbed] %s\n' "$*" >&2; }
die() { printf '[testbed] error: %s\n' "$*" >&2; exit 1; }

# Install the host packages the testbed needs when they are missing.
# Only root can install; otherwise name what is missing and fail.
ensure_packages() {
    local missing=() pkg
    command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
    command -v flex >/dev/null || missing+=(flex)
    command -v bison >/dev/null || missing+=(bison)
    command -v bc >/dev/null || missing+=(bc)
    [ -e /usr/include/gelf.h ] || missing+=(libelf-dev)
    command -v cpio >/dev/null || missing+=(cpio)
    { command -v insmod >/dev/null && command -v depmod >/dev/null; } || missing+=(kmod)
    command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
    # The packaged kernels' initramfs runs /bin/busybox: the static build.
    dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
    { command -v gcc >/dev/null && command -v make >/dev/null; } || missing+=(build-essential)
    command -v ethtool >/dev/null || missing+=(ethtool)
    command -v ip >/dev/null || missing+=(iproute2)
    command -v xz >/dev/null || missing+=(xz-utils)
    command -v python3 >/dev/null || missing+=(python3)
    python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
    [ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
    command -v flock >/dev/null || missing+=(util-linux)
    command -v setsid >/dev/null || missing+=(util-linux)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        die "missing packages: ${missing[*]} (run as root, or install them: apt-get install ${missing[*]})"
    fi
    log "installing missing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
        || die "apt-get install ${missing[*]} failed"
}

# in_build_root KDIR CMD ARGS...: runs CMD in the module build root of a
# packaged test kernel (KDIR/recipe names it: the kernel's own Debian
# release with its gcc, headers and kbuild), with /proc mounted in a private
# mount namespace that ends with the command. Root only.
in_build_root() {
    local kdir="$1" ROOT="" HEADERS="" KVER=""
    shift
    # shellcheck disable=SC1091 # written by kernel.sh
    . "$kdir/recipe"
    [ -d "$ROOT" ] || die "$kdir/recipe: no build root at $ROOT"
    unshare --mount --propagation private -- sh -c \
        'r="$1"; shift; mount -t proc proc "$r/proc" && exec chroot "$r" "$@"' sh "$ROOT" "$@"
}
