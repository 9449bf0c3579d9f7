#!/usr/bin/env bash
# Session 24, call A (four H200s): every GPU test of the engine on this session's build (nccl_link's connecting
# buffer stream-ordered; the bench's timeline marks host messages), the kill test and the sharded tests on four
# GPUs, 1 -> 3 workers (atomic twice, streamed once), then the sharded bench. Binaries: .carry/s24a/bin.tar.xz (built here from the tree of this call's commit).
set -u
export NCCL_NVLS_ENABLE=0
N=/tmp/s24new; mkdir -p $N
tar xJf .carry/s24a/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outA; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/*_tests /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in frame_sync_tests:100 engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:120 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:90; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name commit: 1 -> 3 workers, 7B BF16 at 1%, varint
  t0=$(date +%s); timeout 60 $N/engine_nccl_bench --workers 3 --versions 5 --commit $2 --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/$1.err; s $1 $?
}
run w3a-1 atomic; run w3s streamed; run w3a-2 atomic
for f in w3a-1 w3s w3a-2; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','workers','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
t0=$(date +%s); timeout 80 $N/engine_sharded_bench --versions 4 --json $W/sharded.jsonl > $W/sharded.log 2>&1; s sharded $?
grep -h 'summary' $W/sharded.jsonl >> $OUT/summary.txt
gzip -9 $W/*.log $W/*.err
cd $W && tar czf $OUT/callA.tgz * && cat $OUT/summary.txt
