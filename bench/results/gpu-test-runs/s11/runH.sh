#!/usr/bin/env bash
# Session 11, call H (2x H100: no 4-GPU machine was lent then; the 4-GPU tests and benches skip): receives posted 3 ahead (6a4df82) with entropy-cpu2 merged (3dda811): the deferred advance against the
# fused one, in one process on GPUs 0 -> 1 (engine_nccl_bench F = 1 vs 2, both commits); then every NCCL engine
# test with the new default (kill test on 4 GPUs), and the sharded bench. Binaries of the working tree after
# 3dda811, built on the dev VM.
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/lead
ldd $B/engine_nccl_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
mkdir -p /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0,1 timeout 170 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:1,512:4:4:2 --encoders varint --json $OUT/advance.jsonl > $OUT/advance.log 2>&1; s advance $?
for t in engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:60; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $OUT/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions" $OUT/$n.log >> $OUT/summary.txt
done
t0=$(date +%s); timeout 90 $B/engine_sharded_bench --versions 5 --json $OUT/sharded.jsonl > $OUT/sharded.log 2>&1; s sharded $?
t0=$(date +%s); timeout 100 $B/engine_nccl_bench --workers 3 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $OUT/1to3.jsonl > $OUT/1to3.log 2>&1; s 1to3 $?
grep -h 'summary\|dense' $OUT/advance.jsonl $OUT/sharded.jsonl $OUT/1to3.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','fused_advance','commit','trainers','workers','median_version_ms','median_encode_ms','median_snapshot_advance_ms','median_ms')})
" >> $OUT/summary.txt
grep -h "engine_nccl_bench:" $OUT/*.log >> $OUT/summary.txt
cd $OUT && tar czf logs.tgz *.log && rm -f *_tests.log; cat summary.txt
