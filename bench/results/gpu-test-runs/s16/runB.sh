#!/usr/bin/env bash
# Session 16, call B (one GPU): the size pass's read-ahead depths now that 19 warps fit an SM (call A's tree,
# 4ada4e0, "new": ranking walk 2 vectors ahead, histogram 8) against builds of the same tree with the ranking walk 3
# ("d3") or 4 ("d4") ahead, or the histogram 4 ahead ("h4"); gpu_bench at 7e9, encode, alternating, twice each.
set -u
B=/tmp/s16b; mkdir -p $B && tar xJf .carry/s16b/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for r in 1 2; do for v in new d3 d4 h4; do
  t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done; done
for v in new d3 d4 h4; do echo "== $v" >> $OUT/summary.txt; grep -hE "encode .*known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $OUT/ && cat $OUT/summary.txt
