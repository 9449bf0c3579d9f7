#!/usr/bin/env bash
# Session 26, call B (one H200): order_key / from_order_key as one xor with a sign mask (host and device share
# them: every ulp encode and apply). The one-GPU tests, then gpu_bench at 7.6e9 BF16 (varint, rice, entropy; encode
# and verified apply), call A's build (s26a, old) and this one (s26b, new) alternated twice.
set -u
. bench/gpu/device_call_lib.sh
call_setup s26a s26b /tmp/outB
call_tests gpu_codec_tests:150 frame_sync_tests:90 engine_gpu_tests:60 engine_sharded_gpu_tests:90
for i in 1 2; do
  for b in "$O old" "$N new"; do
    set -- $b
    timeout 200 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc varint/ulp,rice/ulp,entropy/ulp --reps 7 --no-sweep --no-baselines --json $W/$2-$i.jsonl > $W/$2-$i.md 2>&1
    echo "gpu_bench $2 run $i rc=$?" >> $OUT/summary.txt
    grep -E "encode|apply" $W/$2-$i.md | grep -v "^| 7.6e+09 | 0.85% | encode .*base hashed" | sed "s/^/$2 /" >> $OUT/summary.txt
  done
done
call_pack callB
