#!/usr/bin/env bash
# Session 27, call F (one H200): entropy_walk_probe's `tilescan` layout, what a placing walk over 32 S V-element tiles
# (each lane S contiguous vectors) would do: per tile each lane's elements of 16 groups, a scan over the lanes per
# group into the lanes' rank counters, then the rank test per element; beside the lane-range walks (range, xpose)
# and call D's tile rank. `entropy_walk_probe 7e9 3 28` (built from this tree, carried in .carry/s27p).
set -u
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
timeout 300 .carry/s27p/entropy_walk_probe 7e9 3 28 > $OUT/probe.jsonl 2>&1; echo "probe rc=$?" >> $OUT/summary.txt
cat $OUT/probe.jsonl >> $OUT/summary.txt
cat $OUT/summary.txt
