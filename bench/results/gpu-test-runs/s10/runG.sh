#!/usr/bin/env bash
# Session 10, call G (2x H100): the Python package of 300edf0 (marks computed once per publish) built there; the
# torch, CUDA endpoint and RL loop tests, then overhead_bench over NCCL.
set -u
export NCCL_NVLS_ENABLE=0
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
t0=$(date +%s); XXHASH_INCLUDE=$PWD/.carry/include timeout 300 scripts/gpu_python_run.sh $OUT "nvidia-h100-x2 (2x H100 80GB HBM3)" -k "torch or rl_loop or cuda_endpoints or zero_copy" > /dev/null 2>&1; s python $?
tail -5 $OUT/python-gpu.log >> $OUT/summary.txt 2>/dev/null || tail -30 $OUT/python-build.log >> $OUT/summary.txt
t0=$(date +%s); PYTHONPATH=/tmp/sparsesync-site timeout 100 python3 bench/python/overhead_bench.py --transport nccl --json $OUT/overhead-nccl.json > $OUT/overhead-nccl.log 2>&1; s overhead-nccl $?
python3 -c "
import json; d=json.load(open('$OUT/overhead-nccl.json'))
print('fresh', d['fresh_imports']); print('reused', d['reused_imports']); print('bit_identical', d['bit_identical'])" >> $OUT/summary.txt 2>&1
cat $OUT/summary.txt
