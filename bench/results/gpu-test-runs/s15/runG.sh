#!/usr/bin/env bash
# Session 15, call G (one GPU): the ranking walks (the size pass's second walk, the decoder's placing walk) 3 vectors
# ahead instead of 2 ("d3"), against 8a3252c ("base", call F's new build). gpu_codec_tests with the real RL stream
# on d3, then gpu_bench at 7e9 alternating base/d3.
set -u
B=/tmp/s15g; mkdir -p $B && tar xJf .carry/s15g/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for v in base d3 base d3; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in base d3; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $W/gpu_codec_tests.log $OUT/ && cat $OUT/summary.txt
