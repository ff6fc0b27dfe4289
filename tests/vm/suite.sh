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
    out="/tmp/suite-$name.out"
    # shellcheck disable=SC2086 # the filter is a list of words
    if "$bin" --test-threads=1 --show-output "${skip[@]}" ${PPTUNE_VM_FILTER:-} 2>&1 | tee "$out"; [ "${PIPESTATUS[0]}" = 0 ]; then
        echo "=== [$PPTUNE_KERNEL] $name: ok ($(( $(date +%s) - t0 )) s)"
    else
        echo "=== [$PPTUNE_KERNEL] $name: FAILED ($(( $(date +%s) - t0 )) s)"
        failed+=("$name")
        dmesg | tail -n 30
        # What failed, again, last: a CI log read from its tail (or cut in
        # the middle) shows the panic, not only the kernel's log.
        echo "=== [$PPTUNE_KERNEL] $name: the failures again"
        grep -a -A 12 "panicked at" "$out" | tail -n 80
        grep -aE '^test .*FAILED|^test result' "$out"
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "=== [$PPTUNE_KERNEL] failed: ${failed[*]}"
    exit 1
fi
exit 0
