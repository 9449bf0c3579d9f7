#!/usr/bin/env bash
# Session 16, call M (one GPU): the value-check kernel (apply_entropy_check_kernel, 4 warps a block) at 80 registers
# holds 24 warps an SM; bounded to 7 blocks an SM ("k7": 72 registers, 28 warps) or 8 ("k8": 64 registers with 132
# bytes of spills, 32 warps); "base" = 988850e (call J's build). gpu_codec_tests, memcheck and racecheck on k7, then
# gpu_bench at 7e9 alternating base/k7/k8, twice each.
set -u
B=/tmp/s16m; mkdir -p $B && tar xJf .carry/s16m/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench_k7 --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool.log >> $OUT/summary.txt
done
for r in 1 2; do for v in base k7 k8; do
  t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done; done
for v in base k7 k8; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply .*known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $W/gpu_codec_tests.log $W/memcheck.log $W/racecheck.log $OUT/ && cat $OUT/summary.txt
