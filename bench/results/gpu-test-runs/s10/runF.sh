#!/usr/bin/env bash
# Session 10, call F (2x H100): the Python package of the working tree (import reuse keyed on data pointer, dtype,
# shape and strides, no longer on object identity) built there with the carried CUDA UCX; the whole suite, then
# overhead_bench over NCCL.
set -u
export NCCL_NVLS_ENABLE=0
cp -r .carry/ucx-cuda/ucx /tmp/ucx
export LD_LIBRARY_PATH=/tmp/ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
t0=$(date +%s); SPARSESYNC_UCX_ROOT=/tmp/ucx XXHASH_INCLUDE=$PWD/.carry/include timeout 330 scripts/gpu_python_run.sh $OUT "nvidia-h100-x2 (2x H100 80GB HBM3)" > /dev/null 2>&1; s python $?
tail -8 $OUT/python-gpu.log >> $OUT/summary.txt 2>/dev/null || tail -30 $OUT/python-build.log >> $OUT/summary.txt
t0=$(date +%s); PYTHONPATH=/tmp/sparsesync-site timeout 120 python3 bench/python/overhead_bench.py --transport nccl --json $OUT/overhead-nccl.json > $OUT/overhead-nccl.log 2>&1; s overhead-nccl $?
python3 -c "
import json; d=json.load(open('$OUT/overhead-nccl.json'))
print('fresh', d['fresh_imports']); print('reused', d['reused_imports']); print('bit_identical', d['bit_identical'])" >> $OUT/summary.txt 2>&1
cat $OUT/summary.txt
