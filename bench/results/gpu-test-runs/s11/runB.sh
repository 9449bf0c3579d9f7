#!/usr/bin/env bash
# Session 11, call B (two GPUs, kind nvidia-h200-x2: an H200 pair if one is lent, else H100s): the floor of an atomic
# version on this card (atomic_floor_bench on GPU 0, with the prepared-sector commit pass) and the engine bench
# 1 -> 1 (both commit modes) with the dense broadcast of the same run. Binaries of f0ef2ea + atomic_floor_bench.
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/lead
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/summary.txt
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 100 $B/atomic_floor_bench --reps 5 --json $OUT/atomic-floor.jsonl > $OUT/atomic-floor.log 2>&1; echo "floor rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
t0=$(date +%s); timeout 100 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:1 --encoders varint --json $OUT/1to1.jsonl > $OUT/bench-1to1.log 2>&1; echo "bench rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
tail -6 $OUT/atomic-floor.log >> $OUT/summary.txt
grep -h 'summary\|dense' $OUT/1to1.jsonl | cut -c1-330 >> $OUT/summary.txt
cat $OUT/summary.txt
