#!/usr/bin/env bash
# Session 15, call D (one GPU): how far ahead the count-only walks read. "base" = 1148998 (decoder's first walk 2
# vectors ahead, the size pass's coalesced histogram 4 ahead); "d8" = both 8 ahead; "d4" = the decoder's first
# walk 4 ahead, the histogram 8 ahead. gpu_bench at 7e9 alternating (entropy only, with rice as the reference).
set -u
B=/tmp/s15d; mkdir -p $B && tar xJf .carry/s15d/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for v in base d8 d4 base d8 d4; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in base d8 d4; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base" $W/codec-$v.log >> $OUT/summary.txt; done
cp $W/*.jsonl $OUT/ && cat $OUT/summary.txt
