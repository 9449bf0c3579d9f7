#!/usr/bin/env bash
# Session 27, call C (one H200): why call A's warp decoder took 2.0 ms with no chunk to decode (the chunk loop of
# for_each_warp_chunk) where the alone kernel, judging 32 chunks a step, takes 0.008 ms. Nsight Compute's launch,
# occupancy, scheduler and warp-state sections on s27a's (count kernel) and s26e's (old) entropy decode kernels at
# 1e9 BF16 (15,259 chunks), and one traced gpu_bench run of each at 1e9 for the kernels' times there.
set -u
. bench/gpu/device_call_lib.sh
call_setup s26e s27a /tmp/outC
which ncu >> $OUT/summary.txt 2>&1; ncu --version | tail -1 >> $OUT/summary.txt 2>&1
K='regex:apply_entropy_(warp|place|count|alone)_kernel'
for b in "$O old" "$N count"; do
  set -- $b
  t0=$(date +%s); timeout 200 ncu --clock-control none -k "$K" --launch-count 8 --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats --section SpeedOfLight \
    $1/gpu_bench --sizes 1e9 --densities 0.01 --reps 1 --no-sweep --no-baselines --enc entropy/ulp > $W/ncu-$2.txt 2>&1; stamp "ncu $2" $?
  grep -E "apply_entropy_[a-z]+_kernel|Duration|Waves Per SM|Achieved Occupancy|Theoretical Occupancy|Block Limit|Registers Per|Grid Size|No Eligible|Warp Cycles Per Issued|Issued Warp|Memory Throughput|Active Warps Per" $W/ncu-$2.txt | head -120 | sed "s/^/$2 /" >> $OUT/summary.txt
done
call_pack callC
