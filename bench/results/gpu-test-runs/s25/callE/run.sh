#!/usr/bin/env bash
# Session 25, call E (one H200): a bucket's verify with fewer launches (the chunk table's two prefix sums in one
# scan of pairs: 3 launches instead of 6; the bucket info zeroed by the parse kernel instead of a memset before
# it). gpu_codec_tests and the one-GPU engine tests; then gpu_bench's apply (verify + commit, one bucket) and
# atomic commit, call D's build (old) and this one (new) alternated three times.
set -u
O=/tmp/s25d; N=/tmp/s25e; W=/tmp/outE; T=/tmp/build-main/tests/cuda; mkdir -p $O $N $W $T
tar xJf .carry/s25d/bin.tar.xz -C $O && tar xJf .carry/s25e/bin.tar.xz -C $N && cp $N/*_tests $T/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in gpu_codec_tests:150 frame_sync_tests:90 engine_gpu_tests:60 engine_sharded_gpu_tests:90; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $W/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
for i in 1 2 3; do
  for b in "$O old" "$N new"; do
    set -- $b
    timeout 120 $1/gpu_bench --sizes 2.3e8,7.6e9 --densities 0.01 --enc varint/ulp --reps 11 --no-sweep --no-baselines --commit-buckets 33 --json $W/$2-$i.jsonl > $W/$2-$i.md 2>&1
    echo "gpu_bench $2 run $i rc=$?" >> $OUT/summary.txt
    grep -E "apply|atomic commit" $W/$2-$i.md | sed "s/^/$2 /" >> $OUT/summary.txt
  done
done
gzip -9 $W/*.log
cd $W && tar czf $OUT/callE.tgz * && cat $OUT/summary.txt
