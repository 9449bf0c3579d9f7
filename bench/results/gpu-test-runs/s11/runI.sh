#!/usr/bin/env bash
# Session 11, call I (two GPUs, whichever card comes): the floor of an atomic version on this card
# (atomic_floor_bench, GPU 0), then the engine 1 -> 1 with the fused (F = 1) and the deferred (F = 2, the default)
# snapshot advance, both commits, receivers posting 3 ahead (tree 3dda811), dense broadcast of the same run.
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/lead
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 90 $B/atomic_floor_bench --reps 5 --json $OUT/atomic-floor.jsonl > $OUT/atomic-floor.log 2>&1; echo "floor rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
t0=$(date +%s); timeout 170 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:1,512:4:4:2 --encoders varint --json $OUT/advance.jsonl > $OUT/advance.log 2>&1; echo "advance rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
tail -5 $OUT/atomic-floor.log >> $OUT/summary.txt
grep -h 'summary\|dense' $OUT/advance.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','fused_advance','commit','median_version_ms','median_encode_ms','median_snapshot_advance_ms','median_ms')})
" >> $OUT/summary.txt
cat $OUT/summary.txt
