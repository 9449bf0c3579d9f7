#!/usr/bin/env bash
# Session 10, call B (4x H100, same machine as call A): the UCX device-link tests (df95804, built on the dev VM
# against the carried CUDA UCX 1.22), then the whole Python suite (cupy case included) built there.
set -u
export NCCL_NVLS_ENABLE=0
cp -r .carry/ucx-cuda/ucx /tmp/ucx
export LD_LIBRARY_PATH=/tmp/ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/build-ucxdev/tests/cuda
cp .carry/lead2/engine_ucx_device_worker .carry/lead2/engine_ucx_device_gpu_tests /tmp/build-ucxdev/tests/cuda/
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
t0=$(date +%s); timeout 120 /tmp/build-ucxdev/tests/cuda/engine_ucx_device_gpu_tests --duration=true > $OUT/ucx_device.log 2>&1; s ucx_device $?
grep -E "test cases|assertions" $OUT/ucx_device.log >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_UCX_ROOT=/tmp/ucx XXHASH_INCLUDE=$PWD/.carry/include timeout 420 scripts/gpu_python_run.sh $OUT "nvidia-h100-x4 (4x H100 80GB HBM3)" > /dev/null 2>&1; s python $?
tail -25 $OUT/python-gpu.log >> $OUT/summary.txt 2>/dev/null || tail -30 $OUT/python-build.log >> $OUT/summary.txt
cat $OUT/summary.txt
