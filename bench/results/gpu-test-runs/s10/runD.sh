#!/usr/bin/env bash
# Session 10, call D (4x H100): the pipelined device receives (one receive posted ahead) of the working tree after
# 96eef9e, built on the dev VM (sm_90): the NCCL engine tests, then the engine benches (dense broadcast baseline in
# the same runs).
set -u
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/build-main/tests/cuda
cp .carry/lead4/*_tests .carry/lead4/engine_nccl_worker /tmp/build-main/tests/cuda/
T=/tmp/build-main/tests/cuda
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
for t in engine_gpu_tests:60 engine_sharded_gpu_tests:60 engine_nccl_gpu_tests:150 engine_nccl_kill_gpu_tests:90 engine_nccl_sharded_gpu_tests:60; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $T/$n --duration=true > $OUT/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions" $OUT/$n.log >> $OUT/summary.txt
done
t0=$(date +%s); timeout 120 .carry/lead4/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:1 --encoders varint --json $OUT/h100x4-7b-1to1-pipelined.jsonl > $OUT/bench-1to1.log 2>&1; s bench-1to1 $?
t0=$(date +%s); timeout 120 .carry/lead4/engine_nccl_bench --workers 3 --versions 5 --commit both --configs 512:4:4:1 --encoders varint --json $OUT/h100x4-7b-1to3-pipelined.jsonl > $OUT/bench-1to3.log 2>&1; s bench-1to3 $?
t0=$(date +%s); timeout 100 .carry/lead4/engine_sharded_bench --versions 5 --json $OUT/h100x4-7b-sharded-pipelined.jsonl > $OUT/bench-sharded.log 2>&1; s bench-sharded $?
python3 - "$OUT" >> $OUT/summary.txt <<PY
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+"/*.jsonl")):
    for l in open(f):
        try: r=json.loads(l)
        except Exception: continue
        if "summary" in r.get("row","") or "dense" in r.get("row",""): print(f.split("/")[-1], {k:v for k,v in r.items() if k in ("row","commit","workers","trainers","median_version_ms","median_encode_ms","median_ms","ratio","version_ms")})
PY
cd $OUT && tar czf logs.tgz *.log && rm -f *_tests.log; cat summary.txt
