#!/usr/bin/env bash
# Session 25, call A: session 24's prepared change (s24/next/size-in-detect.diff: the varint+ulp size pass folded
# into the detect pass). gpu_codec_tests must stay 17/17 (byte identity with the host codec), then the engine's
# tests, gpu_bench (s24g's build = base, this = new) and 1 -> 1 atomic versions alternated with s24g's build.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s25old; N=/tmp/s25new; mkdir -p $O $N
tar xJf .carry/s24g/bin.tar.xz -C $O && tar xJf .carry/s25a/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$O/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outA; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/*_tests /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in gpu_codec_tests:150 engine_gpu_tests:60 $( [ $(nvidia-smi -L | wc -l) -ge 2 ] && echo engine_nccl_gpu_tests:120 ); do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
for b in "$O/gpu_bench base" "$N/gpu_bench new"; do
  set -- $b; t0=$(date +%s); timeout 60 $1 --sizes 2.3e8,7.6e9 --densities 0.01 --enc varint/ulp --reps 15 --no-sweep --json $W/gpu_bench_$2.jsonl > $W/gpu_bench_$2.md 2>&1; s gpu_bench_$2 $?
  grep -E "compare|phase|encode varint" $W/gpu_bench_$2.md | grep -v "base hashed" >> $OUT/summary.txt
done
run() {  # name dir workers commit
  t0=$(date +%s); timeout 60 $2/engine_nccl_bench --workers $3 --versions 5 --commit $4 --configs 512:4:4:2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/$1.err; s $1 $?
}
G=$(nvidia-smi -L | wc -l)
if [ "$G" -ge 2 ]; then
run old-1 $O 1 atomic; run new-1 $N 1 atomic; run old-2 $O 1 atomic; run new-2 $N 1 atomic; run old-3 $O 1 atomic; run new-3 $N 1 atomic; run new-s $N 1 streamed
for f in old-1 new-1 old-2 new-2 old-3 new-3 new-s; do
  echo "== $f" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py --medians $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
else echo "engine_nccl_bench: $G GPU, skipped" >> $OUT/summary.txt; fi
gzip -9 $W/*.log $W/*.err
cd $W && tar czf $OUT/callA.tgz * && cat $OUT/summary.txt
