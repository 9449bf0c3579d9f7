#!/usr/bin/env bash
# Session 14, call B (one GPU): the entropy walks that rank ("new": each vector's group lookups, then its counter
# atomics, then its tests, and the encoder's next change read from a staged list loaded ahead) against 89b7657
# ("old", call A's binary). gpu_codec_tests with the real RL stream first, compute-sanitizer (memcheck,
# racecheck) on a small entropy encode + apply, then gpu_bench at 7e9 alternating old/new.
set -u
B=/tmp/s14; mkdir -p $B && tar xJf .carry/s14a/bin.tar.xz -C $B && mv $B/gpu_bench $B/gpu_bench_old && tar xJf .carry/s14c/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions" $W/gpu_codec_tests.log >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $W/$tool.log >> $OUT/summary.txt
done
for v in old new old new; do
  b=$B/gpu_bench; [[ $v == old ]] && b=$B/gpu_bench_old
  t0=$(date +%s); timeout 150 $b --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in old new; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply entropy|apply rice|encode entropy|encode rice" $W/codec-$v.log >> $OUT/summary.txt; done
cd $W && tar czf $OUT/callB.tgz * && cat $OUT/summary.txt
