#!/usr/bin/env bash
# Session 24, call B (two H200s; four were not lent): the engine's GPU tests that need at most two GPUs on this
# session's build (dbf8674: nccl_link's connecting buffer stream-ordered), then 1 -> 1 atomic versions (7B BF16 at
# 1%, varint) alternated over the frame tail's shape now that the link's calls are blocking: 512 MiB buckets (the
# default), 256 MiB buckets, the last 1 GiB in 128 MiB buckets, and 16 link CTAs; one run with the link trace.
set -u
export NCCL_NVLS_ENABLE=0
N=/tmp/s24new; mkdir -p $N
tar xJf .carry/s24a/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outB; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/*_tests /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in engine_nccl_gpu_tests:120 engine_nccl_kill_gpu_tests:60 engine_gpu_tests:60; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name config [extra args]
  local n=$1 c=$2; shift 2
  t0=$(date +%s); timeout 60 $N/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs $c --encoders varint --json $W/$n.jsonl "$@" > /dev/null 2>>$W/$n.err; s $n $?
}
for k in 1 2; do
  run b512-$k 512:4:4:2; run b256-$k 256:4:4:2; run tail-$k 512:4:4:2:1024:128; run cta16-$k 512:4:4:2 --link-ctas 16
done
SPARSESYNC_NCCL_LINK_TRACE=1 run trace 512:4:4:2
t0=$(date +%s); timeout 60 $N/engine_nccl_bench --workers 1 --versions 5 --commit streamed --configs 512:4:4:2 --encoders varint --json $W/s512.jsonl > /dev/null 2>>$W/s512.err; s s512 $?
for f in b512-1 b256-1 tail-1 cta16-1 b512-2 b256-2 tail-2 cta16-2 trace s512; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','workers','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
gzip -9 $W/*.log $W/*.err
cd $W && tar czf $OUT/callB.tgz * && cat $OUT/summary.txt
