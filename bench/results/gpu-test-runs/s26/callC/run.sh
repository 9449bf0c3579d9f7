#!/usr/bin/env bash
# Session 26, call C (one H200): the final host codec (the entropy encoder plans rice only where its floor leaves the
# choice open; the decoder's 1024-element placing walk) against the device codec: gpu_codec_tests compares every
# encoder's GPU payloads byte for byte with the host's, and the host decoder applies them. The one-GPU engine tests.
set -u
. bench/gpu/device_call_lib.sh
call_setup s26c s26c /tmp/outC
call_tests gpu_codec_tests:150 frame_sync_tests:90 engine_gpu_tests:60 engine_sharded_gpu_tests:90
call_pack callC
