#!/usr/bin/env bash
# Session 12, call G (four GPUs): the final engine (222edc0) where four GPUs are needed (the two-GPU tests passed in
# calls F and H): the kill test on four GPUs, the sharded NCCL test, 1 -> 3 workers (atomic) with the dense
# broadcast of the same run, then the sharded bench (1 -> 2 and 2 -> 2). Outputs go straight to $OUT, most
# important first, so that a run cut short by the session's device time still returns what it did.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s12; mkdir -p $B && tar xJf .carry/s12g/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
mkdir -p /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for t in engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:60; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $OUT/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions" $OUT/$n.log >> $OUT/summary.txt
done
t0=$(date +%s); timeout 60 $B/engine_nccl_bench --workers 3 --versions 4 --commit atomic --configs 512:4:4:2 --encoders varint --json $OUT/1to3.jsonl > /dev/null 2>>$OUT/summary.txt; s 1to3 $?
grep -h 'summary\|dense' $OUT/1to3.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','commit','workers','gpus','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
t0=$(date +%s); timeout 80 $B/engine_sharded_bench --versions 4 --json $OUT/sharded.jsonl > $OUT/sharded.log 2>&1; s sharded $?
grep -h 'summary' $OUT/sharded.jsonl >> $OUT/summary.txt
cat $OUT/summary.txt
