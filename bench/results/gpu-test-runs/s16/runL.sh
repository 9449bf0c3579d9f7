#!/usr/bin/env bash
# Session 16, call L (one GPU): the warp decoder's read-ahead depths at 12 warps an SM (call J's tree, "new": first
# walk 4 vectors ahead, placing walk 2) against builds of the same tree with the first walk 2 ("c2") or 3 ("c3")
# ahead, or the placing walk 1 ahead ("p1"); gpu_bench at 7e9, alternating, twice each.
set -u
B=/tmp/s16l; mkdir -p $B && tar xJf .carry/s16l/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for r in 1 2; do for v in new c2 c3 p1; do
  t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done; done
for v in new c2 c3 p1; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply .*known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $OUT/ && cat $OUT/summary.txt
