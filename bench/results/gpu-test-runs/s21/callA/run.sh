#!/usr/bin/env bash
# Session 21, call A (one GPU): the detect pass with a shared-memory ring (r2 = the tree with the known-base tuning
# 128 x 4 vectors, 4 blocks, ring of 2 tiles) against s0 (the same tree, the tuning without the ring, as at 1c482a5):
# gpu_codec_tests on r2 with the real RL stream, memcheck and racecheck of a 2e6 encode + apply on r2, the detect
# sweep at 7e9 (every variant's changes and checksum deltas checked against the first's), encodes alternated.
set -u
B=/tmp/s21a; mkdir -p $B && tar xJf .carry/s21a/bin.tar.xz -C $B
ldd $B/gpu_bench_r2 | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench_r2 --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc varint/ulp,rice/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|!!" $W/$tool.log >> $OUT/summary.txt
done
t0=$(date +%s); timeout 150 $B/gpu_bench_r2 --sizes 7e9 --densities 0.01 --reps 5 --no-sweep --enc varint/ulp --json $W/sweep.jsonl > $W/sweep.log 2>&1; s baselines $?
t0=$(date +%s); timeout 200 $B/gpu_bench_r2 --sizes 7e9 --densities 0.01 --reps 5 --no-baselines --enc none --json $W/sweep.jsonl >> $W/sweep.log 2>&1; s sweep $?
grep -E "compare|memcpy|detect only|!!" $W/sweep.log >> $OUT/summary.txt
for round in 1 2; do
  for v in s0 r2; do
    t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.01 --reps 5 --no-sweep --no-baselines --enc varint/ulp,rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s "$v-$round" $?
  done
done
for v in s0 r2; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base|FAIL|rror|!!|VOID" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
tar czf $OUT/out.tar.gz -C $W . && cat $OUT/summary.txt
