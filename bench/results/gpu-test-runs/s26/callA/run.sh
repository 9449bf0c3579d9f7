#!/usr/bin/env bash
# Session 26, call A (one H200): review changes in the encode kernels (the write pass's sections in one 32-bit
# scan for every encoder, one XXH64 tail helper, warp_inclusive_sum one template). The one-GPU tests, then
# gpu_bench's encode of the byte-aligned encoders at 7.6e9, session 25's build (s25e, old) and this one (new)
# alternated three times.
set -u
. bench/gpu/device_call_lib.sh
call_setup s25e s26a /tmp/outA
call_tests gpu_codec_tests:150 frame_sync_tests:90 engine_gpu_tests:60 engine_sharded_gpu_tests:90
for i in 1 2 3; do
  for b in "$O old" "$N new"; do
    set -- $b
    timeout 150 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc raw_index32/absolute,bitmap/absolute,varint/ulp --reps 11 --no-sweep --no-baselines --json $W/$2-$i.jsonl > $W/$2-$i.md 2>&1
    echo "gpu_bench $2 run $i rc=$?" >> $OUT/summary.txt
    grep -E "encode" $W/$2-$i.md | sed "s/^/$2 /" >> $OUT/summary.txt
  done
done
call_pack callA
