#!/usr/bin/env bash
# Session 25, call G (two GPUs or more): call C again on the fixed build (.carry/s25g). Call C found its new
# engine_nccl_bench runs wrong at version 3 (worker != trainer in 762170 elements): the bench's backend decorator
# did not forward version_written(), so the deferred advance started only at the next encode, after the bench had
# changed the weights it reads. Fixed: settle() starts a pending advance; the decorator forwards it. Tests (the NCCL engine's
# on two GPUs; kill and sharded on four), then 1 -> 1 atomic versions alternated: s24g's build (old), this build
# (new = .carry/s25g, this session's last build: a verified patch's commit as one list, the kept buckets side by side on the verify lanes), and this build
# with publish() polling for the ack (--ack-poll-us 20000); one streamed; on four GPUs 1 -> 3 atomic and streamed.
# The timeline keeps each event's last six times (the last frames hop by hop: tail_summary.py --hops).
set -u
. bench/gpu/device_call_lib.sh
call_setup s24g s25g /tmp/outG
tests="engine_gpu_tests:60 frame_sync_tests:90 engine_nccl_gpu_tests:120"
[ "$G" -ge 4 ] && tests="$tests engine_nccl_kill_gpu_tests:60 engine_nccl_sharded_gpu_tests:60"
call_tests $tests
P="--ack-poll-us 20000"
for i in 1 2 3; do
  call_engine old-$i $O 1 atomic; call_engine new-$i $N 1 atomic; call_engine poll-$i $N 1 atomic "$P"
done
call_engine poll-s $N 1 streamed "$P"
[ "$G" -ge 4 ] && { call_engine new3-a $N 3 atomic; call_engine poll3-a $N 3 atomic "$P"; call_engine poll3-s $N 3 streamed "$P"; }
call_tails old-1 new-1 poll-1 old-2 new-2 poll-2 old-3 new-3 poll-3 poll-s new3-a poll3-a poll3-s
python3 bench/gpu/tail_summary.py --hops $W/new-1.jsonl $W/poll-1.jsonl 2>&1 | grep -v "^[a-z0-9-]*.jsonl  " >> $OUT/summary.txt
call_pack callG
