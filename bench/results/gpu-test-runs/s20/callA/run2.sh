#!/usr/bin/env bash
# Session 20, call A2: the probe again (call A's copy read past its 11 KB counters in its last line; mended).
set -u
B=/tmp/s20b; mkdir -p $B && tar xJf .carry/s20b/bin.tar.xz -C $B
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 >> $OUT/summary.txt
timeout 200 $B/entropy_walk_probe 7e9 3 > $OUT/probe.jsonl 2>&1; echo "probe rc=$?" >> $OUT/summary.txt
cat $OUT/summary.txt; cat $OUT/probe.jsonl | sed -n 19,60p
