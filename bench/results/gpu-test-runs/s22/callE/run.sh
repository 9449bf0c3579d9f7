#!/usr/bin/env bash
# Session 22, call E (two GPUs): call C's new binary, atomic 7B versions with the link trace on
# (SPARSESYNC_NCCL_LINK_TRACE=1: host lines plus a stamp when each send leaves and each frame lands on its GPU;
# no CUPTI, which made calls A and B's versions 10x longer), to see each of the last frames' chain.
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s22c; mkdir -p $B && tar xJf .carry/s22c/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outE; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_NCCL_LINK_TRACE=1 timeout 100 $B/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint \
  --json $W/traced.jsonl > /dev/null 2> $W/traced.err; s traced $?
python3 bench/gpu/tail_summary.py $W/traced.jsonl >> $OUT/summary.txt 2>&1
cp $W/traced.jsonl $OUT/; gzip -9 -c $W/traced.err > $OUT/traced.err.gz
cat $OUT/summary.txt
