#!/usr/bin/env bash
# Session 21, call B (two GPUs): the engine 1 -> 1 (7B BF16 at 1%, varint, 512 MiB buckets, deferred advance) with
# the detect ring (r2 = 9644601) against the same tree without it (s0: detect_known 128 x 4 x 4, no ring),
# alternated twice, atomic and streamed; the engine's GPU tests on r2 first.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s21b; mkdir -p $B && tar xJf .carry/s21b/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in engine_gpu_tests:60 engine_nccl_gpu_tests:150; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $B/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log >> $OUT/summary.txt
done
for round in 1 2; do
  for v in s0 r2; do
    t0=$(date +%s); timeout 100 $B/engine_nccl_bench_$v --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/1to1-$v.jsonl > /dev/null 2>>$W/1to1-$v.err; s "$v-$round" $?
  done
done
for v in s0 r2; do
  echo "== $v" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/1to1-$v.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
python3 bench/gpu/tail_summary.py $W/1to1-*.jsonl >> $OUT/summary.txt 2>&1
cat $W/*.err 2>/dev/null | grep -v "^$" | head -20 >> $OUT/summary.txt
find $W -name "*.err" -size 0 -delete
cd $W && tar czf $OUT/callB.tgz * && cat $OUT/summary.txt
