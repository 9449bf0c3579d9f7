#!/usr/bin/env bash
# Session 16, call G (one GPU): call F showed the encoder's ranking walk slower with reductions than with atomics
# whose results it reads. Does the decoder's first walk (reductions today) gain from atomics whose results are kept?
# "base" = 8db595c; "ret4" = its first walk xor-ing each atomic's old value into a register (kept by a test that
# never passes), 4 vectors ahead as today; "ret2" = the same 2 ahead. gpu_bench at 7e9, alternating, twice each.
set -u
B=/tmp/s16g; mkdir -p $B && tar xJf .carry/s16g/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for r in 1 2; do for v in base ret4 ret2; do
  t0=$(date +%s); timeout 100 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done; done
for v in base ret4 ret2; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply .*known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $OUT/ && cat $OUT/summary.txt
