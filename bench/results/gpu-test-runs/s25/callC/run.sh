#!/usr/bin/env bash
# Session 25, call C (two GPUs or more): this session's engine changes on the NCCL engine. Tests (the NCCL engine's
# on two GPUs; kill and sharded on four), then 1 -> 1 atomic versions alternated: s24g's build (old), this build
# (new: a verified patch's commit as one list, the kept buckets side by side on the verify lanes), and this build
# with publish() polling for the ack (--ack-poll-us 20000); one streamed; on four GPUs 1 -> 3 atomic and streamed.
# The timeline keeps each event's last six times (the last frames hop by hop).
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s25old; N=/tmp/s25newc; mkdir -p $O $N
tar xJf .carry/s24g/bin.tar.xz -C $O && tar xJf .carry/s25c/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$O/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outC; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/*_tests /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
G=$(nvidia-smi -L | wc -l)
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
tests="engine_gpu_tests:60 engine_nccl_gpu_tests:120"
[ "$G" -ge 4 ] && tests="$tests engine_nccl_kill_gpu_tests:60 engine_nccl_sharded_gpu_tests:60"
for t in $tests; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR|SKIP" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name dir workers commit [extra]
  t0=$(date +%s); timeout 60 $2/engine_nccl_bench --workers $3 --versions 5 --commit $4 --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl ${5:-} > /dev/null 2>>$W/$1.err; s $1 $?
}
P="--ack-poll-us 20000"
run old-1 $O 1 atomic; run new-1 $N 1 atomic; run poll-1 $N 1 atomic "$P"
run old-2 $O 1 atomic; run new-2 $N 1 atomic; run poll-2 $N 1 atomic "$P"
run old-3 $O 1 atomic; run new-3 $N 1 atomic; run poll-3 $N 1 atomic "$P"
run poll-s $N 1 streamed "$P"
[ "$G" -ge 4 ] && { run new3-a $N 3 atomic; run poll3-a $N 3 atomic "$P"; run poll3-s $N 3 streamed "$P"; }
for f in old-1 new-1 poll-1 old-2 new-2 poll-2 old-3 new-3 poll-3 poll-s new3-a poll3-a poll3-s; do
  [ -f $W/$f.jsonl ] || continue
  echo "== $f" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py --medians $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
python3 bench/gpu/tail_summary.py --hops $W/new-1.jsonl $W/poll-1.jsonl 2>&1 | grep -v "^[a-z0-9-]*.jsonl  " >> $OUT/summary.txt
gzip -9 $W/*.log $W/*.err 2>/dev/null
cd $W && tar czf $OUT/callC.tgz * && cat $OUT/summary.txt
