#!/usr/bin/env bash
# Session 20, call I (one GPU, nvidia-h200): n3 = the size pass's rank counters as whole words (bytes pass; at most
# 64 groups there, more left to the deferred pass), n4 = n3 + the placing kernel's rank counters as whole words
# (15 KB a warp: 14 warps an SM); beside n2 (the final tree of call D). gpu_bench at 7e9 alternated, then traces.
set -u
B=/tmp/s20i; mkdir -p $B && tar xJf .carry/s20i/bin.tar.xz -C $B
ldd $B/gpu_bench_n3 | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for round in 1 2; do
  for v in n2 n3 n4; do
    t0=$(date +%s); timeout 120 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s "$v-$round" $?
  done
done
for v in n2 n3 n4; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base|!!" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
for v in n3 n4; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc entropy/ulp --trace $W/trace-$v.jsonl > $W/traced-$v.log 2>&1; s traced-$v $?
  python3 bench/gpu/trace_summary.py $W/trace-$v.jsonl --top 6 --match known > $W/trace_summary-$v.txt 2>&1
  gzip -9 $W/trace-$v.jsonl
done
tar czf $OUT/out.tar.gz -C $W . && grep -A30 "== n2" $OUT/summary.txt && for v in n3 n4; do echo "== trace $v"; grep -v "busy %" $W/trace_summary-$v.txt; done
