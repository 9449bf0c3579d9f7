#!/usr/bin/env bash
# Session 31, call A (one H200): the tree after the entropy host codec's fused count and -O2 loops changed (538409f; host code
# only, no kernel changed: the GPU codec tests compare payloads, checksums included, with the host codec).
# gpu_codec_tests and engine_gpu_tests built on the VM from that tree (.carry/s31a); then the Python package
# built there with its GPU endpoints and its whole pytest suite (scripts/gpu_python_run.sh).
set -u
mkdir -p $OUT /tmp/r && tar xJf .carry/s31a/bin.tar.xz -C /tmp/r
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
