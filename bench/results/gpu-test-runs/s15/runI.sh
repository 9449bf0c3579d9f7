#!/usr/bin/env bash
# Session 15, call I (one GPU): the final test build (call H's decoder and a new test case that reads random streams
# with bit_reader and word_bit_reader through the same operations): gpu_codec_tests with the real RL stream.
set -u
B=/tmp/s15i; mkdir -p $B && tar xJf .carry/s15i/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $OUT/gpu_codec_tests.log 2>&1; echo "gpu_codec_tests rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -E "test cases|assertions|ERROR|FAILED|readers differ" $OUT/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
cat $OUT/summary.txt
