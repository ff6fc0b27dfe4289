#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (libfuzzer-sys), on the stable
# toolchain. RELIABILITY.md §1 says what it promises and what was measured.
#
#   fuzz/run.sh                      # every target, 60 s each
#   fuzz/run.sh --smoke              # every target, 5 s each (the CI smoke:
#                                    # each builds, replays its whole corpus
#                                    # and seeds, then mutates for the rest)
#   fuzz/run.sh --seconds 600 netdev # one target, longer
#   fuzz/run.sh --runs 10000000 policy
#
# It builds the fuzz crate with the instrumentation flags cargo-fuzz passes
# for `--sanitizer none` (all stable -C options), so neither cargo-fuzz nor
# a nightly toolchain nor RUSTC_BOOTSTRAP is needed; `cargo fuzz run -s none
# TARGET` runs the same binaries where cargo-fuzz is installed. No
# AddressSanitizer: the fuzzed code has no `unsafe` (workspace lint), so
# ASan would find nothing safe Rust does not already check, at a 2-3x cost.
# Release build with overflow checks and debug assertions on (fuzz/Cargo.toml).
#
# Inputs: fuzz/seeds/TARGET (from the recorded kernel bytes, make-seeds.py)
# and fuzz/corpus/TARGET (what earlier runs found interesting; new inputs are
# added there). A crash, a timeout (10 s per input) or memory past 2 GiB
# (512 MB for `recording`) stops the target, writes the input to
# fuzz/artifacts/TARGET/ and fails.
set -euo pipefail
cd "$(dirname "$0")"

ALL=(netdev ethtool ctrl rtnetlink extack notifications policy recording fleet)
limit=(-max_total_time=60)
targets=()
while (($#)); do
  case "$1" in
    --seconds) limit=(-max_total_time="$2"); shift 2 ;;
    --smoke) limit=(-max_total_time=5); shift ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${ALL[@]}")

triple=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/target}"
# --target keeps the flags off build scripts and proc-macros.
RUSTFLAGS="-Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 -Cllvm-args=-sanitizer-coverage-stack-depth \
 -Cllvm-args=-simplifycfg-branch-fold-threshold=0 \
 --cfg fuzzing -Ccodegen-units=1" \
  cargo build --release --locked --target "$triple" --bins >&2

# One fuzzer per core (FUZZ_JOBS to override): the CI smoke of 7 targets
# x 60 s takes 4 minutes on two cores instead of 7. Each target's libFuzzer
# is single-process, so targets never compete within themselves.
jobs="${FUZZ_JOBS:-$(nproc)}"

run_one() {
  local t="$1" bin log start rc secs execs rss cov
  bin="$CARGO_TARGET_DIR/$triple/release/$t"
  mkdir -p "corpus/$t" "artifacts/$t"
  log="artifacts/$t/last-run.log"
  start=$(date +%s)
  set +e
  # The recording reader bounds every size a segment states before it
  # allocates (16 MiB a record, one number per byte of it): 512 MB is
  # several times what any input may cost, far below what an unbounded one
  # did (1 GB for a 1 MB frame).
  local rss_limit=2048
  [ "$t" = recording ] && rss_limit=512
  "$bin" "${limit[@]}" -rss_limit_mb="$rss_limit" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="artifacts/$t/" "corpus/$t" "seeds/$t" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  echo "fuzz $t: ${execs:-?} executions in ${secs} s (${cov:-cov: ?}, peak RSS ${rss:-?} MB, corpus $(ls "corpus/$t" | wc -l)): $( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")"
  if ((rc != 0)); then
    tail -40 "$log" >&2
  fi
  return "$rc"
}

for t in "${targets[@]}"; do
  [[ -x "$CARGO_TARGET_DIR/$triple/release/$t" ]] || { echo "fuzz: no target $t" >&2; exit 2; }
done
fail=0
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || fail=1
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || fail=1
  running=$((running - 1))
done
exit "$fail"
