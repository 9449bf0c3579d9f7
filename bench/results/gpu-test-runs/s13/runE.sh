#!/usr/bin/env bash
# Session 13, call E (one GPU): the entropy encoder's size pass with 16-bit lane counters advanced by shared-memory
# atomics and its slot tables in the counters' words (18.3 KB of shared memory a chunk instead of 36.3 KB: 11 chunks
# in flight per SM instead of 6), walks 8 vectors ahead. Correctness first: gpu_codec_tests with the real RL stream
# (entropy's byte identity with the host codec at chunk sizes 2^8..2^16 and 2^24, all dtypes, both value modes),
# compute-sanitizer memcheck and racecheck on the entropy case; then gpu_bench at 7e9 (rice and entropy, ulp),
# the tree before (29cff1f, "base") and after, alternating.
set -u
B=/tmp/s13; mkdir -p $B && tar xJf .carry/s13e/bin.tar.xz -C $B
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions" $W/gpu_codec_tests.log >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck $B/gpu_codec_tests -tc='entropy on the GPU*' > $W/memcheck.log 2>&1; s memcheck $?
grep -E "ERROR SUMMARY|test cases" $W/memcheck.log >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_GPU_TEST_QUICK=1 timeout 120 compute-sanitizer --tool racecheck $B/gpu_codec_tests -tc='entropy on the GPU*' > $W/racecheck.log 2>&1; s racecheck $?
grep -E "HAZARD|RACECHECK SUMMARY|test cases" $W/racecheck.log | tail -3 >> $OUT/summary.txt
for v in base new base new; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
grep -hE "memcpy|encode|apply|phase" $W/codec-*.log >> $OUT/summary.txt
cd $W && tar czf $OUT/callE.tgz * && cat $OUT/summary.txt
