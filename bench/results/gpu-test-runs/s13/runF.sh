#!/usr/bin/env bash
# Session 13, call F (one GPU): the entropy walks count the classes and groups of a 16-key window in registers
# (entropy_window: 8-bit counters, flushed into the lane's shared-memory counters every 255 elements; keys
# outside the window by shared-memory atomics as before), in the encoder's size pass and in the decoder.
# Correctness first: gpu_codec_tests with the real RL stream, compute-sanitizer memcheck on the entropy case,
# racecheck on a small entropy encode + apply (gpu_bench at 2e6 elements); then gpu_bench at 7e9, alternating
# "base" (29cff1f), "s1" (00e984f: call E's atomics build) and "new" (this tree).
set -u
B=/tmp/s13; mkdir -p $B && tar xJf .carry/s13f/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions" $W/gpu_codec_tests.log >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck $B/gpu_codec_tests -tc='entropy on the GPU*' > $W/memcheck.log 2>&1; s memcheck $?
grep -E "ERROR SUMMARY|test cases" $W/memcheck.log >> $OUT/summary.txt
t0=$(date +%s); timeout 150 compute-sanitizer --tool racecheck $B/gpu_bench_new --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/racecheck.log 2>&1; s racecheck $?
grep -E "HAZARD|RACECHECK SUMMARY|encode|apply" $W/racecheck.log | tail -6 >> $OUT/summary.txt
for v in base new s1 new base; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in base s1 new; do echo "== $v" >> $OUT/summary.txt; grep -hE "memcpy|encode entropy|apply entropy|phase.*entropy|apply rice" $W/codec-$v.log >> $OUT/summary.txt; done
cd $W && tar czf $OUT/callF.tgz * && cat $OUT/summary.txt
