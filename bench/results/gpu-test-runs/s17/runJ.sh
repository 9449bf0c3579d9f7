#!/usr/bin/env bash
# Session 17, call J (one GPU): bench/gpu/local_memory_probe on the final tree's build: each decode kernel's declared
# local memory per thread and the drop in free device memory around its first launch.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
timeout 60 .carry/s17j/local_memory_probe | tee $OUT/probe.jsonl >> $OUT/summary.txt; echo "rc=${PIPESTATUS[0]}" >> $OUT/summary.txt
cat $OUT/summary.txt
