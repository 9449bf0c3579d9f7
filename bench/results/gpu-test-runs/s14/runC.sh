#!/usr/bin/env bash
# Session 14, call C (one GPU): the ranking walks tested once per vector for the next change ("d2": 2 vectors
# ahead, "d4": 4 ahead, both kernels) against call B's binary ("b"), gpu_bench at 7e9 alternating.
set -u
B=/tmp/s14; mkdir -p $B && tar xJf .carry/s14a/bin.tar.xz -C $B && tar xJf .carry/s14c/bin.tar.xz -C $B && mv $B/gpu_bench $B/gpu_bench_b && tar xJf .carry/s14d/bin.tar.xz -C $B
ldd $B/gpu_bench_b | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for v in b d2 d4 b d2 d4; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in b d2 d4; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply entropy|encode entropy" $W/codec-$v.log >> $OUT/summary.txt; done
cd $W && tar czf $OUT/callC.tgz * && cat $OUT/summary.txt
