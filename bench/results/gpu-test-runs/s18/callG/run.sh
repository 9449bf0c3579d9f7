#!/usr/bin/env bash
# Session 18, call G (one GPU): the review's mend of the tests only (the two entropy test cases share their frame
# scan and their apply-and-bit-flip check, tests/cuda/gpu_codec_test.cu); the library as at e81819e (call F).
# gpu_codec_tests with the real RL stream.
set -u
B=/tmp/s18g; mkdir -p $B && tar xJf .carry/s18g/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $OUT/gpu_codec_tests.log 2>&1; echo "gpu_codec_tests rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -E "test cases|assertions|ERROR|FAILED" $OUT/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
cat $OUT/summary.txt
