#!/usr/bin/env bash
# The inputs of issue 32's size and file-type classes, planted for the real
# binary, each measured with /usr/bin/time: wall time, peak RSS and exit
# code (RELIABILITY.md §7 quotes this script's output).
#
#   tests/probes/bounds.sh [PPTUNE]     (default: target/release/pptune,
#                                        built if missing)
#
# Needs root for the probes that run a command reading the kernel (in a
# throwaway network namespace, `unshare -n`); writes only under a temporary
# directory. Each probe has a 60 s limit (timeout exits 124).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${1:-target/release/pptune}"
if [ ! -x "$BIN" ]; then
    cargo build --release --locked -p pptune --bin pptune >&2
fi
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
W="$(mktemp -d "${TMPDIR:-/tmp}/pptune-probe.XXXXXX")"
trap 'rm -rf "$W"' EXIT

# probe NAME CMD...: one line: name, seconds, peak RSS (KiB), exit code.
probe() {
    local name="$1" out
    shift
    out="$W/time.$$"
    /usr/bin/time -o "$out" -f '%e %M %x' timeout 60 "$@" >"$W/stdout" 2>"$W/stderr" || true
    # timeout's own status when it killed the command.
    read -r secs rss code < <(tail -n1 "$out" | sed 's/Command exited with non-zero status //; s/Command terminated by signal .*/- - signal/')
    printf '%-58s %8s s %10s KiB  exit %s\n' "$name" "$secs" "$rss" "$code"
    sed -n '1,2p' "$W/stderr" | cut -c1-200 | sed 's/^/      /'
}

# Recording segments, built with Python's zlib (raw deflate) and CRC-32.
python3 - "$W" <<'PY'
import struct, sys, zlib
w = sys.argv[1]
head = b"PPTUNREC" + struct.pack("<I", 2)
# 1. A frame of about 1 MB with a correct CRC that inflates to about 1 GB.
c = zlib.compressobj(9, zlib.DEFLATED, -15)
chunk = bytes(1 << 20)
payload = b"".join(c.compress(chunk) for _ in range(1024)) + c.flush()
with open(f"{w}/inflate.pptrec", "wb") as f:
    f.write(head + struct.pack("<II", len(payload), zlib.crc32(payload)) + payload)
# 2. A frame header claiming 255 MiB in a 922-byte file.
with open(f"{w}/longframe.pptrec", "wb") as f:
    f.write(head + struct.pack("<II", 255 << 20, 0) + bytes(922 - 20))
PY
mkdir -p "$W/fifo-rec"
mkfifo "$W/fifo-rec/00000001.pptrec"

# 2,000 sparse drop-ins of 1 MiB each.
mkdir -p "$W/etc/policy.d"
for i in $(seq -w 0 1999); do truncate -s 1M "$W/etc/policy.d/$i.yaml"; done

# A 1.5 GiB state record and change journal; a FIFO as the state record.
mkdir -p "$W/big" "$W/fifo"
truncate -s 1536M "$W/big/state.json" "$W/big/changes.jsonl"
mkfifo "$W/fifo/state.json" "$W/fifo/changes.jsonl"

echo "pptune $("$BIN" --version | head -n1); $(date -u +%Y-%m-%dT%H:%MZ)"
probe "replay: 1 MB frame inflating to 1 GiB" "$BIN" replay "$W/inflate.pptrec"
probe "replay: 255 MiB frame length in a 922-byte file" "$BIN" replay "$W/longframe.pptrec"
probe "replay: a FIFO named like a segment" "$BIN" replay "$W/fifo-rec"
probe "check: 2,000 sparse 1 MiB drop-ins" "$BIN" --config "$W/etc" check
probe "history: 1.5 GiB changes.jsonl" env STATE_DIRECTORY="$W/big" "$BIN" history
probe "history: a FIFO as changes.jsonl" env STATE_DIRECTORY="$W/fifo" "$BIN" history
if [ "$(id -u)" -eq 0 ]; then
    probe "verify (netns): 1.5 GiB state.json" env RUNTIME_DIRECTORY="$W/big" unshare -n "$BIN" verify
    probe "verify (netns): a FIFO as state.json" env RUNTIME_DIRECTORY="$W/fifo" unshare -n "$BIN" verify
    probe "restore (netns): a FIFO as state.json" env RUNTIME_DIRECTORY="$W/fifo" unshare -n "$BIN" restore
else
    echo "(not root: the verify and restore probes need a network namespace)"
fi
