#!/usr/bin/env bash
# Session 11, call A (4x H100): the first GPU run of a46a65b's review mends (receiver and nccl_link): every NCCL
# engine test (kill test on 4 GPUs included); then the floor of an atomic version on this card
# (atomic_floor_bench, GPU 0) and the engine bench 1 -> 1 and 1 -> 3 with the dense broadcast of the same run.
# Binaries of f0ef2ea + atomic_floor_bench, built on the dev VM (sm_90).
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/lead
mkdir -p /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for t in engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:60; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $OUT/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions" $OUT/$n.log >> $OUT/summary.txt
done
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 90 $B/atomic_floor_bench --reps 5 --json $OUT/atomic-floor.jsonl > $OUT/atomic-floor.log 2>&1; s floor $?
t0=$(date +%s); timeout 100 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:1 --encoders varint --json $OUT/1to1.jsonl > $OUT/bench-1to1.log 2>&1; s bench-1to1 $?
tail -5 $OUT/atomic-floor.log >> $OUT/summary.txt
grep -h 'summary\|dense' $OUT/1to1.jsonl | cut -c1-400 >> $OUT/summary.txt
cd $OUT && tar czf logs.tgz *.log && rm -f *_tests.log; cat summary.txt
