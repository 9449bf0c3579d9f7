#!/usr/bin/env bash
# Session 11, call J (two GPUs, whichever card comes): the receiver posting 1 receive ahead (engine_nccl_bench built
# from e3ba104) against 3 ahead (3dda811), deferred snapshot advance in both, alternating twice on the same machine.
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/lead
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
for round in 1 2; do
  for b in ahead1:engine_nccl_bench_ahead1 ahead3:engine_nccl_bench; do
    n=${b%%:*}; exe=${b##*:}; t0=$(date +%s)
    timeout 80 $B/$exe --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $OUT/$n-$round.jsonl > $OUT/$n-$round.log 2>&1
    echo "$n round $round rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
  done
done
for f in $OUT/*.jsonl; do grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
"; done >> $OUT/summary.txt
cat $OUT/summary.txt
