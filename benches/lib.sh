# Shared by the bench scripts (sourced; needs CARGO_TARGET_DIR).
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
