#!/usr/bin/env bash
# Session 11, call D (2x H100): call C's second configuration alone (8 encode lanes), with the bench that now
# reports a worker's error and the trainer's; then 1 GiB buckets (both commit modes). Binaries of 7bb9c4a.
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/lead
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
t0=$(date +%s); timeout 90 $B/engine_nccl_bench --workers 1 --versions 4 --commit atomic --configs 512:8:4:1 --encoders varint --json $OUT/lanes8.jsonl > $OUT/lanes8.log 2>&1; echo "lanes8 rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
t0=$(date +%s); timeout 120 $B/engine_nccl_bench --workers 1 --versions 4 --commit both --configs 1024:4:4:1 --encoders varint --json $OUT/bucket1g.jsonl > $OUT/bucket1g.log 2>&1; echo "bucket1g rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -h "engine_nccl_bench:" $OUT/*.log >> $OUT/summary.txt
cat $OUT/*.jsonl | grep 'summary\|dense' | cut -c1-330 >> $OUT/summary.txt
cat $OUT/summary.txt
