#!/usr/bin/env bash
# Session 27, call G (one H200): entropy_walk_probe's `encrange` (the encoder's ranking walk over the lane ranges,
# its per-vector change test and counter atomics with their old values) and `enctile` (the same ranks in tile order:
# per tile a warp sum per change before the tile is counted and one after). `entropy_walk_probe 7e9 3 29` (built
# from this tree, carried in .carry/s27p).
set -u
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
timeout 300 .carry/s27p/entropy_walk_probe 7e9 3 29 > $OUT/probe.jsonl 2>&1; echo "probe rc=$?" >> $OUT/summary.txt
cat $OUT/probe.jsonl >> $OUT/summary.txt
cat $OUT/summary.txt
