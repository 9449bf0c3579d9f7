#!/usr/bin/env bash
# Session 22, call D (four GPUs): the final tree (versions leaving the history released after the encode; the
# size and write passes across tile boundaries): every GPU test of the engine (the kill test
# and the sharded tests on four GPUs), then the engine 1 -> 3 workers (7B BF16 at 1%, varint, atomic and
# streamed) with the dense broadcast to the three, 1 -> 1 on the same machine, and the sharded bench.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s22d; mkdir -p $B && tar xJf .carry/s22d/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in frame_sync_tests:120 engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:90; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
t0=$(date +%s); timeout 120 $B/engine_nccl_bench --workers 3 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/1to3.jsonl > /dev/null 2>>$W/bench.err; s 1to3 $?
t0=$(date +%s); timeout 100 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/1to1.jsonl > /dev/null 2>>$W/bench.err; s 1to1 $?
for f in 1to3 1to1; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','commit','workers','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
t0=$(date +%s); timeout 100 $B/engine_sharded_bench --versions 4 --json $W/sharded.jsonl > $W/sharded.log 2>&1; s sharded $?
grep -h 'summary' $W/sharded.jsonl >> $OUT/summary.txt
cat $W/bench.err 2>/dev/null | grep -v "^$" | head -20 >> $OUT/summary.txt
gzip -9 $W/*_tests.log
cd $W && tar czf $OUT/callD.tgz * && cat $OUT/summary.txt
