#!/usr/bin/env bash
# Session 13, call H (two GPUs): the final tree's engine tests two GPUs can run (the kill test included), then the
# engine 1 -> 1 (7B BF16 at 1%, varint), both commits, with the dense broadcast of the same run.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s13; mkdir -p $B && tar xJf .carry/s13h/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for t in engine_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions" $W/$n.log >> $OUT/summary.txt
done
t0=$(date +%s); timeout 100 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/1to1.jsonl > /dev/null 2>$W/1to1.err; s 1to1 $?
grep -h 'summary\|dense' $W/1to1.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
find $W -name "*.err" -size 0 -delete
cd $W && tar czf $OUT/callH.tgz * && cat $OUT/summary.txt
