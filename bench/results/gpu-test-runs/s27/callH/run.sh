#!/usr/bin/env bash
# Session 27, call H (one H200): call G's probe walked the lane ranges faster with fewer warps an SM (fewer streams
# 4 KB apart). The same on the real kernels: s27h = this tree with two experiment knobs (environment, dynamic shared
# memory that no kernel uses, so fewer blocks fit an SM): SPARSESYNC_EXP_PLAN_SMEM on the entropy size pass (bytes
# mode; 20 warps an SM by default), SPARSESYNC_EXP_PLACE_SMEM on the placing kernel (16). gpu_bench entropy/ulp at
# 7.6e9: default, then the size pass at 16 (the placing kernel as is) and both at 12 and at 8 warps an SM, twice each.
set -u
. bench/gpu/device_call_lib.sh
call_setup s27h s27h /tmp/outH
run() {  # name plan_smem place_smem
  SPARSESYNC_EXP_PLAN_SMEM=$2 SPARSESYNC_EXP_PLACE_SMEM=$3 timeout 120 $N/gpu_bench --sizes 7.6e9 --densities 0.01 --enc entropy/ulp --reps 5 --no-sweep --no-baselines --json $W/$1.jsonl > $W/$1.md 2>&1
  echo "gpu_bench $1 (plan +$2 B, place +$3 B) rc=$?" >> $OUT/summary.txt
  grep -E "encode|apply" $W/$1.md | grep -v "base hashed" | sed "s/^/$1 /" >> $OUT/summary.txt
}
for i in 1 2; do
  run default-$i 0 0
  run w16-$i 3072 0
  run w12-$i 7936 5400
  run w8-$i 17600 15100
done
call_pack callH
