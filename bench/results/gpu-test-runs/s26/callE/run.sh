#!/usr/bin/env bash
# Session 26, call E (one H200): the GPU entropy size pass sums a floor under rice's bits (each gap and value code
# at its own best parameter, one sum a lane) and takes rice's exact costs (41 sums a lane) only where the class body
# is not already below it, as the host encoder now does. gpu_codec_tests (byte identity with the host, rice bodies
# included), then gpu_bench's entropy encode at 7.6e9, call C's build (s26c, old) and this one (s26e, new)
# alternated three times.
set -u
. bench/gpu/device_call_lib.sh
call_setup s26c s26e /tmp/outE
call_tests gpu_codec_tests:150
for i in 1 2 3; do
  for b in "$O old" "$N new"; do
    set -- $b
    timeout 150 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc entropy/ulp --reps 7 --no-sweep --no-baselines --json $W/$2-$i.jsonl > $W/$2-$i.md 2>&1
    echo "gpu_bench $2 run $i rc=$?" >> $OUT/summary.txt
    grep -E "encode" $W/$2-$i.md | sed "s/^/$2 /" >> $OUT/summary.txt
  done
done
call_pack callE
