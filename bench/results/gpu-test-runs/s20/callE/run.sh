#!/usr/bin/env bash
# Session 20, call E (one GPU, nvidia-h200): where the varint and rice encodes and applies spend their time on this
# card (issue 11's engine encodes with varint): one traced gpu_bench run of the final tree (n2, call D's build) at
# 7e9 BF16 0.85%, and its rows.
set -u
B=/tmp/s20e; mkdir -p $B && tar xJf .carry/s20e/bin.tar.xz -C $B
ldd $B/gpu_bench_n2 | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 150 $B/gpu_bench_n2 --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc varint/ulp,rice/ulp --trace $W/trace.jsonl > $W/traced.log 2>&1; s traced $?
grep -hE "known base|memcpy" $W/traced.log | grep -v phase >> $OUT/summary.txt
python3 bench/gpu/trace_summary.py $W/trace.jsonl --top 10 --match known > $W/trace_summary.txt 2>&1
gzip -9 $W/trace.jsonl
tar czf $OUT/out.tar.gz -C $W . && cat $OUT/summary.txt && cat $W/trace_summary.txt | grep -v "busy %"
