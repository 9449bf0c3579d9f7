#!/usr/bin/env bash
# Session 14, call G (one GPU): both entropy walks 1 vector ahead ("d1", constants only) against the final tree's
# 2 ahead (call E's new binary, "d2"), gpu_bench at 7e9 alternating.
set -u
B=/tmp/s14; mkdir -p $B && tar xJf .carry/s14a/bin.tar.xz -C $B && tar xJf .carry/s14f/bin.tar.xz -C $B && mv $B/gpu_bench $B/gpu_bench_d2 && tar xJf .carry/s14h/bin.tar.xz -C $B
ldd $B/gpu_bench_d2 | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for v in d2 d1 d2 d1; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in d2 d1; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply entropy|encode entropy|encode rice|apply rice" $W/codec-$v.log >> $OUT/summary.txt; done
cd $W && tar czf $OUT/callG.tgz * && cat $OUT/summary.txt
