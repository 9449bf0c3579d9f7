#!/usr/bin/env bash
# Session 27, call L (one H200): scripts/gpu_tsan.sh itself on the lent machine (it builds there: xxhash.h carried in
# .carry/xxhash), the GPU engine tests under ThreadSanitizer with libcuda suppressed.
mkdir -p $OUT; ( time XXHASH_INCLUDE=$PWD/.carry/xxhash bash scripts/gpu_tsan.sh /tmp/tsan-gpu-build ) > $OUT/gpu_tsan.log 2>&1; echo "rc=$?" >> $OUT/gpu_tsan.log
