#!/usr/bin/env bash
# Session 23, call E (two GPUs): an experiment not meant to be kept as is: nccl_link on a blocking communicator
# (SPARSESYNC_EXP_BLOCKING=1 in the experiment's build: config.blocking = 1, every p2p channel connected at setup by
# a 64 MiB transfer, so that no later enqueue waits for the peer). Call B's probe: an enqueue takes 8-10 us on a
# blocking communicator, 50-110 us on a non-blocking one (NCCL finishes it on a thread of its own). The engine,
# atomic, 7B BF16 at 1% varint: old (session 22's final binary) / blocking alternated, blocking streamed, one
# blocking run with the link trace; engine_nccl_gpu_tests on the blocking build.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s23old; N=/tmp/s23new; mkdir -p $O $N
tar xJf .carry/s22h/bin.tar.xz -C $O && tar xJf .carry/s23e/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outE; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_EXP_BLOCKING=1 timeout 150 $N/engine_nccl_gpu_tests_blk --duration=true > $W/engine_nccl_gpu_tests_blk.log 2>&1; s engine_nccl_gpu_tests_blk $?
grep -E "test cases|assertions|ERROR" $W/engine_nccl_gpu_tests_blk.log | head -8 >> $OUT/summary.txt
run() {  # name binary commit [env]
  local name=$1 bin=$2 commit=$3; shift 3
  t0=$(date +%s); env "$@" timeout 60 $bin --workers 1 --versions 5 --commit $commit --configs 512:4:4:2 --encoders varint --json $W/$name.jsonl > /dev/null 2>>$W/$name.err; s $name $?
}
run old-1 $O/engine_nccl_bench atomic X=1; run blk-1 $N/engine_nccl_bench_blk atomic SPARSESYNC_EXP_BLOCKING=1
run old-2 $O/engine_nccl_bench atomic X=1; run blk-2 $N/engine_nccl_bench_blk atomic SPARSESYNC_EXP_BLOCKING=1
run blk-s $N/engine_nccl_bench_blk streamed SPARSESYNC_EXP_BLOCKING=1
run blk-trace $N/engine_nccl_bench_blk atomic SPARSESYNC_EXP_BLOCKING=1 SPARSESYNC_NCCL_LINK_TRACE=1
for f in old-1 blk-1 old-2 blk-2 blk-s blk-trace; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
for f in old-1 blk-1 blk-2; do head -c 600 $W/$f.err >> $OUT/summary.txt; done
gzip -9 $W/*.log $W/*.err
cd $W && tar czf $OUT/callE.tgz * && cat $OUT/summary.txt
