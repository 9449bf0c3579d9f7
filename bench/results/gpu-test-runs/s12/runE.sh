#!/usr/bin/env bash
# Session 12, call E (two GPUs, whichever card comes): detect with SIMD word compares and only the changes staged
# in shared memory; the receiver handing on each frame as soon as it has landed (device_link requirement 8,
# nccl_link::received_device). Correctness first (gpu_codec_tests with the real RL stream, the engine tests two
# GPUs can run), then the codec at 7e9 before (gpu_bench_split: call D's) and after, then the engine 1 -> 1
# against call D's binary (07b4117), alternating twice (atomic), and once both commits with the new one.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s12; mkdir -p $B && tar xJf .carry/s12e/bin.tar.xz -C $B
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
for v in split new split; do
  bin=$B/gpu_bench; [ $v = split ] && bin=$B/gpu_bench_split
  t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 120 $bin --sizes 7e9 --densities 0.01 --reps 5 --enc varint/ulp --json $W/codec-$v.jsonl > $W/codec-$v.log 2>&1; s codec-$v $?
done
for r in 1 2; do
  for v in split new; do
    bin=$B/engine_nccl_bench; [ $v = split ] && bin=$B/engine_nccl_bench_split
    t0=$(date +%s); timeout 120 $bin --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/engine-$v-$r.jsonl > /dev/null 2>$W/engine-$v-$r.err; s engine-$v-$r $?
  done
done
t0=$(date +%s); timeout 150 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/engine-new-both.jsonl > /dev/null 2>$W/engine-new-both.err; s engine-new-both $?
for v in split new; do grep -E "detect only 128x4 min4 \(default|phase|encode varint/ulp \| 8|encode varint|compare" $W/codec-$v.log | sed "s/^/$v /" >> $OUT/summary.txt; done
for f in $W/engine-*.jsonl; do
  grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
cat $W/*.err 2>/dev/null | grep -v "^$" | head -20 >> $OUT/summary.txt
find $W -name "*.err" -size 0 -delete
cd $W && tar czf $OUT/callE.tgz * && cat $OUT/summary.txt
