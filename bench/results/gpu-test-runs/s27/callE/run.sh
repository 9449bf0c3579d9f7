#!/usr/bin/env bash
# Session 27, call E (one H200): the warp decoder's first walk (each lane range's class counts) read coalesced, one
# lane range after the other, 512 bytes a load (entropy_count_ranges), where each lane walked its own range (call D's
# probe: 6.57 -> 3.28 ms for such a count over 14 GB). s27f. gpu_codec_tests (byte identity, applies, mutated bodies
# refused as the host refuses them, the real stream's chain), then gpu_bench's entropy verified apply at 7.6e9,
# session 26's build (s26e, old) and s27f (new) alternated three times, then one traced run of each.
set -u
. bench/gpu/device_call_lib.sh
call_setup s26e s27f /tmp/outE
call_tests gpu_codec_tests:200
for i in 1 2 3; do
  for b in "$O old" "$N new"; do
    set -- $b
    timeout 150 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc entropy/ulp --reps 5 --no-sweep --no-baselines --json $W/$2-$i.jsonl > $W/$2-$i.md 2>&1
    echo "gpu_bench $2 run $i rc=$?" >> $OUT/summary.txt
    grep -E "apply" $W/$2-$i.md | sed "s/^/$2 /" >> $OUT/summary.txt
  done
done
for b in "$O old" "$N new"; do
  set -- $b
  timeout 150 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc entropy/ulp --reps 2 --no-sweep --no-baselines --trace $W/trace-$2.jsonl > $W/traced-$2.log 2>&1
  echo "traced $2 rc=$?" >> $OUT/summary.txt
  python3 bench/gpu/trace_summary.py $W/trace-$2.jsonl --top 10 > $W/trace_summary-$2.txt 2>&1
  grep -iE "apply.*known|count|entropy_warp|place|parse" $W/trace_summary-$2.txt | head -6 | sed "s/^/$2 /" >> $OUT/summary.txt
  gzip -9 $W/trace-$2.jsonl
done
call_pack callE
