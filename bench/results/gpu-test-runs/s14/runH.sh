#!/usr/bin/env bash
# Session 14, call H (one GPU): the review's refactor (rice's fallback size priced by one helper,
# entropy_warp_rice_cost, in the encoder's size pass and the decoder's check; "new") against call E's binary
# ("e"): gpu_codec_tests with the real RL stream, memcheck and racecheck on a small entropy encode + apply, then
# gpu_bench at 7e9 alternating.
set -u
B=/tmp/s14; mkdir -p $B && tar xJf .carry/s14a/bin.tar.xz -C $B && tar xJf .carry/s14f/bin.tar.xz -C $B && mv $B/gpu_bench $B/gpu_bench_e && tar xJf .carry/s14i/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool.log >> $OUT/summary.txt
done
for v in e new e new; do
  b=$B/gpu_bench; [[ $v == e ]] && b=$B/gpu_bench_e
  t0=$(date +%s); timeout 150 $b --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in e new; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply entropy|encode entropy" $W/codec-$v.log >> $OUT/summary.txt; done
cd $W && tar czf $OUT/callH.tgz * && cat $OUT/summary.txt
