#!/usr/bin/env bash
# Session 16, call C (one GPU): the histogram depth below call B's best (h4: 4 ahead) — 2 ("h2") and 3 ("h3") — and
# h4 with the ranking walk 1 vector ahead instead of 2 ("h4d1"); builds of 4ada4e0 with those constants;
# gpu_bench at 7e9, encode, alternating, twice each.
set -u
B=/tmp/s16c; mkdir -p $B && tar xJf .carry/s16c/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for r in 1 2; do for v in h4 h2 h3 h4d1; do
  t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done; done
for v in h4 h2 h3 h4d1; do echo "== $v" >> $OUT/summary.txt; grep -hE "encode .*known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $OUT/ && cat $OUT/summary.txt
