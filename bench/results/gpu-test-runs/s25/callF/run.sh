#!/usr/bin/env bash
# Session 25, call F (one H200): the final build's one-GPU tests (.carry/s25f): the trainer now starts a deferred
# snapshot advance after the version's closing header is out (device_encoder_backend::version_written), which the
# engine tests' host-snapshot trainers take; and the codec's.
set -u
. bench/gpu/device_call_lib.sh
call_setup s25f s25f /tmp/outF
call_tests gpu_codec_tests:150 frame_sync_tests:90 engine_gpu_tests:60 engine_sharded_gpu_tests:90
call_pack callF
