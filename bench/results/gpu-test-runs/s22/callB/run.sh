#!/usr/bin/env bash
# Session 22, call B (two GPUs): call A's binary, the atomic 7B version traced by CUPTI alone (the link trace of
# call A held every transfer up by its host callbacks: 188 ms versions), to see the trainer's and the worker's
# GPUs over one version as it runs.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s22a; mkdir -p $B && tar xJf .carry/s22a/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outB; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s); timeout 150 $B/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint \
  --json $W/traced.jsonl --trace $W/trace.jsonl > $W/traced.out 2> $W/traced.err; s traced $?
python3 bench/gpu/trace_summary.py $W/trace.jsonl --versions 2-6 > $OUT/trace_summary.txt 2>&1
python3 bench/gpu/tail_summary.py $W/traced.jsonl >> $OUT/summary.txt 2>&1
cp $W/traced.jsonl $OUT/; gzip -9 -c $W/trace.jsonl > $OUT/trace.jsonl.gz
cat $OUT/summary.txt
