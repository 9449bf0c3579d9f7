#!/usr/bin/env bash
# Session 11, call E (1x H100): main after merging entropy-gpu4 (0b44325) plus the entropy test's narrow-exponent
# data (the warp decoder's path for BF16/FP16/FP32, mutations included): gpu_codec_tests in full with the real RL
# stream, memcheck on the entropy case (quick), gpu_bench rice/entropy at 7e9.
set -u
B=.carry/lead-e
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $OUT/gpu_codec_tests.log 2>&1; echo "gpu_codec_tests rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -E "test cases|assertions" $OUT/gpu_codec_tests.log >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 100 compute-sanitizer --tool memcheck $B/gpu_codec_tests -tc='entropy on the GPU*' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -E "ERROR SUMMARY|test cases" $OUT/memcheck.log >> $OUT/summary.txt
t0=$(date +%s); timeout 80 $B/gpu_bench --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --enc rice/ulp,entropy/ulp --json $OUT/gpu_bench.jsonl > $OUT/gpu_bench.log 2>&1; echo "gpu_bench rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -E "apply|encode|memcpy" $OUT/gpu_bench.log | head -20 >> $OUT/summary.txt
cat $OUT/summary.txt
