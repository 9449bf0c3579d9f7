#!/usr/bin/env bash
# Session 28, call B (one H200): the GPU publisher's encoder chosen at run time (device_source's second constructor;
# Python Publisher(encoder=)). engine_gpu_tests built on the VM from that tree (.carry/s28b; its new case: the engine
# with entropy chosen at run time, its bytes the host engine's, GPU workers in both commit modes and a host worker
# bit-identical); the Python package built here and its whole suite (new GPU cases: encoder= entropy, delta_varint,
# bitmap end to end; a bad name refused). Then gpu_bench (same tree; kernels unchanged since session 27) at 7.6e9
# BF16, rice and entropy in one run: the verified apply's cost an element for link_cost's GPU receivers.
set -u
mkdir -p $OUT /tmp/r && tar xJf .carry/s28b/bin.tar.xz -C /tmp/r && tar xJf .carry/s28b/bench.tar.xz -C /tmp/r
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
timeout 150 /tmp/r/engine_gpu_tests --duration=true > $OUT/engine_gpu_tests.log 2>&1; echo "engine_gpu_tests rc=$?" >> $OUT/summary.txt
grep -E "test cases|assertions|ERROR" $OUT/engine_gpu_tests.log | head -8 >> $OUT/summary.txt
gzip -9 $OUT/engine_gpu_tests.log
XXHASH_INCLUDE=$PWD/.carry/xxhash timeout 360 scripts/gpu_python_run.sh $OUT "one NVIDIA H200 (nvidia-h200)" > /dev/null 2>&1
echo "gpu_python_run rc=$?" >> $OUT/summary.txt
grep -E "encoder|passed|failed" $OUT/python-gpu.log | tail -8 >> $OUT/summary.txt
gzip -9 $OUT/python-build.log 2>/dev/null
timeout 150 /tmp/r/gpu_bench --sizes 7.6e9 --densities 0.01 --enc rice/ulp,entropy/ulp --reps 5 --no-sweep --no-baselines --json $OUT/gpu_bench.jsonl > $OUT/gpu_bench.md 2>&1
echo "gpu_bench rc=$?" >> $OUT/summary.txt
grep -iE "apply|encode" $OUT/gpu_bench.md | head -12 >> $OUT/summary.txt
cat $OUT/summary.txt
