#!/usr/bin/env bash
# Session 24, call H (one H200): gpu_codec_tests after a refactor of the review (the XXH64 tail shared by the
# writing side's hash pass and the verify's warp hash: chunk_hash_finish), the device time's last two minutes.
set -u
N=/tmp/s24h; mkdir -p $N; tar xJf .carry/s24h/bin.tar.xz -C $N
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s); timeout 90 $N/gpu_codec_tests --duration=true > $OUT/gpu_codec_tests.log 2>&1
echo "gpu_codec_tests rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -E "test cases|assertions|ERROR" $OUT/gpu_codec_tests.log | head -8 >> $OUT/summary.txt
gzip -9 $OUT/gpu_codec_tests.log; cat $OUT/summary.txt
