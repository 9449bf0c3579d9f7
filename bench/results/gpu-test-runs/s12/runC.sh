#!/usr/bin/env bash
# Session 12, call C (two GPUs, whichever card comes): the detect pass's block shape, swept at 7e9 (tiles per
# block 1 (the kernel before this session) to 16, with and without the next tile's loads in flight), and the
# urgent streams alone (eaf5a51, the detect kernel of a2d294f) against call A's binary (a2d294f + the timeline),
# alternating twice; one more urgent run with SPARSESYNC_NCCL_LINK_TRACE=1 (each credit and transfer, stamped).
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s12; mkdir -p $B && tar xJf .carry/s12c/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout 120 $B/gpu_bench --sizes 7e9 --densities 0.01 --reps 5 --enc varint/ulp --json $W/codec.jsonl > $W/codec.log 2>&1; s codec $?
for r in 1 2; do
  for v in base urgent; do
    t0=$(date +%s); timeout 120 $B/engine_nccl_bench_$v --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/engine-$v-$r.jsonl > /dev/null 2>$W/engine-$v-$r.err; s engine-$v-$r $?
  done
done
t0=$(date +%s); SPARSESYNC_NCCL_LINK_TRACE=1 timeout 120 $B/engine_nccl_bench_urgent --workers 1 --versions 3 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/engine-traced.jsonl > /dev/null 2>$W/engine-traced.err; s engine-traced $?
grep -E "detect only|phase|encode varint|apply varint|compare|memcpy" $W/codec.log >> $OUT/summary.txt
for f in $W/engine-*.jsonl; do
  grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
cd $W && tar czf $OUT/callC.tgz * && cat $OUT/summary.txt
