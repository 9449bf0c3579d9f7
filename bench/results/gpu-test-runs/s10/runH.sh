#!/usr/bin/env bash
# Session 10, call H (4x H100): is the sharded bench's slower 1 -> 2 row of call D reproducible? engine_sharded_bench
# again (tree of 0a0f340), then 1 -> 2 through engine_nccl_bench (one sender, no sharded receiver) for comparison.
set -u
export NCCL_NVLS_ENABLE=0
timeout 80 .carry/lead8/engine_sharded_bench --versions 5 --json $OUT/sharded.jsonl > $OUT/sharded.log 2>&1; echo "sharded rc=$?"
timeout 80 .carry/lead8/engine_nccl_bench --workers 2 --versions 5 --commit atomic --configs 512:4:4:1 --encoders varint --json $OUT/nccl-1to2.jsonl > $OUT/nccl-1to2.log 2>&1; echo "nccl 1to2 rc=$?"
grep -h '"engine_sharded_version"\|summary\|dense' $OUT/sharded.log $OUT/nccl-1to2.log | grep -v '"full":true' | cut -c1-260
