#!/usr/bin/env bash
# Session 24, call G (four H200s): the final build of the session's encode passes (call F's, and the size and write
# passes finding each change's tile by a ballot instead of a five-step search). Every GPU test of the codec and
# the engine (the kill and sharded tests on four GPUs); gpu_bench base / new; 1 -> 1 atomic versions alternated
# with call B's build (.carry/s24a, before today's kernel changes) and one streamed; 1 -> 3 workers atomic and
# streamed; the sharded bench.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s24old; N=/tmp/s24new; mkdir -p $O $N
tar xJf .carry/s24a/bin.tar.xz -C $O && tar xJf .carry/s24g/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$O/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outG; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/*_tests /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in gpu_codec_tests:150 engine_gpu_tests:60 engine_nccl_gpu_tests:120 engine_nccl_kill_gpu_tests:60 engine_nccl_sharded_gpu_tests:60; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
for b in gpu_bench_base gpu_bench; do
  t0=$(date +%s); timeout 60 $N/$b --sizes 2.3e8,7.6e9 --densities 0.01 --enc varint/ulp --reps 15 --no-sweep --json $W/$b.jsonl > $W/$b.md 2>&1; s $b $?
  grep -E "compare|phase|encode varint" $W/$b.md | grep -v "base hashed" >> $OUT/summary.txt
done
run() {  # name dir workers commit
  t0=$(date +%s); timeout 60 $2/engine_nccl_bench --workers $3 --versions 5 --commit $4 --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/$1.err; s $1 $?
}
run old-1 $O 1 atomic; run new-1 $N 1 atomic; run old-2 $O 1 atomic; run new-2 $N 1 atomic; run new-s $N 1 streamed
run new3-a $N 3 atomic; run new3-s $N 3 streamed
for f in old-1 new-1 old-2 new-2 new-s new3-a new3-s; do
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
cd $W && tar czf $OUT/callG.tgz * && cat $OUT/summary.txt
