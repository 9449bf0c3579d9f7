#!/usr/bin/env bash
# Session 20, call D (one GPU, nvidia-h200): the final tree (n2 = the placing walk staged, as call C's n1 without its
# size-pass change, and the warp decoder's groups from class-pair sums over the lanes): gpu_codec_tests with the real
# RL stream, memcheck of the tests' entropy cases (quick), memcheck and racecheck of a 2e6 entropy encode + apply at
# 2^16 and 2^17 chunks, gpu_bench at 7e9 beside base (70877bb) and r22 (the placing walk staged alone), one traced run.
set -u
B=/tmp/s20e; mkdir -p $B && tar xJf .carry/s20e/bin.tar.xz -C $B
ldd $B/gpu_bench_n2 | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
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
    t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench_n2 --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp --log2-chunk $L > $W/$tool-$L.log 2>&1; s $tool-$L $?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool-$L.log >> $OUT/summary.txt
  done
done
for round in 1 2; do
  for v in base r22 n2; do
    t0=$(date +%s); timeout 120 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s "$v-$round" $?
  done
done
for v in base r22 n2; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base|memcpy|FAIL|rror" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
t0=$(date +%s); timeout 150 $B/gpu_bench_n2 --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc entropy/ulp --trace $W/trace.jsonl > $W/traced.log 2>&1; s traced $?
python3 bench/gpu/trace_summary.py $W/trace.jsonl --top 8 --match known > $W/trace_summary.txt 2>&1
gzip -9 $W/trace.jsonl
tar czf $OUT/out.tar.gz -C $W . && grep -A60 "== base" $OUT/summary.txt && head -14 $OUT/summary.txt && grep -A8 "apply entropy/ulp known v2" $W/trace_summary.txt
