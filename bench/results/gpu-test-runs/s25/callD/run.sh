#!/usr/bin/env bash
# Session 25, call D (one H200; no two-GPU machine was lent): an atomic 7B version's commit alone, after all 33
# buckets verified on four lanes (gpu_bench --commit-buckets 33: one bucket after another as before, and
# apply_plan::commit of the frame list, alternated, model bit-identical checked after every version), beside the
# card's floor for that pass (atomic_floor_bench: the same number of changes written by the simplest scatter).
set -u
N=/tmp/s25d; W=/tmp/outD; mkdir -p $N $W
tar xJf .carry/s25d/bin.tar.xz -C $N
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $N/gpu_bench --sizes 7.6e9 --densities 0.01 --enc varint/ulp --reps 11 --no-sweep --no-baselines --commit-buckets 33 --json $W/gpu_bench.jsonl > $W/gpu_bench.md 2>&1
echo "gpu_bench rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -E "memcpy|atomic commit|apply|encode varint" $W/gpu_bench.md >> $OUT/summary.txt
t0=$(date +%s); timeout 120 $N/atomic_floor_bench --reps 5 --json $W/floor.jsonl > $W/floor.md 2>&1
echo "atomic_floor_bench rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
cat $W/floor.md >> $OUT/summary.txt
cd $W && tar czf $OUT/callD.tgz * && cat $OUT/summary.txt
