#!/usr/bin/env bash
# Session 20, call H (one GPU, nvidia-h200): gpu_bench after its mend (efefade: the tight scratch sized after a
# known-base encode too; void rows marked) at 7e9 for varint, rice and entropy; and the SASS (cuobjdump, there
# only) of the size pass and the decode kernels of the final tree, with line info, to read their walks' loops.
set -u
B=/tmp/s20h; mkdir -p $B && tar xJf .carry/s20h/bin.tar.xz -C $B
W=/tmp/out; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
t0=$(date +%s); timeout 150 $B/gpu_bench_fix --sizes 7e9 --densities 0.0085 --reps 5 --no-sweep --no-baselines --enc varint/ulp,rice/ulp,entropy/ulp --json $W/codec-fix.jsonl > $W/codec-fix.log 2>&1; s codec-fix $?
grep -hE "known base|memcpy|!!" $W/codec-fix.log >> $OUT/summary.txt
for c in e_li all_li; do cuobjdump -sass $B/$c.cubin > $W/$c.sass 2>&1; nvdisasm -g -c $B/$c.cubin > $W/$c.nvdisasm 2>&1; done
ls -la $W >> $OUT/summary.txt
tar czf $OUT/out.tar.gz -C $W . && cat $OUT/summary.txt
