#!/usr/bin/env bash
# Session 28, call H (one H200): call G again after the late-worker test waits for its catch-up
set -u
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
XXHASH_INCLUDE=$PWD/.carry/xxhash timeout 400 scripts/gpu_python_run.sh $OUT "one NVIDIA H200 (nvidia-h200)" > /dev/null 2>&1
echo "gpu_python_run rc=$?" >> $OUT/summary.txt
grep -E "encoder|passed|failed" $OUT/python-gpu.log | tail -8 >> $OUT/summary.txt
gzip -9 $OUT/python-build.log 2>/dev/null
cat $OUT/summary.txt
