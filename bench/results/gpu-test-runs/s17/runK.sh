#!/usr/bin/env bash
# Session 17, call K (one GPU): the final review's mends: the warp-chunk loop no longer searches a chunk's segment
# before the placing kernel knows it will take the chunk, and the placing kernel fills each group's classes once
# (a lane a group) instead of each lane scanning every group's first class for each of its classes; registers,
# stack and shared memory unchanged (ptxas -v); "base" = call I's build (a1ed57f). gpu_codec_tests with the real RL
# stream, memcheck of the tests' entropy case (quick), memcheck and racecheck on a small entropy encode + apply,
# gpu_bench at 7e9 alternating base/new.
set -u
B=/tmp/s17k; mkdir -p $B && tar xJf .carry/s17k/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_codec_tests -tc="entropy on the GPU*" > $W/memcheck-tests.log 2>&1; s memcheck-entropy-tests $?
grep -E "ERROR SUMMARY|test cases|assertions" $W/memcheck-tests.log >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool.log >> $OUT/summary.txt
done
for v in base new base new; do
  b=$B/gpu_bench; [[ $v == base ]] && b=$B/gpu_bench_base
  t0=$(date +%s); timeout 150 $b --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in base new; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $W/gpu_codec_tests.log $W/memcheck-tests.log $W/memcheck.log $W/racecheck.log $OUT/ && cat $OUT/summary.txt
