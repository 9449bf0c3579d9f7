#!/usr/bin/env bash
# Session 10, call C (2x H100): the Python package of the working tree built there; the whole suite (the new
# import-reuse case of test_torch.py included), then overhead_bench over TCP and over NCCL.
set -u
export NCCL_NVLS_ENABLE=0
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
t0=$(date +%s); XXHASH_INCLUDE=$PWD/.carry/include timeout 300 scripts/gpu_python_run.sh $OUT "nvidia-h100-x2 (2x H100 80GB HBM3)" > /dev/null 2>&1; s python $?
tail -8 $OUT/python-gpu.log >> $OUT/summary.txt 2>/dev/null || tail -30 $OUT/python-build.log >> $OUT/summary.txt
for tr in nccl tcp; do
  t0=$(date +%s); PYTHONPATH=/tmp/sparsesync-site timeout 150 python3 bench/python/overhead_bench.py --transport $tr --json $OUT/overhead-$tr.json > $OUT/overhead-$tr.log 2>&1; s overhead-$tr $?
  tail -30 $OUT/overhead-$tr.log | grep -A12 '"bench"' >> $OUT/summary.txt
done
cat $OUT/summary.txt
