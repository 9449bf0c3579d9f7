#!/usr/bin/env bash
# Session 21, call F (two GPUs): the final tree's engine 1 -> 1 (7B BF16 at 1%, varint, atomic) over bucket sizes and
# encode lanes, now that the detect pass reads through its ring: configurations MB:encode lanes:verify lanes:advance
# in one process each run, twice (call E: 1024 MiB refused, frames over 1 GiB).
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s21f; mkdir -p $B && tar xJf .carry/s21d/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for round in 1 2; do
  t0=$(date +%s); timeout 280 $B/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs 512:4:4:2,768:4:4:2,896:4:4:2,768:3:4:2,768:6:4:2,384:4:4:2 --encoders varint --json $W/configs-$round.jsonl > /dev/null 2>>$W/bench.err; s "configs-$round" $?
done
grep -h 'summary\|dense' $W/configs-*.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('row','bucket_mb','encode_lanes','verify_lanes','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
cat $W/bench.err 2>/dev/null | grep -v "^$" | head -10 >> $OUT/summary.txt
cd $W && tar czf $OUT/callF.tgz * && cat $OUT/summary.txt
