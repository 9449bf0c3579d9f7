#!/usr/bin/env bash
# Session 24, call D (one H200): is a bucket's encode as efficient alone as the whole model's? The engine's trainer
# hands out a 7B version's 33 buckets (~460 MB of BF16 each) at one per ~0.28 ms, where reading both copies takes
# ~0.20 ms. gpu_bench at a bucket's size (2.3e8 elements) and at the model's (7.6e9), 1%, varint, known base:
# memcpy, the read-both floor, the detect pass alone (every policy of the sweep) and the whole encode.
set -u
N=/tmp/s24d; mkdir -p $N; tar xJf .carry/s24d/bin.tar.xz -C $N
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s)
timeout 400 $N/gpu_bench --sizes 2.3e8,1.15e8,7.6e9 --densities 0.01 --enc varint/ulp --reps 15 --json $OUT/gpu_bench.jsonl > $OUT/gpu_bench.md 2>&1
echo "gpu_bench rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -E "memcpy|compare|default, known|detect only 128x4 min4, no ring|encode varint|phase" $OUT/gpu_bench.md >> $OUT/summary.txt
cat $OUT/summary.txt
