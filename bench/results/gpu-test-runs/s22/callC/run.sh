#!/usr/bin/env bash
# Session 22, call C (two GPUs). base = f09fff8 (call A's binaries); new = base + the history's dropped versions
# released after the encode (sender.hpp) + warp_for_each across tile boundaries (encode_kernels.cuh). GPU codec
# tests and sanitizers on new; gpu_bench encodes (varint, raw, bitmap at 7e9, one bucket) alternated base/new;
# the engine (7B BF16 at 1%, varint) alternated base/new, then new with NCCL_COMM_BLOCKING=1 (NCCL's launches on
# the calling thread instead of a thread per call of a non-blocking communicator: measured, not a setting we ship).
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s22c; mkdir -p $B && tar xJf .carry/s22c/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/outC; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
if [ -z "${ENGINE_ONLY:-}" ]; then  # ENGINE_ONLY=1: the second half alone (the first run stopped at a script error there)
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench --sizes 2e6 --densities 0.01,0.3 --reps 1 --no-sweep --no-baselines --enc varint/ulp,raw/absolute,bitmap/absolute > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|!!" $W/$tool.log >> $OUT/summary.txt
done
for round in 1 2; do
  for v in base new; do
    g=$B/gpu_bench; [ $v = base ] && g=$B/gpu_bench_base
    t0=$(date +%s); timeout 100 $g --sizes 7e9 --densities 0.01 --reps 5 --no-sweep --no-baselines --enc varint/ulp,raw/absolute,bitmap/absolute --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s "codec-$v-$round" $?
  done
done
for v in base new; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base|FAIL|rror|!!" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
fi
run() {  # name binary [env]
  t0=$(date +%s); env ${3:-} timeout 100 $2 --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/bench.err; s $1 $?
}
run base-1 $B/engine_nccl_bench_base; run new-1 $B/engine_nccl_bench; run base-2 $B/engine_nccl_bench_base; run new-2 $B/engine_nccl_bench
run blocking-1 $B/engine_nccl_bench NCCL_COMM_BLOCKING=1; run new-3 $B/engine_nccl_bench; run blocking-2 $B/engine_nccl_bench NCCL_COMM_BLOCKING=1
for f in base-1 new-1 base-2 new-2 blocking-1 new-3 blocking-2; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
head -c 3000 $W/bench.err >> $OUT/summary.txt
gzip -9 $W/gpu_codec_tests.log 2>/dev/null; cp $W/*.jsonl $W/gpu_codec_tests.log.gz $OUT/ 2>/dev/null
cat $OUT/summary.txt
