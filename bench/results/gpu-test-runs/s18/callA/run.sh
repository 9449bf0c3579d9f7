#!/usr/bin/env bash
# Session 18, call A (one GPU): the one-thread entropy decoder's tables leave the stack. apply_entropy_kernel is
# retired (lane 0 of the warp decoder takes rice bodies and chunks over 2^16 elements, its tables in the warp's
# shared memory) and the parse thread reads and writes its tables in the chunk's plan. "base" = 7be3639 (with this
# session's gpu_bench.cu, for --log2-chunk). local_memory_probe base/new, gpu_codec_tests with the real RL stream,
# memcheck of the entropy cases (quick), memcheck and racecheck on a small entropy encode + apply, gpu_bench at 7e9
# alternating base/new at 2^16 chunks, then at 2^17 (every entropy chunk decoded by one thread / one lane).
set -u
B=/tmp/s18a; mkdir -p $B && tar xJf .carry/s18a/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for v in base new; do
  p=$B/local_memory_probe; [[ $v == base ]] && p=$B/local_memory_probe_base
  t0=$(date +%s); timeout 60 $p > $W/probe-$v.jsonl 2>&1; s probe-$v $?
  echo "== probe $v" >> $OUT/summary.txt; cat $W/probe-$v.jsonl >> $OUT/summary.txt
done
t0=$(date +%s); timeout 240 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED|entropy" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_codec_tests -tc="entropy on the GPU*" > $W/memcheck-tests.log 2>&1; s memcheck-entropy-tests $?
grep -E "ERROR SUMMARY|test cases|assertions" $W/memcheck-tests.log >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool.log >> $OUT/summary.txt
done
for v in base new base new; do
  b=$B/gpu_bench; [[ $v == base ]] && b=$B/gpu_bench_base
  t0=$(date +%s); timeout 150 $b --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in base new; do
  b=$B/gpu_bench; [[ $v == base ]] && b=$B/gpu_bench_base
  t0=$(date +%s); timeout 150 $b --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc entropy/ulp --log2-chunk 17 --json $W/codec17-$v.jsonl >> $W/codec17-$v.log 2>&1; s codec17-$v $?
done
for v in base new; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
for v in base new; do echo "== 2^17 $v" >> $OUT/summary.txt; grep -hE "known base" $W/codec17-$v.log | grep -v phase >> $OUT/summary.txt; done
cp $W/*.jsonl $W/*.log $OUT/ && cat $OUT/summary.txt
