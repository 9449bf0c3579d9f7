#!/usr/bin/env bash
# Session 30, call E (one H200): entropy_walk_probe's session-30 set (bench/gpu/entropy_walk_probe.cu, built on the
# VM: nvcc -O3 -std=c++20 -arch=sm_90 -Iinclude, .carry/s30c): the decoder's placing walk in position order by
# __match_any_sync (layout match) and the coalesced count with per-lane-range snapshots
# (layout coalsnap; slots 2: a warp sum per two-class counter word over a list), beside the coalesced class count, the lane-range count and the placing kernel's
# lane-range walk (xpose 2 2) in the same run. At 1e8 first, where lane 0's serial walk (matchref) checks match's
# sums, then at 7e9 for the times.
set -u
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
timeout 120 .carry/s30c/entropy_walk_probe 1e8 3 30 > $OUT/probe-1e8.jsonl 2>&1; echo "1e8 rc=$?" >> $OUT/summary.txt
timeout 300 .carry/s30c/entropy_walk_probe 7e9 3 30 > $OUT/probe-7e9.jsonl 2>&1; echo "7e9 rc=$?" >> $OUT/summary.txt
cat $OUT/summary.txt $OUT/probe-1e8.jsonl $OUT/probe-7e9.jsonl
