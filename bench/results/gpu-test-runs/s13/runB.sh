#!/usr/bin/env bash
# Session 13, call B (two GPUs): what holds the last frames' sends on the trainer's GPU after the encode (call A:
# 0.4 ms from ncclSend's enqueue to the send leaving, while the deferred snapshot advance runs). Experimental knobs
# of this build only (not committed): SPARSESYNC_X_ADVANCE_DELAY_US (the host sleeps before enqueueing the
# deferred advance), SPARSESYNC_X_ADVANCE_GRID (the advance kernels' grid, grid-stride over tiles),
# SPARSESYNC_X_LINK_MAX_CTAS (the pair communicators' maxCTAs; default 8); NCCL_NTHREADS is NCCL's own.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s13; mkdir -p $B && tar xJf .carry/s13b/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
run() {  # name, env...
  local n=$1; shift
  t0=$(date +%s); env "$@" timeout 100 $B/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/$n.jsonl > /dev/null 2>$W/$n.err; s $n $?
}
run base1 X=0
run delay600 SPARSESYNC_X_ADVANCE_DELAY_US=600
run grid264 SPARSESYNC_X_ADVANCE_GRID=264
run nthreads256 NCCL_NTHREADS=256
run ctas2 SPARSESYNC_X_LINK_MAX_CTAS=2
run base2 X=0
run delay600b SPARSESYNC_X_ADVANCE_DELAY_US=600
t0=$(date +%s); SPARSESYNC_X_ADVANCE_DELAY_US=600 SPARSESYNC_NCCL_LINK_TRACE=1 timeout 100 $B/engine_nccl_bench --workers 1 --versions 4 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/traced.jsonl > /dev/null 2>$W/traced.err; s traced $?
for f in $W/*.jsonl; do
  grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
cd $W && tar czf $OUT/callB.tgz * && cat $OUT/summary.txt
