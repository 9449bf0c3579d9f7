#!/usr/bin/env bash
# Session 23, call C (two GPUs): the one-pass atomic commit (apply_plan::commit_all: every verified bucket's
# scatter in one launch) and the link's CTA limit. gpu_codec_tests (commit_all beside per-bucket commits, past
# 1024 buckets), engine_gpu_tests and engine_nccl_gpu_tests on the new build; then the engine, atomic, 7B BF16 at
# 1% varint: old (session 22's final binary, call A's) and new alternated, and new with --link-ctas 16 / 32, and
# with NCCL_NCHANNELS_PER_PEER=8; the probe with 16 and 32 CTAs at NCCL's default channels.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/s23old; N=/tmp/s23new; mkdir -p $O $N
tar xJf .carry/s22h/bin.tar.xz -C $O && tar xJf .carry/s23c/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
W=/tmp/outC; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for t in gpu_codec_tests:240 engine_gpu_tests:90 engine_nccl_gpu_tests:150; do
  n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
  timeout $l $N/$n --duration=true > $W/$n.log 2>&1; s $n $?
  grep -E "test cases|assertions|ERROR" $W/$n.log | head -8 >> $OUT/summary.txt
done
run() {  # name binary-dir [args...]
  local name=$1 dir=$2; shift 2
  t0=$(date +%s); timeout 60 $dir/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs 512:4:4:2 --encoders varint --json $W/$name.jsonl "$@" > /dev/null 2>>$W/bench.err; s $name $?
}
run old-1 $O; run new-1 $N; run old-2 $O; run new-2 $N; run cta16 $N --link-ctas 16; run cta32 $N --link-ctas 32
NCCL_NCHANNELS_PER_PEER=8 run ch8cta32 $N --link-ctas 32
run new-3 $N
for f in old-1 new-1 old-2 new-2 cta16 cta32 ch8cta32 new-3; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','link_ctas','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
for c in 16 32; do timeout 60 $N/nccl_p2p_probe --busy 1 --max-ctas $c --label cta$c >> $W/probe.jsonl 2>>$W/probe.err; done
python3 - >> $OUT/summary.txt <<'PY'
import json
for l in open('/tmp/outC/probe.jsonl'):
    r=json.loads(l)
    print("%-6s busy=%d cta=%2d %9d B  send_enq %.3f ms  b2b %.3f ms/frame  %6.1f GB/s" % (r['label'],r['busy'],r['max_ctas'],r['bytes'],r['send_enqueue_ms_median'],r['back_to_back_ms_per_frame'],r['gb_per_s']))
PY
head -c 2000 $W/bench.err >> $OUT/summary.txt
gzip -9 $W/*_tests.log
cd $W && tar czf $OUT/callC.tgz * && cat $OUT/summary.txt
