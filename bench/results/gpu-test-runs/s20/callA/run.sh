#!/usr/bin/env bash
# Session 20, call A (one GPU, as lent: nvidia-h200): the walk probe's transposed cp.async fetch (layout xpose)
# beside the lane-range walks, and session 19's final tree (70877bb) at 7e9 on this card, with one traced run.
set -u
B=/tmp/s20a; mkdir -p $B && tar xJf .carry/s20a/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/entropy_walk_probe 7e9 3 > $W/probe.jsonl 2>&1; s probe $?
cat $W/probe.jsonl >> $OUT/summary.txt
t0=$(date +%s); timeout 150 $B/gpu_bench --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec.jsonl > $W/codec.log 2>&1; s codec $?
grep -hE "known base|memcpy" $W/codec.log | grep -v phase >> $OUT/summary.txt
t0=$(date +%s); timeout 150 $B/gpu_bench --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc entropy/ulp --trace $W/trace.jsonl > $W/traced.log 2>&1; s traced $?
python3 bench/gpu/trace_summary.py $W/trace.jsonl --top 12 > $W/trace_summary.txt 2>&1 || true
gzip -9 $W/trace.jsonl
tar czf $OUT/out.tar.gz -C $W . && tail -60 $OUT/summary.txt
