# Shared by the bench scripts (sourced; bench_build and bench_exe need
# CARGO_TARGET_DIR, the nsim_* functions run in the VM).
#
# One cargo invocation builds every bench target and the pptune binary: a
# subset of packages, or a separate `cargo build --release`, unifies
# features or profiles differently and rebuilds the workspace each time.
# The pptune binary `cargo bench` builds uses the bench profile, which is
# the release profile (Cargo.toml sets nothing for bench).
BENCH_PKGS=(-p pptune-netlink -p pptune-policy -p pptune)

bench_build() {
    mkdir -p "$CARGO_TARGET_DIR"
    cargo bench "${BENCH_PKGS[@]}" --no-run --message-format=json-render-diagnostics \
        > "$CARGO_TARGET_DIR/bench-build.json"
}

# bench_exe NAME KIND: the executable of a target of that build, KIND
# `bench` or `bin` (a binary itself, not its unit-test harness). Fails
# when the build did not produce it.
bench_exe() {
    python3 -c 'import json,sys
name, kind, path = sys.argv[1:]
found = [m["executable"] for m in map(json.loads, open(path))
         if m.get("reason") == "compiler-artifact" and m.get("executable")
         and m["target"]["name"] == name and kind in m["target"]["kind"]
         and (kind != "bin" or not m["profile"]["test"])]
if not found:
    sys.exit(f"bench_exe: no {kind} {name} in {path}")
print(found[-1])' "$1" "$2" "$CARGO_TARGET_DIR/bench-build.json"
}

# bench_passes POOLS: passes per measurement at that pool count, so each
# takes about the same time (4096 pool-passes, at least 5 passes).
bench_passes() {
    local p=$(( 4096 / $1 ))
    echo $(( p < 5 ? 5 : p ))
}

# netdevsim devices for the VM benches (observe-cost.sh, observe-ab.sh),
# one pool per RX queue, links up. nsim_up_to N brings the pool count to N:
# one device of N queues for N <= 16, else devices of 128 queues added to
# what is there (every device is replaced when fewer than 128 are up).
# NSIM_POOLS holds the count.
NSIM_NEXT_ID=1
NSIM_POOLS=0
nsim_add() { # queues
    local id=$NSIM_NEXT_ID dev=""
    NSIM_NEXT_ID=$((NSIM_NEXT_ID + 1))
    echo "$id 1 $1" > /sys/bus/netdevsim/new_device
    for _ in $(seq 50); do
        dev=$(ls "/sys/bus/netdevsim/devices/netdevsim$id/net/" 2>/dev/null | head -1)
        [ -n "$dev" ] && break
        sleep 0.1
    done
    [ -n "$dev" ] || { echo "netdevsim$id has no netdev" >&2; return 1; }
    ip link set "$dev" up
    NSIM_POOLS=$((NSIM_POOLS + $1))
}
nsim_del_all() {
    local d
    for d in /sys/bus/netdevsim/devices/netdevsim*; do
        [ -e "$d" ] || continue
        echo "${d##*netdevsim}" > /sys/bus/netdevsim/del_device
    done
    NSIM_POOLS=0
}
nsim_up_to() { # pools
    if [ "$1" -le 16 ]; then
        nsim_del_all
        nsim_add "$1"
        return
    fi
    [ "$NSIM_POOLS" -ge 128 ] || nsim_del_all
    while [ "$NSIM_POOLS" -lt "$1" ]; do nsim_add 128; done
}
