#!/usr/bin/env bash
# Session 21, call C (two GPUs): r3 = the tree with the detect ring and the verify's launches for the frame's own
# encoder only (apply_config::encoder); r4 = r3 with max_posted_device_receives 8 (4 in r3). GPU tests on r3
# (gpu_codec_tests with its new case, frame_sync_tests, the engine's tests incl. the kill test), then the engine
# 1 -> 1 (7B BF16 at 1%, varint) r2 (call B's), r3, r4 alternated twice, atomic and streamed.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s21c; mkdir -p $B && tar xJf .carry/s21c/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W /tmp/build-main/tests/cuda
cp $B/*_tests $B/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in gpu_codec_tests:200 frame_sync_tests:120 engine_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
for round in 1 2; do
  for v in r2 r3 r4; do
    t0=$(date +%s); timeout 100 $B/engine_nccl_bench_$v --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/1to1-$v.jsonl > /dev/null 2>>$W/1to1-$v.err; s "$v-$round" $?
  done
done
for v in r2 r3 r4; do
  echo "== $v" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/1to1-$v.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/1to1-$v.jsonl >> $OUT/summary.txt 2>&1
done
cat $W/*.err 2>/dev/null | grep -v "^$" | head -20 >> $OUT/summary.txt
find $W -name "*.err" -size 0 -delete
gzip -9 $W/*_tests.log
cd $W && tar czf $OUT/callC.tgz * && cat $OUT/summary.txt
