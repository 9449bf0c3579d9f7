#!/usr/bin/env bash
# Session 16, call D (one GPU): call C's best (h2: histogram 2 vectors ahead, ranking walk 2) against h2 with the
# ranking walk 1 ahead ("h2d1"), the histogram 1 ahead ("h1") and both 1 ahead ("h1d1"); builds of 4ada4e0 with
# those constants; gpu_bench at 7e9, encode, alternating, twice each.
set -u
B=/tmp/s16d; mkdir -p $B && tar xJf .carry/s16d/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for r in 1 2; do for v in h2 h2d1 h1 h1d1; do
  t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done; done
for v in h2 h2d1 h1 h1d1; do echo "== $v" >> $OUT/summary.txt; grep -hE "encode .*known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $OUT/ && cat $OUT/summary.txt
