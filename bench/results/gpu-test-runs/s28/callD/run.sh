#!/usr/bin/env bash
# Session 28, call D (four GPUs, when lent; not run this session: only one-GPU machines were lent): issue 11's
# four-GPU checks with this session's engine build (.carry/s28n, cec20a3 and later: the engine as session 26 left
# it plus device_source's run-time encoder, default unchanged): the kill and sharded NCCL tests on four GPUs;
# 1 -> 3 workers, atomic, session 24's build (s24g, old) beside this one, twice alternated, and streamed.
# Run from a later session: pack .carry/s28n from that session's tree first if the engine changed since.
set -u
. bench/gpu/device_call_lib.sh
call_setup s24g s28n /tmp/outD
call_tests engine_nccl_kill_gpu_tests:60 engine_nccl_sharded_gpu_tests:60 engine_nccl_gpu_tests:90
call_engine old3-a $O 3 atomic; call_engine new3-a $N 3 atomic
call_engine new3-b $N 3 atomic; call_engine old3-b $O 3 atomic; call_engine new3-s $N 3 streamed
call_tails old3-a new3-a new3-b old3-b new3-s
call_pack callD
