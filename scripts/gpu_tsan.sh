#!/usr/bin/env bash
# The GPU engine's tests with their host code under ThreadSanitizer: the publisher, the session threads, the
# receivers' lanes and the deferred snapshot advance, which live in CUDA translation units that scripts/sanitize.sh
# leaves out. Builds engine_gpu_tests and engine_sharded_gpu_tests (Debug, host -O1, -fsanitize=thread on the C++
# and, through nvcc -Xcompiler, on the CUDA units' host code; sm_90 unless CMAKE_CUDA_ARCHITECTURES is set) and,
# where a GPU is visible, runs them. libcuda's own synchronization is not instrumented: its reports from kernel
# launches on several threads (CUDA documents those as safe) are suppressed (scripts/tsan-libcuda.supp), so that a
# report left is in code TSan sees; a report fails its test. bench/results/sanitizers-thread.md has the last run.
#   scripts/gpu_tsan.sh [BUILD_DIR]        (build only: SPARSESYNC_TSAN_BUILD_ONLY=1, e.g. on a machine without a GPU)
#   env: XXHASH_INCLUDE (a folder holding xxhash.h, when the system has none, as scripts/gpu_build_and_test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/tsan-gpu}
export PATH=$PATH:/usr/local/cuda/bin
extra=()
[[ -n ${XXHASH_INCLUDE:-} ]] && extra+=("-DSPARSESYNC_XXHASH_INCLUDE_DIR=$XXHASH_INCLUDE")
cmake -S . -B "$build" -G Ninja "${extra[@]}" -DCMAKE_BUILD_TYPE=Debug -DSPARSESYNC_BUILD_BENCH=OFF -DSPARSESYNC_BUILD_EXAMPLES=OFF \
  -DSPARSESYNC_BUILD_TOOLS=OFF "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90}" "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
  "-DCMAKE_CUDA_FLAGS_DEBUG=-O1 -lineinfo" "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" \
  "-DCMAKE_CUDA_FLAGS=-Xcompiler=-fsanitize=thread -Xcompiler=-fno-omit-frame-pointer" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread" >/dev/null
tests=(engine_gpu_tests engine_sharded_gpu_tests)
cmake --build "$build" -j "$(nproc)" --target "${tests[@]}"
[[ ${SPARSESYNC_TSAN_BUILD_ONLY:-0} == 1 ]] && exit 0
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_tsan.sh: no GPU found (nvidia-smi -L): built, not run"
  exit 0
fi
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan-libcuda.supp ${TSAN_OPTIONS:-}"
for t in "${tests[@]}"; do "$build/tests/cuda/$t"; done
