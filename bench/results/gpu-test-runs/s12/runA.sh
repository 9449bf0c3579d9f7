#!/usr/bin/env bash
# Session 12, call A (two GPUs, whichever card comes): where an atomic version's time goes. The engine 1 -> 1 with
# the new host-side timeline (bench/gpu/version_timeline.hpp: trainer and worker 0 events on one clock), the
# default configuration and two variants (384 MiB buckets; 6 encode lanes); the atomic floor of this card; the
# single-bucket codec at 7B (encode and apply, known and hashed base, the detect-pass sweep) on GPU 0.
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/s12
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 60 $B/atomic_floor_bench --reps 5 --json $OUT/atomic-floor.jsonl > $OUT/atomic-floor.log 2>&1; echo "floor rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:2,384:4:4:2,512:6:4:2 --encoders varint --json $OUT/engine.jsonl > $OUT/engine.log 2>&1; echo "engine rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 120 $B/gpu_bench --sizes 7e9 --densities 0.01 --reps 5 --enc varint/ulp --json $OUT/codec.jsonl > $OUT/codec.log 2>&1; echo "codec rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
tail -4 $OUT/atomic-floor.log >> $OUT/summary.txt
grep -h 'summary\|dense' $OUT/engine.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','bucket_mb','encode_lanes','commit','median_version_ms','median_encode_ms','median_snapshot_advance_ms','median_ms')})
" >> $OUT/summary.txt
cat $OUT/summary.txt
