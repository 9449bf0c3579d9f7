#!/usr/bin/env bash
# Session 16, call K (one GPU): where the final tree's entropy encoder and decoder spend their time, kernel by kernel: gpu_bench
# --trace (a CUPTI timeline, each timed run marked) at 7e9 BF16, 0.72% density, rice and entropy (call J's build); summarized by
# bench/gpu/trace_summary.py --versions 0-9 here.
set -u
B=/tmp/s16k; mkdir -p $B && tar xJf .carry/s16k/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_bench --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $OUT/codec.jsonl --trace $OUT/trace.jsonl > $OUT/codec.log 2>&1; echo "gpu_bench rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -hE "encode |apply " $OUT/codec.log >> $OUT/summary.txt
gzip -9 $OUT/trace.jsonl
cat $OUT/summary.txt
