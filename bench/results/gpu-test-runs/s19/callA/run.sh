#!/usr/bin/env bash
# Session 19, call A (one GPU): where the entropy kernels' warps wait. Nsight Compute (ncu, --clock-control none) on
# gpu_bench built with -lineinfo at the final tree of session 18 (cf9223c), 1e9 BF16 elements at 0.85% (15,259 chunks
# of 2^16: ~6 waves of the warp-per-chunk kernels), one encode and one verified apply with a known base: stall
# reasons (WarpStateStats, SourceCounters), memory (MemoryWorkloadAnalysis), occupancy, speed of light, for the
# encoder's size pass (entropy_plan_kernel), detect, and the decoder's count (apply_entropy_warp_kernel), placing,
# parse, values and check kernels. Then the same gpu_bench unprofiled at 7e9 for the timings beside it.
set -u
B=/tmp/s19a; mkdir -p $B && tar xJf .carry/s19a/bin.tar.xz -C $B
ldd $B/gpu_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
which ncu >> $OUT/summary.txt 2>&1; ncu --version | tail -1 >> $OUT/summary.txt 2>&1
K='regex:entropy_plan_kernel|detect_kernel|apply_entropy_warp_kernel|apply_entropy_place_kernel|apply_entropy_parse_kernel|apply_entropy_values_kernel|apply_entropy_check_kernel|apply_process_kernel'
t0=$(date +%s); timeout 420 ncu --clock-control none -k "$K" --launch-count 16 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SourceCounters --import-source yes \
  -o $W/prof $B/gpu_bench --sizes 1e9 --densities 0.0085 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/ncu-run.log 2>&1; s ncu $?
tail -5 $W/ncu-run.log >> $OUT/summary.txt
t0=$(date +%s); ncu -i $W/prof.ncu-rep --page details --print-units base > $W/details.txt 2>&1; s details $?
t0=$(date +%s); ncu -i $W/prof.ncu-rep --page raw --csv > $W/raw.csv 2>&1; s raw $?
for k in apply_entropy_warp_kernel apply_entropy_place_kernel entropy_plan_kernel detect_kernel; do
  t0=$(date +%s); ncu -i $W/prof.ncu-rep -k "regex:$k" --launch-count 1 --page source --print-source sass,cuda --csv > $W/source-$k.csv 2>&1; s source-$k $?
done
t0=$(date +%s); timeout 150 $B/gpu_bench --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc rice/ulp,entropy/ulp > $W/codec.log 2>&1; s codec $?
grep -hE "known base" $W/codec.log | grep -v phase >> $OUT/summary.txt
grep -E "^  [a-z_]+<|Duration|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Memory Throughput|DRAM Throughput|L1/TEX Hit|Stall" $W/details.txt | head -150 >> $OUT/summary.txt
tar czf $OUT/out.tar.gz -C $W . && tail -60 $OUT/summary.txt
