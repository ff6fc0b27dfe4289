#!/bin/bash
# Runs inside the VM (via run.sh): each given test binary in turn, serially
# (the tests share the VM's devices), and a summary line per binary.
# Exit status: 0 when all passed, 1 otherwise. PPTUNE_VM_FILTER (words)
# narrows every binary to the tests whose names contain one of them;
# PPTUNE_VM_SKIP (test names, set by test.sh per kernel) leaves those
# tests out.
skip=()
for t in ${PPTUNE_VM_SKIP:-}; do skip+=(--skip "$t"); done
failed=()
for bin in "$@"; do
    name="$(basename "$bin")"
    echo "=== [$PPTUNE_KERNEL] $name"
    t0=$(date +%s)
    # shellcheck disable=SC2086 # the filter is a list of words
    if "$bin" --test-threads=1 --show-output "${skip[@]}" ${PPTUNE_VM_FILTER:-}; then
        echo "=== [$PPTUNE_KERNEL] $name: ok ($(( $(date +%s) - t0 )) s)"
    else
        echo "=== [$PPTUNE_KERNEL] $name: FAILED ($(( $(date +%s) - t0 )) s)"
        failed+=("$name")
        dmesg | tail -n 30
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "=== [$PPTUNE_KERNEL] failed: ${failed[*]}"
    exit 1
fi
exit 0
