#!/usr/bin/env bash
# Session 12, call B (two GPUs, whichever card comes): the frames' streams at the greatest priority (nccl_link,
# ucx_device_link, the trainer's frame copies) and the detect pass taking 8 tiles per block with the next tile's
# loads in flight. First correctness: gpu_codec_tests in full (CPU/GPU byte identity, real RL stream), the engine
# tests two GPUs can run. Then the codec at 7e9 (detect sweep: 1 tile per block = the old kernel), and the engine
# 1 -> 1 before (engine_nccl_bench_base: call A's binary, timeline only) and after, alternating twice.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s12; mkdir -p $B && tar xJf .carry/s12x/bin.tar.xz -C $B  # the binaries, xz-packed to fit the carry
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
mkdir -p /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for t in gpu_codec_tests:200 engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 frame_sync_tests:60 cuda_link_tests:30; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $OUT/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions" $OUT/$n.log >> $OUT/summary.txt
done
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 120 $B/gpu_bench --sizes 7e9 --densities 0.01 --reps 5 --enc varint/ulp --json $OUT/codec.jsonl > $OUT/codec.log 2>&1; s codec $?
for r in 1 2; do
  for v in base new; do
    bin=$B/engine_nccl_bench; [ $v = base ] && bin=$B/engine_nccl_bench_base
    t0=$(date +%s); timeout 120 $bin --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $OUT/engine-$v-$r.jsonl > $OUT/engine-$v-$r.log 2>&1; s engine-$v-$r $?
  done
done
grep -E "detect only|phase|encode varint|apply varint|compare|memcpy" $OUT/codec.log >> $OUT/summary.txt
for f in $OUT/engine-*.jsonl; do
  grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_snapshot_advance_ms','median_ms')})
" >> $OUT/summary.txt
done
grep -h "engine_nccl_bench:" $OUT/*.log >> $OUT/summary.txt
cd $OUT && tar czf logs.tgz *_tests.log && rm -f *_tests.log; cat summary.txt
