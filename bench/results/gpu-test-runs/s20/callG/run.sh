#!/usr/bin/env bash
# Session 20, call G (one GPU, nvidia-h200): call F's k3 (detect 128 x 2, 8 blocks an SM: 2048-element tiles) encoded
# entropy in 8.5 ms against 29.7; traced here, beside n2, to see which kernels moved.
set -u
B=/tmp/s20f; mkdir -p $B && tar xJf .carry/s20f/bin.tar.xz -C $B
ldd $B/gpu_bench_n2 | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for v in k3 n2; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --trace $W/trace-$v.jsonl > $W/traced-$v.log 2>&1; s traced-$v $?
  python3 bench/gpu/trace_summary.py $W/trace-$v.jsonl --top 6 --match known > $W/trace_summary-$v.txt 2>&1
  gzip -9 $W/trace-$v.jsonl
done
tar czf $OUT/out.tar.gz -C $W . && for v in k3 n2; do echo "== $v"; grep -v "busy %" $W/trace_summary-$v.txt | grep -A6 "encode"; done
