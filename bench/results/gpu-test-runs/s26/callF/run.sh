#!/usr/bin/env bash
# Session 26, call F (one H200): review fix in device_encoder_impl: settle() reads and clears `advancing_` under the
# lock that guards the deferred advance's enqueue (a session's encode_full() may enqueue it at the same time), and
# the pending flag's writes in encode_version() and invalidate() take it too. The one-GPU engine tests.
set -u
. bench/gpu/device_call_lib.sh
call_setup s26f s26f /tmp/outF
call_tests engine_gpu_tests:60 frame_sync_tests:90 engine_sharded_gpu_tests:90
call_pack callF
