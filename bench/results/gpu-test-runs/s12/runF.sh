#!/usr/bin/env bash
# Session 12, call F (two GPUs, whichever card comes): the size and write passes reading each chunk's tile table 32
# tiles at a time; nccl_link no longer waiting for a deferred ncclRecv to settle before the worker goes on. Tests
# first (gpu_codec_tests with the real RL stream, the engine tests two GPUs can run), the codec at 7e9 before
# (call E's binary) and after, the engine 1 -> 1 against call E's binary (5cf8655) alternating twice (atomic), then
# the new binary with both commits and other bucket sizes and lane counts.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s12; mkdir -p $B && tar xJf .carry/s12f/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for t in gpu_codec_tests:200 engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 frame_sync_tests:60 cuda_link_tests:30; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions" $W/$n.log >> $OUT/summary.txt
done
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 60 $B/atomic_floor_bench --reps 5 --json $W/atomic-floor.jsonl > $W/atomic-floor.log 2>&1; s floor $?
for v in e new e new; do
  bin=$B/gpu_bench; [ $v = e ] && bin=$B/gpu_bench_e
  t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 120 $bin --sizes 7e9 --densities 0.01 --reps 5 --no-sweep --no-baselines --enc varint/ulp --json $W/codec-$v.jsonl > $W/codec-$v.log 2>&1; s codec-$v $?
done
for r in 1 2; do
  for v in e new; do
    bin=$B/engine_nccl_bench; [ $v = e ] && bin=$B/engine_nccl_bench_e
    t0=$(date +%s); timeout 120 $bin --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/engine-$v-$r.jsonl > /dev/null 2>$W/engine-$v-$r.err; s engine-$v-$r $?
  done
done
t0=$(date +%s); timeout 150 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/engine-new-both.jsonl > /dev/null 2>$W/engine-new-both.err; s engine-new-both $?
t0=$(date +%s); timeout 150 $B/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs 768:4:4:2,384:4:4:2,512:3:4:2,512:6:4:2 --encoders varint --json $W/engine-configs.jsonl > /dev/null 2>$W/engine-configs.err; s engine-configs $?
tail -4 $W/atomic-floor.log >> $OUT/summary.txt
for v in e new; do grep -E "encode varint|apply varint" $W/codec-$v.log | sed "s/^/$v /" >> $OUT/summary.txt; done
for f in $W/engine-*.jsonl; do
  grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','bucket_mb','encode_lanes','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
cat $W/*.err 2>/dev/null | grep -v "^$" | head -20 >> $OUT/summary.txt
find $W -name "*.err" -size 0 -delete
cd $W && tar czf $OUT/callF.tgz * && cat $OUT/summary.txt
