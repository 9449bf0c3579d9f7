#!/usr/bin/env bash
# Session 23, call G (four GPUs): nccl_link with blocking transfers as built into the tree (nccl_link_options::
# blocking_transfers, on by default: the pair's non-blocking communicator, a blocking one split from it and connected
# at setup, its calls made without the link's mutex): the engine's NCCL GPU tests (the kill test on four GPUs, the
# sharded test), then 1 -> 3 and 1 -> 1 workers, old (session 22's final binary) / new, atomic (and new streamed).
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s23old; N=/tmp/s23new; mkdir -p $O $N
tar xJf .carry/s22h/bin.tar.xz -C $O && tar xJf .carry/s23g/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outG; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/*_tests /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:90; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name binary workers commit
  t0=$(date +%s); timeout 90 $2 --workers $3 --versions 5 --commit $4 --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/$1.err; s $1 $?
}
run old-3a $O/engine_nccl_bench 3 atomic; run new-3a $N/engine_nccl_bench 3 atomic; run new-3s $N/engine_nccl_bench 3 streamed
run old-1a $O/engine_nccl_bench 1 atomic; run new-1a $N/engine_nccl_bench 1 atomic; run new-3a2 $N/engine_nccl_bench 3 atomic
for f in old-3a new-3a new-3s old-1a new-1a new-3a2; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','workers','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
for f in new-3a new-1a; do head -c 400 $W/$f.err >> $OUT/summary.txt; done
gzip -9 $W/*.log $W/*.err
cd $W && tar czf $OUT/callG.tgz * && cat $OUT/summary.txt
