#!/usr/bin/env bash
# Session 19, call C (one GPU). Against "base" = cf9223c and "new" = a1b783d (call B: the size pass fetches each
# lane's next staged change by cp.async):
#  - "r2": the size pass fetching each lane's next two staged changes (a ring of three shared-memory slots,
#    cp.async.wait_group 1: the change after the next may stay in flight);
#  - "pl": a1b783d plus the placing walk's bitmap tests made into one mask per vector, one branch per vector
#    instead of one per element (call B's ncu: the per-element branches and stores were a third of its samples).
# gpu_codec_tests and memcheck/racecheck of r2 and pl, gpu_bench at 7e9 alternating base/new/r2/pl twice, ncu of
# r2's size pass and pl's placing kernel.
set -u
B=/tmp/s19c; mkdir -p $B && tar xJf .carry/s19c/bin.tar.xz -C $B
ldd $B/gpu_bench_new | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
for v in r2 pl; do
  t0=$(date +%s); timeout 240 $B/gpu_codec_tests_$v --duration=true > $W/gpu_codec_tests-$v.log 2>&1; s gpu_codec_tests-$v $?
  grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests-$v.log | head -20 >> $OUT/summary.txt
  for tool in memcheck racecheck; do
    t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench_$v --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool-$v.log 2>&1; s $tool-$v $?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool-$v.log >> $OUT/summary.txt
  done
done
for v in base new r2 pl base new r2 pl; do
  t0=$(date +%s); timeout 150 $B/gpu_bench_$v --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in base new r2 pl; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section SourceCounters --import-source yes"
t0=$(date +%s); timeout 200 ncu --clock-control none -k regex:entropy_plan_kernel --launch-count 1 $SEC -o $W/plan-r2 $B/gpu_bench_r2 --sizes 1e9 --densities 0.0085 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/ncu-plan-r2.log 2>&1; s ncu-plan-r2 $?
t0=$(date +%s); timeout 200 ncu --clock-control none -k regex:apply_entropy_place_kernel --launch-count 1 $SEC -o $W/place-pl $B/gpu_bench_pl --sizes 1e9 --densities 0.0085 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/ncu-place-pl.log 2>&1; s ncu-place-pl $?
for r in plan-r2 place-pl; do
  ncu -i $W/$r.ncu-rep --page details --print-units base > $W/details-$r.txt 2>&1
  ncu -i $W/$r.ncu-rep --page source --print-source sass,cuda --csv > $W/source-$r.csv 2>&1
  echo "== ncu $r" >> $OUT/summary.txt; grep -E "Duration|Warp Cycles Per Issued|Eligible Warps" $W/details-$r.txt >> $OUT/summary.txt
done
rm -f $W/*.ncu-rep
tar czf $OUT/out.tar.gz -C $W . && tail -40 $OUT/summary.txt
