#!/usr/bin/env bash
# Session 22, call G (four GPUs): rec = call D's tree + the device source's frame blocks recycled by its heap (no
# allocation, event, free or event destruction per frame: device_engine.cuh's frame_heap). Every GPU test of the
# engine on rec (the kill test and the sharded tests on four GPUs), then the engine 1 -> 1 (7B BF16 at 1%, varint,
# atomic and streamed) alternated twice against call D's binary (mid), and rec 1 -> 3 workers.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s22g; mkdir -p $B/mid && tar xJf .carry/s22g/bin.tar.xz -C $B && tar xJf .carry/s22d/bin.tar.xz -C $B/mid engine_nccl_bench
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/outG; mkdir -p $W /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:90; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name binary workers
  t0=$(date +%s); timeout 100 $2 --workers $3 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/bench.err; s $1 $?
}
run mid-1 $B/mid/engine_nccl_bench 1; run rec-1 $B/engine_nccl_bench 1; run mid-2 $B/mid/engine_nccl_bench 1; run rec-2 $B/engine_nccl_bench 1
run rec-1to3 $B/engine_nccl_bench 3
for f in mid-1 rec-1 mid-2 rec-2 rec-1to3; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','workers','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
head -c 2000 $W/bench.err >> $OUT/summary.txt
gzip -9 $W/*_tests.log
cd $W && tar czf $OUT/callG.tgz * && cat $OUT/summary.txt
