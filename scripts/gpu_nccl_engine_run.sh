#!/usr/bin/env bash
# On the lent machine with two or four GPUs: builds the one sync engine's NCCL targets and runs, in order, the
# single-GPU engine test (the host path the NCCL path grew from), the in-process NCCL engine test, the process
# kill test (workers killed or hung mid-version), with four GPUs the sharded NCCL test, then engine_nccl_bench (both
# commit modes, beside the dense ncclBroadcast of the same run) and, with four GPUs, engine_sharded_bench (1 -> 2
# and 2 -> 2 trainer ranks in one run). Logs and JSON lines go to OUT_DIR; the records under bench/results/ are copies.
#   scripts/gpu_nccl_engine_run.sh OUT_DIR [MACHINE_DESCRIPTION]
#   env: XXHASH_INCLUDE (a folder holding xxhash.h, when the system has none), GPU_TEST_BUILD (default
#        /tmp/sparsesync-nccl), BENCH_ARGS (engine_nccl_bench arguments, default "--versions 5"), SKIP_BENCH=1,
#        SKIP_SINGLE=1 (not the single-GPU test), TARGETS (what to build, default: all of the above),
#        PREBUILT=1 (no build: GPU_TEST_BUILD already holds the binaries, built elsewhere for sm_90; the kill test
#        finds engine_nccl_worker at the path it was built at), SHARDED_BENCH_ARGS (default "--versions 5")
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_nccl_engine_run.sh OUT_DIR [MACHINE]}
machine=${2:-"(not given)"}
build=${GPU_TEST_BUILD:-/tmp/sparsesync-nccl}
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on shared hosts
mkdir -p "$out"
extra=()
[[ -n ${XXHASH_INCLUDE:-} ]] && extra+=("-DSPARSESYNC_XXHASH_INCLUDE_DIR=$XXHASH_INCLUDE")
targets=(${TARGETS:-engine_gpu_tests engine_nccl_gpu_tests engine_nccl_kill_gpu_tests engine_nccl_worker engine_nccl_sharded_gpu_tests
  engine_nccl_bench engine_sharded_bench})
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[[ ${PREBUILT:-0} == 1 ]] && echo "prebuilt binaries in $build" > "$out/build.log" || {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARSESYNC_BUILD_BENCH=ON -DSPARSESYNC_BUILD_TOOLS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 "${extra[@]}" &&
  time cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
} > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 2; }
rc=0
{
  echo "# the one sync engine over NCCL: tests and bench, committed as the record of the last such run"
  echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC'), machine: $machine"
  echo "# cards:"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | sed 's/^/#   /'
  echo "# topology:"
  nvidia-smi topo -m 2>/dev/null | sed 's/^/#   /'
  echo "# NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  echo
  if [[ ${SKIP_SINGLE:-0} != 1 ]]; then
  echo "===== engine_gpu_tests (one GPU: device_source / device_sink over a host transport) ====="
  timeout 300 "$build/tests/cuda/engine_gpu_tests" --duration=true || rc=1
  echo
  fi
  echo "===== engine_nccl_gpu_tests (nccl_link pair communicators, trainer GPU 0, workers on the last GPU) ====="
  timeout 300 "$build/tests/cuda/engine_nccl_gpu_tests" --duration=true || rc=1
  echo
  echo "===== engine_nccl_kill_gpu_tests (worker processes over TCP + NCCL: killed, restarted, hung) ====="
  timeout 300 "$build/tests/cuda/engine_nccl_kill_gpu_tests" --duration=true -s || rc=1
  echo
  if (( gpus >= 4 )); then
    echo "===== engine_nccl_sharded_gpu_tests (trainer ranks on GPUs 0, 1 -> workers on GPUs 2, 3) ====="
    timeout 300 "$build/tests/cuda/engine_nccl_sharded_gpu_tests" --duration=true -s || rc=1
    echo
  fi
} > "$out/engine_nccl_tests.log" 2>&1
if [[ ${SKIP_BENCH:-0} != 1 ]]; then
  # shellcheck disable=SC2086  # the arguments are a word list
  timeout 400 "$build/bench/gpu/engine_nccl_bench" ${BENCH_ARGS:---versions 5} --json "$out/engine_nccl_bench.jsonl" > "$out/engine_nccl_bench.log" 2>&1 || rc=1
  if (( gpus >= 4 )); then
    # shellcheck disable=SC2086
    timeout 300 "$build/bench/gpu/engine_sharded_bench" ${SHARDED_BENCH_ARGS:---versions 5} --json "$out/engine_sharded_bench.jsonl" \
      > "$out/engine_sharded_bench.log" 2>&1 || rc=1
    tail -n 8 "$out/engine_sharded_bench.log"
  fi
fi
grep -E "test cases|Status|FAILED|ERROR" "$out/engine_nccl_tests.log" | tail -20
tail -n 8 "$out/engine_nccl_bench.log" 2>/dev/null
exit $rc
