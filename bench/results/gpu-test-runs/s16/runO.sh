#!/usr/bin/env bash
# Session 16, call O (one GPU): the thread-per-chunk encode passes (rice's size and write, entropy's write: 80-94
# registers, 5-6 blocks of 128 an SM, so a 7e9 model's 835 blocks take two waves) bounded to 7 blocks an SM (72
# registers, some spills): "w7"; "base" = aeecd02 (call N's build). gpu_codec_tests on w7, then gpu_bench at 7e9
# alternating base/w7, twice each.
set -u
B=/tmp/s16o; mkdir -p $B && tar xJf .carry/s16o/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for r in 1 2; do for v in base w7; do
  t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done; done
for v in base w7; do echo "== $v" >> $OUT/summary.txt; grep -hE "encode .*known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $W/gpu_codec_tests.log $OUT/ && cat $OUT/summary.txt
