#!/usr/bin/env bash
# Session 23, call F (four GPUs): call E's experiment (nccl_link on a blocking communicator, SPARSESYNC_EXP_BLOCKING=1,
# `../callE/blocking-link-experiment.diff`) where it matters more and where it could break: the kill test (a worker
# process killed mid-version; the others must finish within the timeout + 1 s) on the blocking build, and 1 -> 3
# workers (three links: the trainer's credit thread pays three enqueues a frame) old / blocking alternated, atomic
# and streamed.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s23old; N=/tmp/s23new; mkdir -p $O $N
tar xJf .carry/s22h/bin.tar.xz -C $O && tar xJf .carry/s23f/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outF; mkdir -p $W /tmp/build-main/tests/cuda
cp $N/engine_nccl_worker $N/engine_nccl_kill_gpu_tests /tmp/build-main/tests/cuda/
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
t0=$(date +%s); SPARSESYNC_EXP_BLOCKING=1 timeout 120 /tmp/build-main/tests/cuda/engine_nccl_kill_gpu_tests --duration=true > $W/kill_blk.log 2>&1; s kill_blk $?
grep -E "test cases|assertions|ERROR|within|finished|seconds" $W/kill_blk.log | head -12 >> $OUT/summary.txt
run() {  # name binary commit [env]
  local name=$1 bin=$2 commit=$3; shift 3
  t0=$(date +%s); env "$@" timeout 90 $bin --workers 3 --versions 5 --commit $commit --configs 512:4:4:2 --encoders varint --json $W/$name.jsonl > /dev/null 2>>$W/$name.err; s $name $?
}
run old-a $O/engine_nccl_bench atomic X=1; run blk-a $N/engine_nccl_bench_blk atomic SPARSESYNC_EXP_BLOCKING=1
run old-s $O/engine_nccl_bench streamed X=1; run blk-s $N/engine_nccl_bench_blk streamed SPARSESYNC_EXP_BLOCKING=1
run old-a2 $O/engine_nccl_bench atomic X=1; run blk-a2 $N/engine_nccl_bench_blk atomic SPARSESYNC_EXP_BLOCKING=1
for f in old-a blk-a old-s blk-s old-a2 blk-a2; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','workers','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
for f in old-a blk-a; do head -c 400 $W/$f.err >> $OUT/summary.txt; done
gzip -9 $W/*.log $W/*.err
cd $W && tar czf $OUT/callF.tgz * && cat $OUT/summary.txt
