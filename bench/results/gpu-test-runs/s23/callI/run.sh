#!/usr/bin/env bash
# Session 23, call I (four GPUs), PREPARED, NOT RUN (the session's device time was spent): what call H left unchecked
# on the final build (a9915c4: nccl_link's blocking frames' communicator): every GPU test of the engine (the kill
# test and the sharded tests on four GPUs), then 1 -> 3 workers old (session 22's final binary, .carry/s22h) / new
# alternated, atomic and streamed, and the sharded bench. Needs .carry/s23i/bin.tar.xz built from a9915c4 (or
# later, if nothing under include/ or transports/ changed) with lib/libcupti.so.13, and .carry/s22h.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s23old; N=/tmp/s23new; mkdir -p $O $N
tar xJf .carry/s22h/bin.tar.xz -C $O && tar xJf .carry/s23i/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outI; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/*_tests /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in frame_sync_tests:120 engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:90; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name binary workers commit
  t0=$(date +%s); timeout 90 $2 --workers $3 --versions 5 --commit $4 --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/$1.err; s $1 $?
}
run old-3a $O/engine_nccl_bench 3 atomic; run new-3a $N/engine_nccl_bench 3 atomic
run old-3s $O/engine_nccl_bench 3 streamed; run new-3s $N/engine_nccl_bench 3 streamed
run old-3a2 $O/engine_nccl_bench 3 atomic; run new-3a2 $N/engine_nccl_bench 3 atomic
for f in old-3a new-3a old-3s new-3s old-3a2 new-3a2; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','workers','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
t0=$(date +%s); timeout 100 $N/engine_sharded_bench --versions 4 --json $W/sharded.jsonl > $W/sharded.log 2>&1; s sharded $?
grep -h 'summary' $W/sharded.jsonl >> $OUT/summary.txt
gzip -9 $W/*.log $W/*.err
cd $W && tar czf $OUT/callI.tgz * && cat $OUT/summary.txt
