#!/usr/bin/env bash
# Session 15, call E (one GPU): "new" = the size pass ranks the changes in a coalesced walk in steps of 32 vectors
# (entropy_warp_walk_steps), each change ranked by the whole warp at once (every lane's count of its group before the
# step plus those before it in the step), instead of a lane-range walk; "base" = ba18f2d. gpu_codec_tests first,
# compute-sanitizer (memcheck, racecheck) on a small entropy encode + apply, gpu_bench at 7e9 alternating base/new, then one traced run of the new binary (trace_summary.py here).
set -u
B=/tmp/s15; mkdir -p $B && tar xJf .carry/s15e/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verified|FAILED" $W/$tool.log >> $OUT/summary.txt
done
for v in base new base new; do
  b=$B/gpu_bench; [[ $v == base ]] && b=$B/gpu_bench_base
  t0=$(date +%s); timeout 150 $b --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
t0=$(date +%s); timeout 150 $B/gpu_bench --sizes 7e9 --densities 0.0085 --reps 3 --no-sweep --no-baselines --enc entropy/ulp --trace $W/trace.jsonl > $W/traced.log 2>&1; s traced $?
for v in base new; do echo "== $v" >> $OUT/summary.txt; grep -hE "apply entropy|apply rice|encode entropy|encode rice" $W/codec-$v.log >> $OUT/summary.txt; done
python3 bench/gpu/trace_summary.py $W/trace.jsonl --versions 1-1 > $W/trace_summary.txt 2>&1 || true
gzip -9 $W/trace.jsonl
cd $W && tar czf $OUT/callE.tgz * && cat $OUT/summary.txt
