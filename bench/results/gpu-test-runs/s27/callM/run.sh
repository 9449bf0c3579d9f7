#!/usr/bin/env bash
# Session 27, call M (one H200): after the review, rice's data size (two parameter bytes and the body in whole bytes)
# from one helper, rice_params::data_bytes, in the host plan and floor and in the device's rice size, warp rice cost
# and entropy size pass (no change meant). gpu_codec_tests of that tree (s27r): every encoder's GPU payloads byte for
# byte against the host's, the real stream's chain included.
set -u
mkdir -p $OUT /tmp/r && tar xJf .carry/s27r/bin.tar.xz -C /tmp/r
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
timeout 240 /tmp/r/gpu_codec_tests --duration=true > $OUT/gpu_codec_tests.log 2>&1; echo "gpu_codec_tests rc=$?" >> $OUT/summary.txt
grep -E "test cases|assertions|real stream|ERROR" $OUT/gpu_codec_tests.log | head -8 >> $OUT/summary.txt
gzip -9 $OUT/gpu_codec_tests.log
cat $OUT/summary.txt
