#!/usr/bin/env bash
# Session 23, call B (two GPUs): one nccl_link transfer apart from the engine (bench/gpu/nccl_p2p_probe.cu): host
# time to enqueue ncclSend / ncclRecv on non-blocking (nccl_link's kind) and blocking communicators, and the link's
# throughput for the engine's frame sizes with the sending GPU idle or busy with a low-priority memory-bound
# kernel; NCCL's channels per peer, chunk size and the link's CTA limit varied.
set -u
export NCCL_NVLS_ENABLE=0
P=.carry/s23b/nccl_p2p_probe
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
r() { local label=$1; shift; env "$@" timeout 60 $P --label $label $PROBE_ARGS >> $OUT/rows.jsonl 2>>$OUT/err.txt; echo "$label $PROBE_ARGS rc=$?" >> $OUT/summary.txt; }
for busy in 0 1; do
  for blocking in 0 1; do
    PROBE_ARGS="--busy $busy --blocking $blocking --max-ctas 8"; r default X=1
  done
  PROBE_ARGS="--busy $busy --blocking 0 --max-ctas 8"
  r ch4 NCCL_NCHANNELS_PER_PEER=4; r ch8 NCCL_NCHANNELS_PER_PEER=8; r chunk2m NCCL_P2P_NVL_CHUNKSIZE=2097152
  PROBE_ARGS="--busy $busy --blocking 0 --max-ctas 32"; r ch8cta32 NCCL_NCHANNELS_PER_PEER=8
  PROBE_ARGS="--busy $busy --blocking 0 --max-ctas 32"; r ch16cta32 NCCL_NCHANNELS_PER_PEER=16
done
python3 - >> $OUT/summary.txt <<'PY'
import json,os
for l in open(os.environ['OUT']+'/rows.jsonl'):
    r=json.loads(l)
    print("%-10s busy=%d blk=%d cta=%2d %9d B  send_enq %.3f  recv_enq %.3f ms  b2b %.3f ms/frame  %6.1f GB/s" % (
        r['label'],r['busy'],r['blocking'],r['max_ctas'],r['bytes'],r['send_enqueue_ms_median'],r['recv_enqueue_ms_median'],r['back_to_back_ms_per_frame'],r['gb_per_s']))
PY
head -c 3000 $OUT/err.txt >> $OUT/summary.txt
cat $OUT/summary.txt
