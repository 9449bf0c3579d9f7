#!/usr/bin/env bash
# Session 16, call P (one GPU): the review's mend (the warp decoder's lane 0 runs its header read through one generic
# lambda for either reader; no behaviour change): gpu_codec_tests, memcheck and racecheck on it ("new"), then
# gpu_bench at 7e9 against call N's build ("base"), alternating.
set -u
B=/tmp/s16p; mkdir -p $B && tar xJf .carry/s16p/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool.log >> $OUT/summary.txt
done
for r in 1 2; do for v in base new; do
  t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done; done
for v in base new; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply .*known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $W/gpu_codec_tests.log $W/memcheck.log $W/racecheck.log $OUT/ && cat $OUT/summary.txt
