#!/usr/bin/env bash
# Session 12, call D (two GPUs, whichever card comes): the passes after each bucket's read on a stream of the
# greatest priority per encode lane (encode_plan::split_streams) and the detect pass taking 8 tiles per block.
# Correctness first (gpu_codec_tests with the real RL stream: CPU/GPU byte identity; the engine tests two GPUs can
# run), then the atomic floor, then the engine 1 -> 1 against call C's urgent-streams binary (eaf5a51), alternating
# twice (atomic), and once more both commits with the new binary.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s12; mkdir -p $B && tar xJf .carry/s12d/bin.tar.xz -C $B
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
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 120 $B/gpu_bench --sizes 7e9 --densities 0.01 --reps 5 --enc varint/ulp --json $W/codec.jsonl > $W/codec.log 2>&1; s codec $?
for r in 1 2; do
  for v in urgent split; do
    bin=$B/engine_nccl_bench; [ $v = urgent ] && bin=$B/engine_nccl_bench_urgent
    t0=$(date +%s); timeout 120 $bin --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/engine-$v-$r.jsonl > /dev/null 2>$W/engine-$v-$r.err; s engine-$v-$r $?
  done
done
t0=$(date +%s); timeout 150 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/engine-split-both.jsonl > /dev/null 2>$W/engine-split-both.err; s engine-split-both $?
tail -4 $W/atomic-floor.log >> $OUT/summary.txt
grep -E "detect only 128x4 min4|phase|encode varint|apply varint|compare|memcpy" $W/codec.log >> $OUT/summary.txt
for f in $W/engine-*.jsonl; do
  grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
cat $W/*.err | grep -v "^$" | head -20 >> $OUT/summary.txt
cd $W && tar czf $OUT/callD.tgz * && cat $OUT/summary.txt
