#!/usr/bin/env bash
# Session 13, call A (two GPUs): where the last frame's 0.4-0.8 ms between its hand-off to the link and the worker
# goes. The engine 1 -> 1 (7B BF16 at 1%, varint, atomic) untraced, then with SPARSESYNC_NCCL_LINK_TRACE=1, whose
# lines now include when each send left and each frame landed on its GPU (host functions behind the transfers).
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s13; mkdir -p $B && tar xJf .carry/s13a/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 100 $B/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/plain.jsonl > /dev/null 2>$W/plain.err; s plain $?
t0=$(date +%s); SPARSESYNC_NCCL_LINK_TRACE=1 timeout 100 $B/engine_nccl_bench --workers 1 --versions 4 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/traced.jsonl > /dev/null 2>$W/traced.err; s traced $?
for f in $W/*.jsonl; do
  grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
cd $W && tar czf $OUT/callA.tgz * && cat $OUT/summary.txt
