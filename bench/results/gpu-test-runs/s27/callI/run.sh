#!/usr/bin/env bash
# Session 27, call I (one H200): entropy_walk_probe after its walks were factored into helpers (lane_walk, tile_walk,
# words8; no change meant): the sets of calls D, F and G again, and the default set (whose lane-range variants check
# each other's sums), to compare with those calls.
set -u
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
for set in 27 28 29; do
  timeout 200 .carry/s27p/entropy_walk_probe 7e9 3 $set > $OUT/probe-$set.jsonl 2>&1; echo "probe $set rc=$?" >> $OUT/summary.txt
  cat $OUT/probe-$set.jsonl >> $OUT/summary.txt
done
timeout 200 .carry/s27p/entropy_walk_probe 7e9 3 > $OUT/probe-default.jsonl 2>&1; echo "probe default rc=$?" >> $OUT/summary.txt
grep -c error $OUT/probe-default.jsonl >> $OUT/summary.txt
cat $OUT/summary.txt
