#!/usr/bin/env bash
# Session 11, call F (2x H100): a CUPTI timeline of the engine's versions (engine_nccl_bench --trace, tree after
# c5d2f80), atomic and streamed, 512 MiB buckets, 4 lanes, varint; summarized by bench/gpu/trace_summary.py here.
set -u
export NCCL_NVLS_ENABLE=0
B=.carry/lead
ldd $B/engine_nccl_bench | grep -q "cupti.*not found" && export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
t0=$(date +%s); timeout 150 $B/engine_nccl_bench --workers 1 --versions 4 --commit both --configs 512:4:4:1 --encoders varint --json $OUT/traced.jsonl --trace $OUT/trace.jsonl > $OUT/traced.log 2>&1; echo "traced rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
grep -h 'summary\|dense' $OUT/traced.jsonl | cut -c1-330 >> $OUT/summary.txt
ls -la $OUT >> $OUT/summary.txt
gzip -9 $OUT/trace.jsonl
cat $OUT/summary.txt
