#!/usr/bin/env bash
# Session 22, call F (two GPUs): call C's new binary, atomic 7B versions. Call E's link trace showed the last three
# frames' sends taking ~0.2-0.3 ms each on the trainer's GPU (~30 GB/s, 4 NCCL CTAs beside the detect passes and the
# deferred snapshot advance), one after the other on the link's stream. Here: the same run with NCCL using 8
# channels per peer (NCCL_NCHANNELS_PER_PEER=8), and with the snapshot advance after each bucket (F = 0: nothing
# left to run beside the last sends), each against the default in the same call.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s22c; mkdir -p $B && tar xJf .carry/s22c/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outF; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
run() {  # name configs [env]
  t0=$(date +%s); env ${3:-} timeout 90 $B/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs $2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/bench.err; s $1 $?
}
run def-1 512:4:4:2; run ch8-1 512:4:4:2 NCCL_NCHANNELS_PER_PEER=8; run adv0-1 512:4:4:0
run def-2 512:4:4:2; run ch8-2 512:4:4:2 NCCL_NCHANNELS_PER_PEER=8
for f in def-1 ch8-1 adv0-1 def-2 ch8-2; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','fused_advance','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
head -c 2000 $W/bench.err >> $OUT/summary.txt
cd $W && tar czf $OUT/callF.tgz *.jsonl && cat $OUT/summary.txt
