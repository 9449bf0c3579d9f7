#!/usr/bin/env bash
# Session 11, call K (two GPUs): the Python package of 13f8858 built there (the engine now defers the snapshot
# advance and waits for it in settle(); receivers post 3 ahead): the torch, CUDA endpoint, zero-copy and RL loop tests.
set -u
export NCCL_NVLS_ENABLE=0
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee -a $OUT/summary.txt
t0=$(date +%s); XXHASH_INCLUDE=$PWD/.carry/include timeout 230 scripts/gpu_python_run.sh $OUT "lent two-GPU machine" -k "torch or rl_loop or cuda_endpoints or zero_copy" > /dev/null 2>&1; s python $?
tail -5 $OUT/python-gpu.log >> $OUT/summary.txt 2>/dev/null || tail -30 $OUT/python-build.log >> $OUT/summary.txt
cat $OUT/summary.txt
