#!/usr/bin/env bash
# Session 26, call D (four GPUs, if lent): this session's engine build (.carry/s26b: session 25's engine with the
# review's encode-kernel changes and the branch-free order key) where session 25 could not take it: the kill and
# sharded NCCL tests on four GPUs; 1 -> 3 workers atomic, session 24's build (s24g, old) / new / new polling for
# the ack, and streamed.
set -u
. bench/gpu/device_call_lib.sh
call_setup s24g s26b /tmp/outD
call_tests engine_nccl_kill_gpu_tests:60 engine_nccl_sharded_gpu_tests:60 engine_nccl_gpu_tests:90
P="--ack-poll-us 20000"
call_engine old3-a $O 3 atomic; call_engine new3-a $N 3 atomic; call_engine poll3-a $N 3 atomic "$P"
call_engine new3-b $N 3 atomic; call_engine old3-b $O 3 atomic; call_engine poll3-s $N 3 streamed "$P"
call_tails old3-a new3-a poll3-a new3-b old3-b poll3-s
call_pack callD
