#!/usr/bin/env bash
# Session 10, call A (4x H100): every C++ GPU test of df95804 built on the dev VM (sm_90), carried stripped.
set -u
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/build-main/tests/cuda
cp .carry/lead/*_tests .carry/lead/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > $OUT/summary.txt
for t in gpu_codec_tests:150 engine_gpu_tests:120 frame_sync_tests:60 frame_sync_tcp_tests:60 engine_sharded_gpu_tests:90 engine_nccl_gpu_tests:200 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:60; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $OUT/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions" $OUT/$n.log >> $OUT/summary.txt
done
cd $OUT && tar czf logs.tgz *.log && rm -f *.log; cat summary.txt
