#!/usr/bin/env bash
# Session 24, call C (two H200s): where the last frames wait. Call B's link trace shows them leaving the trainer
# ~0.2 ms apart and landing on the worker ~0.2 ms after they left, both GPUs busy (the last encodes; the worker's
# four verify lanes). 1 -> 1 atomic versions (7B BF16 at 1%, varint), alternated: the default (512 MiB buckets, 4
# encode lanes, 4 verify lanes), 2 verify lanes, 3 encode lanes, and NCCL's p2p by write (NCCL_P2P_READ_ENABLE=0)
# and by read (=1). The first run logs which p2p path NCCL took. Same binaries as call B (.carry/s24a).
set -u
export NCCL_NVLS_ENABLE=0
N=/tmp/s24new; mkdir -p $N
tar xJf .carry/s24a/bin.tar.xz -C $N
export LD_LIBRARY_PATH=$N/lib:${LD_LIBRARY_PATH:-}
W=/tmp/outC; mkdir -p $W
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
run() {  # name config [env...]
  local n=$1 c=$2; shift 2
  t0=$(date +%s); env "$@" timeout 60 $N/engine_nccl_bench --workers 1 --versions 5 --commit atomic --configs $c --encoders varint --json $W/$n.jsonl > /dev/null 2>>$W/$n.err; s $n $?
}
run base-1 512:4:4:2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P
for k in 1 2; do
  [ $k = 2 ] && run base-2 512:4:4:2
  run v2-$k 512:4:2:2; run e3-$k 512:3:4:2; run write-$k 512:4:4:2 NCCL_P2P_READ_ENABLE=0; run read-$k 512:4:4:2 NCCL_P2P_READ_ENABLE=1
done
grep -h "via P2P\|P2P/" $W/base-1.err | sort | uniq -c | head -8 >> $OUT/summary.txt
for f in base-1 v2-1 e3-1 write-1 read-1 base-2 v2-2 e3-2 write-2 read-2; do
  echo "== $f" >> $OUT/summary.txt
  grep -h 'summary\|dense' $W/$f.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    print({k:r.get(k) for k in ('commit','workers','median_version_ms','median_encode_ms','median_ms')})
" >> $OUT/summary.txt
  python3 bench/gpu/tail_summary.py $W/$f.jsonl >> $OUT/summary.txt 2>&1
done
gzip -9 $W/*.err
cd $W && tar czf $OUT/callC.tgz * && cat $OUT/summary.txt
