#!/usr/bin/env bash
# Runs the GPU tests the way their committed record (bench/results/gpu-test-runs/last_gpu_run.log) was made: the full suite,
# then compute-sanitizer memcheck over every case but the two largest, then racecheck over the encode
# boundary case and the encode -> apply round trip; then frame_sync_tests plainly and under both tools, and
# frame_sync_tcp_tests plainly and under memcheck. Writes the log to LOG (default: stdout); exits non-zero if any
# step fails. SYNC_ONLY=1 runs only the frame_sync steps (their record: bench/results/gpu-test-runs/last_frame_sync_run.log).
# racecheck of frame_sync_tests covers its first case (every version, both commit modes): the corruption cases
# take minutes under it; memcheck covers all of them.
#
#   scripts/run_gpu_tests.sh BIN_DIR_WITH_gpu_codec_tests_AND_frame_sync_tests [LOG] [MACHINE_DESCRIPTION]
#   env: SPARSESYNC_DATA_DIR (the real update stream, ../shared/data/rl-gpt2-small-lr1e-6 or a copy), SYNC_ONLY
set -uo pipefail
sync_only=${SYNC_ONLY:-0}
bin=${1:?usage: run_gpu_tests.sh BIN_DIR [LOG] [MACHINE]}
log=${2:-/dev/stdout}
machine=${3:-"(not given)"}
tests=$bin/gpu_codec_tests
[[ -x $tests ]] || { echo "run_gpu_tests.sh: no $tests" >&2; exit 2; }
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
rc=0
{
  echo "# GPU test run of tests/cuda (gpu_codec_tests), committed as the record of the last GPU run"
  echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC'), machine: $machine"
  echo "# card:"
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv | sed 's/^/#   /'
  echo "# commands (SPARSESYNC_DATA_DIR pointing at a copy of shared/data/rl-gpt2-small-lr1e-6): SYNC_ONLY=$sync_only scripts/run_gpu_tests.sh"
  echo
  if [[ $sync_only != 1 ]]; then
  echo "===== gpu_codec_tests --duration=true ====="
  "$tests" --duration=true || rc=1
  echo
  echo "===== compute-sanitizer --tool memcheck (quick mode, all cases but the 2^31 and real-stream ones) ====="
  SPARSESYNC_GPU_TEST_QUICK=1 "$sanitizer" --tool memcheck --error-exitcode 9 "$tests" -tce='*2^31*,*real RL*' || rc=1
  echo
  echo "===== compute-sanitizer --tool racecheck (quick mode: boundary-size byte identity, every encode kernel; encode -> apply round trip) ====="
  SPARSESYNC_GPU_TEST_QUICK=1 "$sanitizer" --tool racecheck --error-exitcode 9 "$tests" -tc='*boundaries*,*round trip*' || rc=1
  echo
  fi
  if [[ -x $bin/frame_sync_tests ]]; then
    echo "===== frame_sync_tests (GPU weights over a host transport), then under memcheck and racecheck ====="
    "$bin/frame_sync_tests" --duration=true || rc=1
    "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/frame_sync_tests" || rc=1
    "$sanitizer" --tool racecheck --error-exitcode 9 "$bin/frame_sync_tests" -tc='*every version*' || rc=1
    echo
  fi
  if [[ -x $bin/engine_gpu_tests ]]; then
    echo "===== engine_gpu_tests (the one sync engine with GPU weights: device_source / device_sink), then under memcheck ====="
    "$bin/engine_gpu_tests" --duration=true || rc=1
    "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/engine_gpu_tests" || rc=1
    echo
  fi
  if [[ -x $bin/engine_sharded_gpu_tests ]]; then
    echo "===== engine_sharded_gpu_tests (two trainer ranks -> two GPU workers, over the GPUs present) ====="
    "$bin/engine_sharded_gpu_tests" --duration=true || rc=1
    echo
  fi
  if [[ -x $bin/frame_sync_tcp_tests ]]; then
    echo "===== frame_sync_tcp_tests (GPU weights over asio_tcp with a key, one trainer, two workers), then under memcheck ====="
    "$bin/frame_sync_tcp_tests" --duration=true || rc=1
    "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/frame_sync_tcp_tests" || rc=1
    echo
  fi
  echo "# result: $([[ $rc == 0 ]] && echo 'all passed, sanitizers clean' || echo FAILED)"
} > "$log" 2>&1
exit $rc
