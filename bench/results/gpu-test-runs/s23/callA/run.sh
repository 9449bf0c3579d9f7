#!/usr/bin/env bash
# Session 23, call A (session 22 call H as prepared, plus two variants) (two GPUs): the end of an atomic 7B version, where the last frames' sends wait for each other
# on the link (call E). Final code + fixed_bytes's tail (the model's last T MiB in buckets of TB MiB, --configs
# MB:E:L:F:T:TB): default, tail 1024:128, tail 2048:128; and NCCL's p2p through the copy engines
# (NCCL_P2P_USE_CUDA_MEMCPY=1: transfers that take no SM and no share of the trainer's memory-bound passes).
set -u
export NCCL_NVLS_ENABLE=0
B=/tmp/s23a; mkdir -p $B && tar xJf .carry/s22h/bin.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outA; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
run() {  # name configs [env]
  t0=$(date +%s); env ${3:-} timeout 60 $B/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs $2 --encoders varint --json $W/$1.jsonl > /dev/null 2>>$W/bench.err; s $1 $?
}
run def 512:4:4:2; run tail1g 512:4:4:2:1024:128; run tail2g 512:4:4:2:2048:128; run ce 512:4:4:2 NCCL_P2P_USE_CUDA_MEMCPY=1; run tail512 512:4:4:2:512:64; run ce-tail1g 512:4:4:2:1024:128 NCCL_P2P_USE_CUDA_MEMCPY=1; run def-2 512:4:4:2; run tail1g-2 512:4:4:2:1024:128
for f in def tail1g tail2g ce tail512 ce-tail1g def-2 tail1g-2; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','buckets','tail_mb','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
head -c 2000 $W/bench.err >> $OUT/summary.txt
cd $W && tar czf $OUT/callA.tgz *.jsonl && cat $OUT/summary.txt
