#!/usr/bin/env bash
# Session 19, call B (one GPU): "new" = the size pass's ranking walk fetches each lane's next staged change into a
# shared-memory slot by cp.async (call A: a register copy of the prefetched word at every unrolled element waited
# for it: 23% of the kernel's stall samples); "base" = cf9223c. Both built with -lineinfo. gpu_codec_tests with the
# real RL stream, memcheck and racecheck of a 2e6 entropy encode + apply, gpu_bench at 7e9 alternating base/new,
# then ncu of the new size pass and of the decoder's kernels (1e9, one apply with a known base).
set -u
B=/tmp/s19b; mkdir -p $B && tar xJf .carry/s19b/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 240 $B/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR|FAILED" $W/gpu_codec_tests.log | head -20 >> $OUT/summary.txt
for tool in memcheck racecheck; do
  t0=$(date +%s); timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench --sizes 2e6 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/$tool.log 2>&1; s $tool $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED" $W/$tool.log >> $OUT/summary.txt
done
for v in base new base new; do
  b=$B/gpu_bench; [[ $v == base ]] && b=$B/gpu_bench_base
  t0=$(date +%s); timeout 150 $b --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp --json $W/codec-$v.jsonl >> $W/codec-$v.log 2>&1; s codec-$v $?
done
for v in base new; do echo "== $v" >> $OUT/summary.txt; grep -hE "known base" $W/codec-$v.log | grep -v phase >> $OUT/summary.txt; done
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SourceCounters --import-source yes"
t0=$(date +%s); timeout 200 ncu --clock-control none -k regex:entropy_plan_kernel --launch-count 1 $SEC -o $W/plan $B/gpu_bench --sizes 1e9 --densities 0.0085 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/ncu-plan.log 2>&1; s ncu-plan $?
t0=$(date +%s); timeout 300 ncu --clock-control none -k regex:'apply_entropy|apply_process' --launch-count 14 $SEC -o $W/apply $B/gpu_bench --sizes 1e9 --densities 0.0085 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/ncu-apply.log 2>&1; s ncu-apply $?
for r in plan apply; do ncu -i $W/$r.ncu-rep --page details --print-units base > $W/details-$r.txt 2>&1; done
ncu -i $W/plan.ncu-rep --page source --print-source sass,cuda --csv > $W/source-plan.csv 2>&1
for k in apply_entropy_warp_kernel apply_entropy_place_kernel apply_entropy_parse_kernel apply_entropy_check_kernel apply_entropy_values_kernel; do
  t0=$(date +%s); ncu -i $W/apply.ncu-rep -k "regex:$k" --launch-count 1 --page source --print-source sass,cuda --csv > $W/source-$k.csv 2>&1; s source-$k $?
done
grep -E "^  [a-z].*\(|Duration|Achieved Occupancy|Warp Cycles Per Issued|Eligible Warps" $W/details-apply.txt | cut -c1-140 >> $OUT/summary.txt
rm -f $W/*.ncu-rep
tar czf $OUT/out.tar.gz -C $W . && tail -40 $OUT/summary.txt
