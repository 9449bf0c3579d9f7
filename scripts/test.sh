#!/usr/bin/env bash
# Installs missing dependencies, builds the library's tests, tools and examples (CUDA parts too when nvcc is
# present) and runs all tests. Benchmarks are not built here (no test runs them; .ci/run builds them after this).
# GPU tests skip with a message where no GPU is present. Usage: ./scripts/test.sh [extra ctest args]
# The last line counts the tests of both stages: "N passed, N failed, N skipped" (ctest's skipped: exit 77).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="$PATH:/usr/local/cuda/bin"
build=${SPARSESYNC_BUILD_DIR:-build/test}
logs=$(mktemp -d)

# One line per finished test in ctest's output: "  3/25 Test  #3: name ....   Passed    0.52 sec", or
# "***Skipped", "***Failed", "***Timeout", "***Exception: ...", "***Not Run".
summary() {
  local rc=$?
  local total passed skipped
  total=$(cat "$logs"/*.log 2>/dev/null | grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' || true)
  passed=$(cat "$logs"/*.log 2>/dev/null | grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' | grep -cE ' Passed +[0-9.]+ sec' || true)
  skipped=$(cat "$logs"/*.log 2>/dev/null | grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' | grep -cF '***Skipped' || true)
  # pytest's closing line: "71 passed, 1 skipped in 5.20s" (also "N failed", "N error(s)").
  local py py_passed py_failed py_skipped
  py=$(grep -E '^=*\s*[0-9]+ (passed|failed|skipped|errors?)' "$logs"/python.log 2>/dev/null | tail -n 1 || true)
  py_passed=$(grep -oE '[0-9]+ passed' <<<"$py" | grep -oE '[0-9]+' || echo 0)
  py_failed=$(( $(grep -oE '[0-9]+ failed' <<<"$py" | grep -oE '[0-9]+' || echo 0) + $(grep -oE '[0-9]+ errors?' <<<"$py" | grep -oE '[0-9]+' || echo 0) ))
  py_skipped=$(grep -oE '[0-9]+ skipped' <<<"$py" | grep -oE '[0-9]+' || echo 0)
  rm -rf "$logs"
  echo
  ((rc != 0)) && echo "test.sh: stopped with exit code $rc (a build or a test failed)"
  echo "$((passed + py_passed)) passed, $((total - passed - skipped + py_failed)) failed, $((skipped + py_skipped)) skipped"
  exit "$rc"
}
trap summary EXIT

# Why each skipped test did not run: ctest shows no output of a skipped test, so print the last line it wrote
# (from ctest's LastTest.log, where every output block ends with "<end of output>").
skip_reasons() {  # skip_reasons LOG BUILD_DIR
  local t
  for t in $(grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$1" | grep -F '***Skipped' | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/'); do
    awk -v t="$t" '$0 ~ "^[0-9]+/[0-9]+ Test: " t "$" {on = 1; last = ""; next}
                   on && /^<end of output>$/ {print "  skipped " t ": " last; on = 0}
                   on && NF {last = $0}' "$2/Testing/Temporary/LastTest.log"
  done
}

run_ctest() {  # run_ctest LOGNAME BUILD_DIR ctest-args...: output on the terminal and in the log; ctest's exit code
  local name=$1 dir=$2
  shift 2
  local rc=0
  ctest --test-dir "$dir" "$@" 2>&1 | tee "$logs/$name.log" || rc=$?
  skip_reasons "$logs/$name.log" "$dir"
  return "$rc"
}

# Without a GPU the GPU tests skip: the CUDA code is then compiled to unoptimized PTX only (nvcc's front end
# still checks all of it; the optimizer and ptxas's machine code, which nothing here could run, are skipped,
# as for the CUDA header checks), which saves minutes on a 2-core machine. With a GPU: sm_90, optimized.
cuda_arch=90
cuda_flags=
if ! nvidia-smi -L > /dev/null 2>&1; then
  cuda_arch=90-virtual
  cuda_flags="-Xcicc -O0"
  gpu_unoptimized=ON
  gpu_targets=OFF
  echo "test.sh: no GPU found (nvidia-smi -L): the GPU tests, the CUDA examples and the CUDA header checks are not built here (reported as skipped; .ci/run compiles them); the library's CUDA code is compiled unoptimized"
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARSESYNC_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES="$cuda_arch" \
  -DCMAKE_CUDA_FLAGS="$cuda_flags" -DSPARSESYNC_GPU_TESTS_UNOPTIMIZED="${gpu_unoptimized:-OFF}" -DSPARSESYNC_TESTS_O1=ON \
  -DSPARSESYNC_BUILD_GPU_TARGETS="${gpu_targets:-ON}"
cmake --build "$build" -j "$(nproc)"
run_ctest main "$build" --output-on-failure --timeout 900 -j "$(nproc)" "$@"

# The Python package (import sparsesync), built into a virtual environment under build/, and its pytest suite.
./scripts/python_test.sh 2>&1 | tee "$logs/python.log"

# The decoders of untrusted input, the golden files, the sync engine and the safetensors reader once more under
# AddressSanitizer and UndefinedBehaviorSanitizer (scripts/sanitize.sh) only with SPARSESYNC_SANITIZE=1: CI runs
# that stage after this command (.ci/run), which keeps this one within its time on a slow 2-core machine.
if [[ "${SPARSESYNC_SANITIZE:-0}" == 1 ]]; then
  SPARSESYNC_BUILD_DIR="$build" ./scripts/sanitize.sh 2>&1 | tee "$logs/asan.log"
fi
