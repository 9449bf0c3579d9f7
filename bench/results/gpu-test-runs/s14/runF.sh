#!/usr/bin/env bash
# Session 14, call F (one GPU): the final tree's gpu_codec_tests (its entropy case now also flips bits in the values
# at the end of class bodies, read by apply_entropy_values_kernel), with the real RL stream; then the entropy
# test case under compute-sanitizer racecheck in quick mode.
set -u
B=/tmp/s14; mkdir -p $B && tar xJf .carry/s14g/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_codec_tests -tc='entropy on the GPU*' > $W/memcheck.log 2>&1; s memcheck-entropy-case $?
grep -E "ERROR SUMMARY|test cases" $W/memcheck.log >> $OUT/summary.txt
cd $W && tar czf $OUT/callF.tgz * && cat $OUT/summary.txt
