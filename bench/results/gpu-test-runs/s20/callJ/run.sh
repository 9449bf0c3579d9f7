#!/usr/bin/env bash
# Session 20, call J (one GPU, nvidia-h200): the final tree (n5 = call D's n2 plus the size pass's rank counters as
# whole words, call I's n3, and gpu_bench's mend): gpu_codec_tests with the real RL stream, memcheck of the tests'
# entropy cases (quick), memcheck and racecheck of a 2e6 entropy encode + apply at 2^16 and 2^17 chunks, gpu_bench
# at 7e9 beside base (70877bb) and n2, one traced run.
set -u
B=/tmp/s20j; mkdir -p $B && tar xJf .carry/s20j/bin.tar.xz -C $B
ldd $B/gpu_bench_n5 | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 240 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_codec_tests -tc="entropy on the GPU*" > $W/memcheck-tests.log 2>&1; s memcheck-entropy-tests $?
grep -E "ERROR SUMMARY|test cases|assertions" $W/memcheck-tests.log >> $OUT/summary.txt
for L in 16 17; do
  for tool in memcheck racecheck; do
    t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench_n5 --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp --log2-chunk $L > $W/$tool-$L.log 2>&1; s $tool-$L $?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool-$L.log >> $OUT/summary.txt
  done
done
for round in 1 2; do
  for v in base n2 n5; do
    t0=$(date +%s); timeout 120 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s "$v-$round" $?
  done
done
for v in base n2 n5; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base|memcpy|FAIL|rror|!!" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
t0=$(date +%s); timeout 150 $B/gpu_bench_n5 --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc entropy/ulp --trace $W/trace.jsonl > $W/traced.log 2>&1; s traced $?
python3 bench/gpu/trace_summary.py $W/trace.jsonl --top 8 --match known > $W/trace_summary.txt 2>&1
gzip -9 $W/trace.jsonl
tar czf $OUT/out.tar.gz -C $W . && grep -A60 "== base" $OUT/summary.txt && head -14 $OUT/summary.txt && grep -v "busy %" $W/trace_summary.txt
