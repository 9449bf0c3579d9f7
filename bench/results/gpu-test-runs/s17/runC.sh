#!/usr/bin/env bash
# Session 17, call C (one GPU): call B's split decoder ("new", its build) against the placing walk read 1 ("d1") or
# 3 ("d3") vectors ahead instead of 2; and racecheck of a -lineinfo build of call B's tree ("li") on a small entropy
# encode + apply, to name the lines of the 4 hazard warnings call B's racecheck gave.
set -u
B=/tmp/s17c; mkdir -p $B && tar xJf .carry/s17c/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu_bench_li --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/racecheck-li.log 2>&1; s racecheck-li $?
grep -E "RACECHECK SUMMARY" $W/racecheck-li.log >> $OUT/summary.txt
for v in new d1 d3 new d1 d3; do
  b=$B/gpu_bench; [[ $v != new ]] && b=$B/gpu_bench_$v
  t0=$(date +%s); timeout 150 $b --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in new d1 d3; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $W/racecheck-li.log $OUT/ && cat $OUT/summary.txt
