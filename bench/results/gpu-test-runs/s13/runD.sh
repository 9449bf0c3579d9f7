#!/usr/bin/env bash
# Session 13, call D (two GPUs): the tail after the last frame; SPARSESYNC_X_GATE=1 (experimental knob of this
# build only): the deferred snapshot advance waits on the GPU for the link's sends of the version (the host waits
# up to 3 ms for them to be enqueued). "base" = 2f55a60 (call B's build, knobs unset);
# "new" = the working tree: the receiver hands every posted frame on once the version's last bucket is posted,
# and the trainer's nccl_link no longer waits for a deferred ncclSend to settle. Alternating, atomic;
# then streamed once each, and one traced run of "new" with the gate.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s13; mkdir -p $B && tar xJf .carry/s13d/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
run() {  # name, binary, commit, env...
  local n=$1 b=$2 c=$3; shift 3
  t0=$(date +%s); env "$@" timeout 100 $B/engine_nccl_bench_$b --workers 1 --versions 5 --commit $c --configs 512:4:4:2 --encoders varint --json $W/$n.jsonl > /dev/null 2>$W/$n.err; s $n $?
}
run base1 base atomic X=0
run gate1 new atomic SPARSESYNC_X_GATE=1
run new1 new atomic X=0
run base2 base atomic X=0
run gate2 new atomic SPARSESYNC_X_GATE=1
run new2 new atomic X=0
run base-streamed base streamed X=0
run gate-streamed new streamed SPARSESYNC_X_GATE=1
t0=$(date +%s); SPARSESYNC_X_GATE=1 SPARSESYNC_NCCL_LINK_TRACE=1 timeout 100 $B/engine_nccl_bench_new --workers 1 --versions 4 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/traced.jsonl > /dev/null 2>$W/traced.err; s traced $?
for f in $W/*.jsonl; do
  grep -h 'summary\|dense' $f | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print('$(basename $f)', {k:r.get(k) for k in ('row','commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
done
cd $W && tar czf $OUT/callD.tgz * && cat $OUT/summary.txt
