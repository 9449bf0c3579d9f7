#!/usr/bin/env bash
# On a machine with GPUs and the build tools but without this project's Debian packages (the lent GPU machine):
# configure the GPU test targets, build them with every core, and run scripts/run_gpu_tests.sh, plus the
# two-translation-unit link test and, where two GPUs are present, the NCCL transport test and example.
#   scripts/gpu_build_and_test.sh OUT_DIR [MACHINE_DESCRIPTION]
#   env: XXHASH_INCLUDE (a folder holding xxhash.h, when the system has none), SPARSESYNC_DATA_DIR, SYNC_ONLY,
#        GPU_TEST_BUILD (build folder, default /tmp/sparsesync-gpu), GPU_BENCH_ARGS (also build bench/gpu's
#        gpu_bench and run it with these arguments after the tests: OUT_DIR/gpu_bench.md and .jsonl)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_build_and_test.sh OUT_DIR [MACHINE]}
machine=${2:-"(not given)"}
build=${GPU_TEST_BUILD:-/tmp/sparsesync-gpu}
mkdir -p "$out"
extra=()
[[ -n ${XXHASH_INCLUDE:-} ]] && extra+=("-DSPARSESYNC_XXHASH_INCLUDE_DIR=$XXHASH_INCLUDE")
targets=(gpu_codec_tests frame_sync_tests engine_gpu_tests engine_sharded_gpu_tests frame_sync_tcp_tests cuda_link_tests)
{
  bench=OFF
  [[ -n ${GPU_BENCH_ARGS:-} ]] && bench=ON && targets+=(gpu_bench)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARSESYNC_BUILD_BENCH=$bench -DSPARSESYNC_BUILD_TOOLS=OFF "${extra[@]}" &&
  if grep -q '^sparsesync_nccl_sync:' <(ninja -C "$build" -t targets all 2>/dev/null | sed 's/ .*//'); then
    targets+=(sparsesync_nccl_sync transport_nccl_test)
  fi
  time cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
} > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 2; }
rc=0
SYNC_ONLY=${SYNC_ONLY:-0} scripts/run_gpu_tests.sh "$build/tests/cuda" "$out/gpu_tests.log" "$machine" || rc=1
{
  echo "===== cuda_link_tests (two .cu files that include every public .cuh, linked into one program) ====="
  "$build/tests/cuda/cuda_link_tests" || rc=1
  if [[ -x $build/tests/transport/transport_nccl_test ]]; then
    echo "===== transport_nccl_test, example nccl_sync ====="
    NCCL_NVLS_ENABLE=0 "$build/tests/transport/transport_nccl_test"; r=$?; [[ $r == 0 || $r == 77 ]] || rc=1
    NCCL_NVLS_ENABLE=0 "$build/examples/nccl_sync" --elements 20000000 --versions 3; r=$?; [[ $r == 0 || $r == 77 ]] || rc=1
  fi
} > "$out/link_and_nccl.log" 2>&1
if [[ -n ${GPU_BENCH_ARGS:-} ]]; then
  # shellcheck disable=SC2086  # the arguments are a word list
  "$build/bench/gpu/gpu_bench" $GPU_BENCH_ARGS --json "$out/gpu_bench.jsonl" > "$out/gpu_bench.md" 2>&1 || rc=1
fi
tail -n 5 "$out/gpu_tests.log" "$out/link_and_nccl.log"
exit $rc
