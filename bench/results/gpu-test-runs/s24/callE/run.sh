#!/usr/bin/env bash
# Session 24, call E (one H200): the varint write pass with one packed 32-bit scan for both sections and its chunk
# hashes in a pass of their own (8 chunks a warp): gpu_codec_tests on it (byte identity with the host codec), then
# gpu_bench base (HEAD before the change) / new alternated at a bucket's size and at the model's, 1%, varint,
# then Nsight Compute on the new encode's chunk passes at the model's size.
set -u
N=/tmp/s24e; mkdir -p $N; tar xJf .carry/s24e/bin.tar.xz -C $N
W=/tmp/outE; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s); timeout 200 $N/gpu_codec_tests --duration=true > $W/gpu_codec_tests.log 2>&1; s gpu_codec_tests $?
grep -E "test cases|assertions|ERROR" $W/gpu_codec_tests.log | head -8 >> $OUT/summary.txt
for k in 1 2; do
  for b in gpu_bench_base gpu_bench; do
    t0=$(date +%s); timeout 60 $N/$b --sizes 2.3e8,7.6e9 --densities 0.01 --enc varint/ulp --reps 15 --no-sweep --json $W/$b-$k.jsonl > $W/$b-$k.md 2>&1; s $b-$k $?
    grep -E "compare|phase|encode varint" $W/$b-$k.md | grep -v "base hashed" >> $OUT/summary.txt
  done
done
t0=$(date +%s); timeout 200 ncu --clock-control none -k "regex:warp_size|warp_write|chunk_hash|detect_kernel" --launch-skip 0 --launch-count 8 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  $N/gpu_bench --sizes 7.6e9 --densities 0.01 --enc varint/ulp --reps 1 --no-sweep --no-baselines > $W/ncu.txt 2>&1; s ncu $?
grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Warp Cycles Per Issued" $W/ncu.txt >> $OUT/summary.txt
gzip -9 $W/*.log $W/ncu.txt
cd $W && tar czf $OUT/callE.tgz * && cat $OUT/summary.txt
