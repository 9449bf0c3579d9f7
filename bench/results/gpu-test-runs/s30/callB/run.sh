#!/usr/bin/env bash
# Session 30, call B (the H200 machine's host CPU, an Intel Xeon with AVX-512): the model checksum's new AVX-512
# loop on a second x86 core design. core_tests (hash_test: the fast checksums equal the specification's) built on
# the VM from 5c170e4's tree + tests, then codec_bench --throughput 5 of 74062fb (old) and 5c170e4 (new), both
# built on the VM, alternated five times on one core (taskset), as bench/results/cpu-s30/ on the VM. The runs'
# files are packed in runs.tar.xz (a call returns a few files only).
set -u
mkdir -p $OUT
B=.carry/s30b S=$PWD/.carry/data/rl-gpt2-small-lr1e-6
export LD_LIBRARY_PATH=$PWD/$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # (libzstd, in case the machine lacks it)
lscpu > $OUT/lscpu.txt
$B/core_tests > $OUT/core_tests.log 2>&1; echo "core_tests rc=$?" > $OUT/summary.txt
grep -E "test cases|assertions|AVX-512" $OUT/core_tests.log >> $OUT/summary.txt
for i in 1 2 3 4 5; do
  for v in old new; do
    taskset -c 2 $B/codec_bench_$v --throughput 5 --stream $S --out $OUT/$v-run$i.json > $OUT/$v-run$i.txt 2>&1 || echo "$v run $i rc=$?" >> $OUT/summary.txt
  done
done
python3 bench/cpu/throughput_medians.py $OUT old new > $OUT/medians.txt
python3 - $OUT >> $OUT/summary.txt <<'PY'
import glob, json, statistics, sys
for v in ("old", "new"):
    xs = [json.load(open(p))["throughput"]["steps"][0]["shared"]["model_checksum_gbps"] for p in sorted(glob.glob(f"{sys.argv[1]}/{v}-run*.json"))]
    print(f"{v}: model checksum (step 1) median {statistics.median(xs):.3f} GB/s, runs {[round(x, 3) for x in xs]}")
PY
(cd $OUT && tar cJf runs.tar.xz old-run* new-run* && rm old-run* new-run*)
cat $OUT/summary.txt; grep -E "entropy|rice" $OUT/medians.txt | grep -v alone | head -12
