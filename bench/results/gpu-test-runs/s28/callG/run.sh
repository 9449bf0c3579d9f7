#!/usr/bin/env bash
# Session 28, call G (one H200): the Python suite after the review's mends (named_encoder; the GPU publisher's link rule in cuda_place)
set -u
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
XXHASH_INCLUDE=$PWD/.carry/xxhash timeout 400 scripts/gpu_python_run.sh $OUT "one NVIDIA H200 (nvidia-h200)" > /dev/null 2>&1
echo "gpu_python_run rc=$?" >> $OUT/summary.txt
grep -E "encoder|passed|failed" $OUT/python-gpu.log | tail -8 >> $OUT/summary.txt
gzip -9 $OUT/python-build.log 2>/dev/null
cat $OUT/summary.txt
