#!/usr/bin/env bash
# Session 23, call D (two GPUs): the one-pass atomic commit with process_chunk's reads held in registers (call C's
# one-pass commit took 3.70-3.74 ms against 3.63-3.65 for the per-bucket commits), GPU tests again (process_chunk
# is also the verify's and the undo's); engine old (session 22's final binary) / new alternated, atomic; and an
# experiment not meant to be kept (engine_nccl_bench_exp: the deferred snapshot advance held back on the trainer's
# GPU by SPARSESYNC_EXP_ADVANCE_DELAY_US microseconds, so that the last frames leave an idle GPU): what an advance
# that waits for the frames' sends could save, atomic and streamed.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s23old; N=/tmp/s23new; mkdir -p $O $N
tar xJf .carry/s22h/bin.tar.xz -C $O && tar xJf .carry/s23d/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/outD; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in gpu_codec_tests:240 engine_gpu_tests:90 engine_nccl_gpu_tests:150; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $N/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name binary commit [env]
  local name=$1 bin=$2 commit=$3; shift 3
  t0=$(date +%s); env "$@" timeout 60 $bin --workers 1 --versions 5 --commit $commit --configs 512:4:4:2 --encoders varint --json $W/$name.jsonl > /dev/null 2>>$W/bench.err; s $name $?
}
run old-1 $O/engine_nccl_bench atomic X=1; run new-1 $N/engine_nccl_bench atomic X=1
run old-2 $O/engine_nccl_bench atomic X=1; run new-2 $N/engine_nccl_bench atomic X=1
run exp300 $N/engine_nccl_bench_exp atomic SPARSESYNC_EXP_ADVANCE_DELAY_US=300
run exp600 $N/engine_nccl_bench_exp atomic SPARSESYNC_EXP_ADVANCE_DELAY_US=600
run new-s $N/engine_nccl_bench streamed X=1
run exp600-s $N/engine_nccl_bench_exp streamed SPARSESYNC_EXP_ADVANCE_DELAY_US=600
for f in old-1 new-1 old-2 new-2 exp300 exp600 new-s exp600-s; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','median_version_ms','median_encode_ms','median_snapshot_advance_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
head -c 2000 $W/bench.err >> $OUT/summary.txt
gzip -9 $W/*_tests.log
cd $W && tar czf $OUT/callD.tgz * && cat $OUT/summary.txt
