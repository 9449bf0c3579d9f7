#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan) and runs each for longer than CI does, then prints
# a table: executions, seconds, executions per second, coverage (libFuzzer's `cov` edges and `ft` features)
# and findings. Usage:
#   scripts/fuzz.sh [harness ...]        (default: every harness in tests/fuzz)
# Environment: FUZZ_RUNS (default 1000000 executions each), FUZZ_JOBS (harnesses run at once, default 1),
# FUZZ_BUILD_DIR (default build/fuzz), FUZZ_ARGS (more libFuzzer flags). Inputs it finds go to
# $FUZZ_BUILD_DIR/fuzz-work/<harness>, crashes to $FUZZ_BUILD_DIR/fuzz-findings/<harness>; a finding becomes a
# regression input under tests/fuzz/regressions/<harness>/ once fixed. Exit status 1 if anything was found.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD_DIR:-build/fuzz}
runs=${FUZZ_RUNS:-1000000}
jobs=${FUZZ_JOBS:-1}
harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  for f in tests/fuzz/fuzz_*.cpp; do harnesses+=("$(basename "$f" .cpp | sed 's/^fuzz_//')"); done
fi

CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARSESYNC_ENABLE_CUDA=OFF \
  -DSPARSESYNC_BUILD_BENCH=OFF -DSPARSESYNC_BUILD_EXAMPLES=OFF -DSPARSESYNC_BUILD_FUZZ=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${harnesses[@]/#/fuzz_}" >&2

run_one() {
  local h=$1 work="$build/fuzz-work/$1" found="$build/fuzz-findings/$1" log="$build/fuzz-logs/$1.log"
  mkdir -p "$work" "$found" "$(dirname "$log")"
  local inputs=("tests/fuzz/corpus/$h")
  [[ -d "tests/fuzz/regressions/$h" ]] && inputs+=("tests/fuzz/regressions/$h")
  "$build/tests/fuzz/fuzz_$h" -runs="$runs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$found/" ${FUZZ_ARGS:-} "$work" "${inputs[@]}" >"$log" 2>&1 || true
}

pids=()
for h in "${harnesses[@]}"; do
  run_one "$h" &
  pids+=($!)
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
done
wait

status=0
printf '| harness | executions | seconds | exec/s | cov (edges) | ft (features) | corpus | findings |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
for h in "${harnesses[@]}"; do
  log="$build/fuzz-logs/$h.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' | tail -1)
  cov=$(awk '{print $2}' <<<"$last")
  ft=$(awk '{print $4}' <<<"$last")
  corp=$(awk '{print $6}' <<<"$last")
  findings=$(find "$build/fuzz-findings/$h" -type f | wc -l)
  ((findings > 0)) && status=1
  grep -q '^Done ' "$log" || status=1  # ended early: a crash, a leak or a timeout (see the log)
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$h" "${execs:-?}" "${secs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$findings"
done
echo "logs: $build/fuzz-logs; findings: $build/fuzz-findings" >&2
exit $status
