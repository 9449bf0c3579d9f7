#!/usr/bin/env bash
# Session 25, call H (four GPUs): the final build (.carry/s25g) where session 25 could not take it: the kill and
# sharded NCCL tests on four GPUs; 1 -> 3 workers atomic, old (s24g) / new / new polling for the ack, and streamed.
set -u
. bench/gpu/device_call_lib.sh
call_setup s24g s25g /tmp/outH
call_tests engine_nccl_kill_gpu_tests:60 engine_nccl_sharded_gpu_tests:60
P="--ack-poll-us 20000"
call_engine old3-a $O 3 atomic; call_engine new3-a $N 3 atomic; call_engine poll3-a $N 3 atomic "$P"
call_engine new3-b $N 3 atomic; call_engine poll3-s $N 3 streamed "$P"
call_tails old3-a new3-a poll3-a new3-b poll3-s
call_pack callH
