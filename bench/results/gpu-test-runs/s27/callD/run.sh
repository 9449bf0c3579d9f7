#!/usr/bin/env bash
# Session 27, call D (one H200): entropy_walk_probe's new `tile` layout (each lane a contiguous S vectors of a
# 32 S V-element tile, a warp's 32 streams within one tile) beside the lane ranges (range, xpose) and the coalesced
# walk, with the loads alone, a counter atomic an element, and the rank test: is the lane-range walk bound by its
# access pattern? `entropy_walk_probe 7e9 3 27` (built from this tree, carried in .carry/s27p).
set -u
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
timeout 300 .carry/s27p/entropy_walk_probe 7e9 3 27 > $OUT/probe.jsonl 2>&1; echo "probe rc=$?" >> $OUT/summary.txt
cat $OUT/probe.jsonl >> $OUT/summary.txt
cat $OUT/summary.txt
