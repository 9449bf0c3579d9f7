#!/usr/bin/env bash
# Session 20, call B (one GPU, nvidia-h200): the placing walk staged in a shared-memory ring (entropy_lane_walk_staged,
# P vectors a lane a round, S rounds: r22 = P 2, S 2; r23; r42), the decoder's count walk 8 vectors ahead (c8), beside
# base (70877bb). gpu_bench at 7e9 BF16 0.85%, each build twice, alternated; apply is verified (a misplaced change
# fails it). Build names: gpu_bench_<name>.
set -u
B=/tmp/s20c; mkdir -p $B && tar xJf .carry/s20c/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for round in 1 2; do
  for v in base r22 r23 r0c8 r42 r22c8; do
    t0=$(date +%s); timeout 120 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s "$v-$round" $?
  done
done
for v in base r22 r23 r0c8 r42 r22c8; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base|FAIL|rror" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
tar czf $OUT/out.tar.gz -C $W . && grep -A40 "== base" $OUT/summary.txt
