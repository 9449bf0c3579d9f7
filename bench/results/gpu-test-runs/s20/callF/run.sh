#!/usr/bin/env bash
# Session 20, call F (one GPU, nvidia-h200): the detect pass's tuning for a known base (policy_sm90::detect_known,
# threads x vectors a thread, blocks an SM asked for), chosen on an H100, tried on this H200: n2 = 128 x 4, 4 (the
# final tree); k2 = 256 x 2, 4; k3 = 128 x 2, 8; k4 = 64 x 4, 8; k5 = 256 x 1, 4. gpu_bench at 7e9, encodes of
# varint, rice and entropy (every encoder's first pass is detect), each build twice, alternated.
set -u
B=/tmp/s20f; mkdir -p $B && tar xJf .carry/s20f/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for round in 1 2; do
  for v in n2 k2 k3 k4 k5; do
    t0=$(date +%s); timeout 120 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc varint/ulp,rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s "$v-$round" $?
  done
done
for v in n2 k2 k3 k4 k5; do echo "== $v" >> $OUT/summary.txt; grep -hE "encode|FAIL|rror" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
tar czf $OUT/out.tar.gz -C $W . && grep -A40 "== n2" $OUT/summary.txt
