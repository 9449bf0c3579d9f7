#!/usr/bin/env bash
# Session 21, call G (one GPU): after review, apply_plan reads a frame's encoder from cfg_.encoder alone (the
# redundant frame_encoder_ member gone; host code only): gpu_codec_tests (streamed rollback by re-decode included),
# frame_sync_tests, engine_gpu_tests.
set -u
B=/tmp/s21g; mkdir -p $B && tar xJf .carry/s21g/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in gpu_codec_tests:200 frame_sync_tests:60 engine_gpu_tests:60; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $B/$n --duration=true > $OUT/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $OUT/$n.log | head -8 >> $OUT/summary.txt
done
gzip -9 $OUT/*.log; cat $OUT/summary.txt
