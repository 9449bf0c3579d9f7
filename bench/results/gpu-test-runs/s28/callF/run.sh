#!/usr/bin/env bash
# (Call E again after the sender fix 973ac69: the pack rebuilt from that tree.)
# Session 28, call F (one H200): the engine pack for call D (.carry/s28n, the session's final engine code) checked
# where one GPU suffices: engine_gpu_tests, engine_sharded_gpu_tests, frame_sync_tests, and the NCCL tests, which
# need two or four GPUs and must say so and skip.
set -u
. bench/gpu/device_call_lib.sh
call_setup s28n s28n /tmp/outF
call_tests engine_gpu_tests:150 engine_sharded_gpu_tests:120 frame_sync_tests:120 engine_nccl_gpu_tests:60 engine_nccl_kill_gpu_tests:60 engine_nccl_sharded_gpu_tests:60
call_pack callF
