#!/usr/bin/env bash
# Session 11, call C (2x H100): where the engine's version time goes beyond the floor: encode lanes, bucket size
# and the fused advance, atomic commit, one process, same GPUs (binaries of f0ef2ea).
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/lead
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/engine_nccl_bench --workers 1 --versions 4 --commit atomic --configs 512:4:4:1,512:8:4:1,1024:4:4:1,1024:8:8:1,512:8:8:0 --encoders varint --json $OUT/explore.jsonl > $OUT/explore.log 2>&1; echo "explore rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -h 'summary\|dense' $OUT/explore.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','bucket_mb','encode_lanes','verify_lanes','fused_advance','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
cat $OUT/summary.txt
