#!/usr/bin/env bash
# Session 28, call A (one H200): the tree after `auto` learned the link's speed (encode_options::link; host code
# only, no kernel changed). gpu_codec_tests (every encoder's GPU payloads byte for byte against the host's, the
# real stream's chain included) and engine_gpu_tests (the one engine with GPU weights) built on the VM from that
# tree (.carry/s28a); then the Python package built here with its GPU endpoints and its whole pytest suite
# (scripts/gpu_python_run.sh; the new GPU case: a GPU publisher refuses link_gbps).
set -u
mkdir -p $OUT /tmp/r && tar xJf .carry/s28a/bin.tar.xz -C /tmp/r
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
for t in gpu_codec_tests:200 engine_gpu_tests:150; do
  n=${t%%:*}; l=${t##*:}
  timeout $l /tmp/r/$n --duration=true > $OUT/$n.log 2>&1; echo "$n rc=$?" >> $OUT/summary.txt
  grep -E "test cases|assertions|real stream|ERROR" $OUT/$n.log | head -8 >> $OUT/summary.txt
  gzip -9 $OUT/$n.log
done
XXHASH_INCLUDE=$PWD/.carry/xxhash timeout 420 scripts/gpu_python_run.sh $OUT "one NVIDIA H200 (nvidia-h200)" > /dev/null 2>&1
echo "gpu_python_run rc=$?" >> $OUT/summary.txt
grep -E "passed|failed" $OUT/python-gpu.log | tail -2 >> $OUT/summary.txt
gzip -9 $OUT/python-build.log 2>/dev/null
cat $OUT/summary.txt
