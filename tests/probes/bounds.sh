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

# ---- The second part of the round (RELIABILITY.md §7, second table). Each
# prints what it measured; the daemon runs in a network namespace of its own
# (only lo: it samples, records and answers, with nothing to tune).
if [ "$(id -u)" -ne 0 ]; then
    echo "(not root: the second part's probes need network and mount namespaces)"
    exit 0
fi
mkpolicy() { # mkpolicy FILE INTERVAL CAP
    printf 'mode: observe\ntiming:\n  interval: %s\n  window: 1s\ndaemon:\n  recording_max_bytes: %s\n  metrics_listen: null\n' "$2" "$3" > "$1"
}

# A minute of reloads, each of a changed policy, at a 128 KiB cap.
R="$W/reload"; mkdir -p "$R/run" "$R/state"
mkpolicy "$R/p.yaml" 200ms 131072
t0=$(date +%s)
RUNTIME_DIRECTORY="$R/run" STATE_DIRECTORY="$R/state" unshare -n "$BIN" --config "$R/p.yaml" run 2>"$R/log" &
pid=$!
sleep 2
n=0
while [ $(( $(date +%s) - t0 )) -lt 62 ]; do
    if [ $((n % 2)) -eq 0 ]; then mkpolicy "$R/p.yaml" 250ms 131072; else mkpolicy "$R/p.yaml" 200ms 131072; fi
    kill -HUP "$pid"; n=$((n + 1)); sleep 0.2
done
kill -TERM "$pid"; wait "$pid" || true
printf '%-58s %8s reloads %8s bytes on disk (cap 131072), %s segments\n' \
    "run: a minute of reloads at a 128 KiB recording cap" "$n" \
    "$(du -sb "$R/state/recording" | cut -f1)" "$(ls "$R/state/recording" | wc -l)"

# The recording on a full 1 MiB file system, 15 s; then replay of it.
F="$W/full"; mkdir -p "$F/run" "$F/state"
mkpolicy "$F/p.yaml" 200ms 8388608
unshare -m -n sh -c '
    mount --make-rprivate /
    mount -t tmpfs -o size=1m pptune-probe "$1/state"
    RUNTIME_DIRECTORY="$1/run" STATE_DIRECTORY="$1/state" "$2" --config "$1/p.yaml" run 2>"$1/log" &
    pid=$!
    sleep 3
    dd if=/dev/zero of="$1/state/filler" bs=4k 2>/dev/null || true
    sleep 15
    kill -TERM $pid; wait $pid
    rm -f "$1/state/filler"
    empty=0; for s in "$1"/state/recording/*.pptrec; do [ "$(stat -c %s "$s")" -le 12 ] && empty=$((empty + 1)); done
    "$2" replay "$1/state/recording" >/dev/null 2>"$1/replay.err"; code=$?
    printf "%-58s %8s segments %8s without header or Start; replay DIR exit %s\n" \
        "run: recording on a full 1 MiB file system, 15 s" "$(ls "$1/state/recording" | wc -l)" "$empty" "$code"
    sed -n 1p "$1/replay.err" | cut -c1-200 | sed "s/^/      /"
' probe "$F" "$BIN"

# Segment numbers at the end of their range.
for last in 9999999999 18446744073709551615; do
    S="$W/seq$last"; mkdir -p "$S/run" "$S/state/recording"
    mkpolicy "$S/p.yaml" 200ms 8388608
    cp "$(ls "$R"/state/recording/*.pptrec | head -n1)" "$S/state/recording/$last.pptrec"
    RUNTIME_DIRECTORY="$S/run" STATE_DIRECTORY="$S/state" timeout -s TERM 5 unshare -n "$BIN" --config "$S/p.yaml" run 2>"$S/log" || true
    printf '%-58s %s; %s log lines saying numbers are used up\n' \
        "run: a segment named $last.pptrec, 5 s" "segments after: $(ls "$S/state/recording" | tr '\n' ' ')" \
        "$(grep -c 'used up' "$S/log" || true)"
done

# restore beside a daemon that keeps its originals under another runtime
# directory (the same network namespace); a control client that half-closes.
D="$W/other"; mkdir -p "$D/run" "$D/state" "$D/elsewhere"
mkpolicy "$D/p.yaml" 200ms 0
unshare -n sh -c '
    RUNTIME_DIRECTORY="$1/run" STATE_DIRECTORY="$1/state" "$2" --config "$1/p.yaml" run 2>"$1/log" &
    pid=$!
    sleep 3
    RUNTIME_DIRECTORY="$1/elsewhere" STATE_DIRECTORY="$1/elsewhere" "$2" restore >"$1/restore.out" 2>&1; code=$?
    printf "%-58s exit %s: %s\n" "restore beside a daemon with another runtime directory" "$code" "$(head -c 120 "$1/restore.out" | tr "\n" " ")"
    python3 - "$1/run/control.sock" <<PY
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"{\"cmd\":\"restore\",\"interfaces\":[]}\n")
s.shutdown(socket.SHUT_WR)
try:
    reply = s.recv(4096).decode(errors="replace").strip() or "(none: the daemon closed)"
except socket.timeout:
    reply = "(none in 10 s)"
print("%-58s reply: %s" % ("control: a restore request, then a half-close", reply[:120]))
PY
    kill -TERM $pid; wait $pid
' probe "$D" "$BIN"

# The start-up scan of recording/: 300 segments, each a first frame that
# inflates past the 16 MiB record bound (a corrupt or planted directory),
# under a cap that keeps them all. Time from start to the "ready" line, and
# the peak RSS then.
G="$W/scan"; mkdir -p "$G/run" "$G/state/recording"
mkpolicy "$G/p.yaml" 1s 1099511627776
python3 - "$G/state/recording" <<'PY'
import struct, sys, zlib
c = zlib.compressobj(9, zlib.DEFLATED, -15)
payload = b"".join(c.compress(bytes(1 << 20)) for _ in range(17)) + c.flush()
frame = b"PPTUNREC" + struct.pack("<I", 2) + struct.pack("<II", len(payload), zlib.crc32(payload)) + payload
for n in range(1, 301):
    with open(f"{sys.argv[1]}/{n:010}.pptrec", "wb") as f:
        f.write(frame)
PY
t0=$(date +%s%N)
RUNTIME_DIRECTORY="$G/run" STATE_DIRECTORY="$G/state" unshare -n "$BIN" --config "$G/p.yaml" run 2>"$G/log" &
pid=$!
while ! grep -q '"ready"\|ready ' "$G/log" 2>/dev/null && [ $(( ($(date +%s%N) - t0) / 1000000000 )) -lt 60 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
t1=$(date +%s%N)
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo -)
kill -TERM "$pid" 2>/dev/null; wait "$pid" || true
printf '%-58s %8s s to ready %10s KiB peak\n' "run: start-up over 300 segments inflating past 16 MiB" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')" "$hwm"

# Human output of a policy with an ESC in a key; a key holding a dot.
printf 'mode: observe\n"a\033[31mb": 1\n' > "$W/esc.yaml"
"$BIN" check "$W/esc.yaml" >"$W/esc.out" 2>&1 || true
printf '%-58s %s raw ESC bytes in its output\n' "check: a policy key with an ESC in it" "$(tr -cd '\033' < "$W/esc.out" | wc -c)"
printf 'mode: observe\ntiming.interval: 5s\n' > "$W/dot.yaml"
"$BIN" check "$W/dot.yaml" >"$W/dot.out" 2>&1 || true
printf '%-58s %s\n' "check: a key 'timing.interval'" "$(grep -E '^[0-9]+ problems? found' "$W/dot.out" || echo "(no count line)")"
