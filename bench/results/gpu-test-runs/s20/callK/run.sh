#!/usr/bin/env bash
# Session 20, call K (one GPU, nvidia-h200): gpu_codec_tests with the entropy case's new data kind (BF16 exponents in a
# band of 100 values: 65-128 groups a chunk, which the size pass's bytes pass now leaves to its deferred pass), the
# real RL stream, and memcheck of the entropy cases (quick).
set -u
B=/tmp/s20k; mkdir -p $B && tar xJf .carry/s20k/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 240 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED|band" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_codec_tests -tc="entropy on the GPU*" > $W/memcheck-tests.log 2>&1; s memcheck-entropy-tests $?
grep -E "ERROR SUMMARY|test cases|assertions" $W/memcheck-tests.log >> $OUT/summary.txt
cp $W/gpu_codec_tests.log $OUT/ && cat $OUT/summary.txt
