#!/usr/bin/env bash
# Session 25, call B: a verified patch's commit in one call (apply_plan::commit of the frame list: the kept
# buckets' scatters side by side on the verify lanes, each counting itself instead of a one-thread finish kernel
# after it), and the bench's timeline keeping each event's last six times. Tests on any card count (the codec's
# new case: the list commit on lanes, twice on one plan, refused on the wrong base); with two GPUs or more, the
# NCCL engine tests and 1 -> 1 atomic versions alternated with s24g's build (old), one streamed.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s25old; N=/tmp/s25newb; mkdir -p $O $N
tar xJf .carry/s24g/bin.tar.xz -C $O && tar xJf .carry/s25b/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$O/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outB; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/*_tests /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
G=$(nvidia-smi -L | wc -l)
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
tests="gpu_codec_tests:150 frame_sync_tests:90 engine_gpu_tests:60 engine_sharded_gpu_tests:90"
[ "$G" -ge 2 ] && tests="$tests engine_nccl_gpu_tests:120"
[ "$G" -ge 4 ] && tests="$tests engine_nccl_kill_gpu_tests:60 engine_nccl_sharded_gpu_tests:60"
for t in $tests; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR|SKIP" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name dir workers commit
  t0=$(date +%s); timeout 60 $2/engine_nccl_bench --workers $3 --versions 5 --commit $4 --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/$1.err; s $1 $?
}
if [ "$G" -ge 2 ]; then
  run old-1 $O 1 atomic; run new-1 $N 1 atomic; run old-2 $O 1 atomic; run new-2 $N 1 atomic; run old-3 $O 1 atomic; run new-3 $N 1 atomic; run new-s $N 1 streamed
  [ "$G" -ge 4 ] && { run new3-a $N 3 atomic; run new3-s $N 3 streamed; }
  for f in old-1 new-1 old-2 new-2 old-3 new-3 new-s new3-a new3-s; do
    [ -f $W/$f.jsonl ] || continue
    echo "== $f" >> $OUT/summary.txt
    python3 bench/gpu/tail_summary.py --medians $W/$f.jsonl >> $OUT/summary.txt 2>&1
  done
else echo "engine_nccl: $G GPU, skipped" >> $OUT/summary.txt; fi
gzip -9 $W/*.log $W/*.err 2>/dev/null
cd $W && tar czf $OUT/callB.tgz * && cat $OUT/summary.txt
