#!/usr/bin/env bash
# Session 27, call A (one H200): the entropy decoder's count step in a kernel of its own (apply_entropy_count_kernel:
# 7-bit lane counts with hand-overs, 10.3 KB and 96 registers a warp, 20 warps an SM, where the warp decoder's count
# took 17.3 KB and 168 registers, 12 an SM); the warp decoder keeps only the chunks it leaves. s27a: its walk 4
# vectors ahead in registers; s27b: through the 2 x 2 shared-memory ring (12.4 KB, 17 warps an SM).
# gpu_codec_tests of s27a (byte identity, applies, mutated bodies refused as the host refuses them; a new band of 2
# exponents makes lanes hand counts over), then gpu_bench's entropy encode + verified apply at 7.6e9, session 26's
# build (s26e, old), s27a and s27b alternated twice, then one traced run of each (per-kernel times).
set -u
. bench/gpu/device_call_lib.sh
call_setup s26e s27a /tmp/outA
R=/tmp/call-s27b; mkdir -p $R && tar xJf .carry/s27b/bin.tar.xz -C $R
call_tests gpu_codec_tests:200
for i in 1 2; do
  for b in "$O old" "$N reg" "$R ring"; do
    set -- $b
    timeout 150 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc entropy/ulp --reps 5 --no-sweep --no-baselines --json $W/$2-$i.jsonl > $W/$2-$i.md 2>&1
    echo "gpu_bench $2 run $i rc=$?" >> $OUT/summary.txt
    grep -E "apply|encode" $W/$2-$i.md | grep -v "base hashed" | sed "s/^/$2 /" >> $OUT/summary.txt
  done
done
for b in "$O old" "$N reg" "$R ring"; do
  set -- $b
  timeout 150 $1/gpu_bench --sizes 7.6e9 --densities 0.01 --enc entropy/ulp --reps 2 --no-sweep --no-baselines --trace $W/trace-$2.jsonl > $W/traced-$2.log 2>&1
  echo "traced $2 rc=$?" >> $OUT/summary.txt
  python3 bench/gpu/trace_summary.py $W/trace-$2.jsonl --top 10 > $W/trace_summary-$2.txt 2>&1
  grep -iE "apply.*known|count|entropy_warp|place|parse" $W/trace_summary-$2.txt | head -30 | sed "s/^/$2 /" >> $OUT/summary.txt
  gzip -9 $W/trace-$2.jsonl
done
call_pack callA
