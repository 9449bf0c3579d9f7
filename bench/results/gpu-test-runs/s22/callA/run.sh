#!/usr/bin/env bash
# Session 22, call A (two GPUs): where an atomic 7B version's time goes on today's tree (f09fff8). A run traced
# twice over (CUPTI timeline of both GPUs, kernel_trace.hpp; every credit, send and landing of the links,
# SPARSESYNC_NCCL_LINK_TRACE), then the plain bench (atomic and streamed) for the untraced figures.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s22a; mkdir -p $B && tar xJf .carry/s22a/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outA; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_NCCL_LINK_TRACE=1 timeout 150 $B/engine_nccl_bench --workers 1 --versions 4 --commit atomic --configs 512:4:4:2 --encoders varint \
  --json $W/traced.jsonl --trace $W/trace.jsonl > $W/traced.out 2> $W/traced.err; s traced $?
python3 bench/gpu/trace_summary.py $W/trace.jsonl --versions 2-5 > $OUT/trace_summary.txt 2>&1
python3 bench/gpu/tail_summary.py $W/traced.jsonl >> $OUT/summary.txt 2>&1
t0=$(date +%s); timeout 120 $B/engine_nccl_bench --workers 1 --versions 5 --commit both --configs 512:4:4:2 --encoders varint --json $W/plain.jsonl > /dev/null 2>$W/plain.err; s plain $?
python3 bench/gpu/tail_summary.py $W/plain.jsonl >> $OUT/summary.txt 2>&1
grep -h 'summary\|dense' $W/plain.jsonl | cut -c1-400 >> $OUT/summary.txt
cp $W/traced.jsonl $W/plain.jsonl $OUT/
gzip -9 -c $W/traced.err > $OUT/traced.err.gz; gzip -9 -c $W/trace.jsonl > $OUT/trace.jsonl.gz
cat $OUT/summary.txt
