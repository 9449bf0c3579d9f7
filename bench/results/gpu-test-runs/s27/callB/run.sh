#!/usr/bin/env bash
# Session 27, call B (one H200): the entropy decoder's warp-per-chunk kernels load the chunk slots two chunks ahead
# and the tag one ahead (for_each_warp_chunk), where each chunk waited for its slot's round trips after the one
# before: call A's warp kernel, left with no chunk to decode, still took 2.0 ms walking the slots. s27c: call A's
# count kernel (s27a) with that; s27d: the same loads ahead without the count kernel (the warp decoder counts, as
# before). gpu_codec_tests of s27c, then gpu_bench's entropy encode + verified apply at 7.6e9, session 26's build
# (s26e, old), s27c and s27d alternated twice, then one traced run of each.
set -u
. bench/gpu/device_call_lib.sh
call_setup s26e s27c /tmp/outB
R=/tmp/call-s27d; mkdir -p $R && tar xJf .carry/s27d/bin.tar.xz -C $R
call_tests gpu_codec_tests:200
for i in 1 2; do
  for b in "$O old" "$N count" "$R nocount"; do
    set -- $b
    timeout 150 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc entropy/ulp --reps 5 --no-sweep --no-baselines --json $W/$2-$i.jsonl > $W/$2-$i.md 2>&1
    echo "gpu_bench $2 run $i rc=$?" >> $OUT/summary.txt
    grep -E "apply" $W/$2-$i.md | grep -v "base hashed" | sed "s/^/$2 /" >> $OUT/summary.txt
  done
done
for b in "$O old" "$N count" "$R nocount"; do
  set -- $b
  timeout 150 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc entropy/ulp --reps 2 --no-sweep --no-baselines --trace $W/trace-$2.jsonl > $W/traced-$2.log 2>&1
  echo "traced $2 rc=$?" >> $OUT/summary.txt
  python3 bench/gpu/trace_summary.py $W/trace-$2.jsonl --top 10 > $W/trace_summary-$2.txt 2>&1
  grep -iE "apply.*known|count|entropy_warp|place|parse" $W/trace_summary-$2.txt | head -12 | sed "s/^/$2 /" >> $OUT/summary.txt
  gzip -9 $W/trace-$2.jsonl
done
call_pack callB
