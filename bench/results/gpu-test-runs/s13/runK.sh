#!/usr/bin/env bash
# Session 13, call K (one GPU): both entropy walks 2 vectors ahead instead of 4 ("new": less unrolled code still, as
# calls I and J) against 008f02d (4 ahead, "s3"). gpu_codec_tests with the real RL stream
# first, then gpu_bench at 7e9 alternating.
set -u
B=/tmp/s13; mkdir -p $B && tar xJf .carry/s13k/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions" $W/gpu_codec_tests.log >> $OUT/summary.txt
for v in s3 new s3 new; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in s3 new; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply entropy|apply rice|encode entropy" $W/codec-$v.log >> $OUT/summary.txt; done
cd $W && tar czf $OUT/callK.tgz * && cat $OUT/summary.txt
