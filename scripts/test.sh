#!/usr/bin/env bash
# Installs missing dependencies, builds everything (CUDA parts too when nvcc is present) and runs all tests.
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
  rm -rf "$logs"
  echo
  ((rc != 0)) && echo "test.sh: stopped with exit code $rc (a build or a test failed)"
  echo "$passed passed, $((total - passed - skipped)) failed, $skipped skipped"
  exit "$rc"
}
trap summary EXIT

run_ctest() {  # run_ctest LOGNAME ctest-args...: ctest's output on the terminal and in the log; ctest's exit code
  local name=$1
  shift
  ctest "$@" 2>&1 | tee "$logs/$name.log"
}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
run_ctest main --test-dir "$build" --output-on-failure --timeout 900 -j "$(nproc)" "$@"

# The decoders of untrusted input, the sync engine and the CLI once more under AddressSanitizer and
# UndefinedBehaviorSanitizer (host code; SPARSESYNC_SANITIZE=0 skips this). Only the programs it runs are built.
if [[ "${SPARSESYNC_SANITIZE:-1}" == 1 ]]; then
  asan=${build}-asan
  cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPARSESYNC_ENABLE_CUDA=OFF -DSPARSESYNC_BUILD_BENCH=OFF \
    -DSPARSESYNC_BUILD_EXAMPLES=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
  cmake --build "$asan" -j "$(nproc)" --target core_tests real_stream_tests sync_tests safetensors_tests cli_tests sparsesync_cli
  run_ctest asan --test-dir "$asan" --output-on-failure --timeout 900 -j "$(nproc)" -R "^(core_tests|real_stream_tests|sync_tests|safetensors_tests|cli_tests)$"
fi
