#!/usr/bin/env bash
# Session 15, call A (one GPU): the entropy walks' loads kept in flight by cp.async into a shared-memory ring
# (layout "async", D vectors a lane) beside the register walks of session 14 (bench/gpu/entropy_walk_probe.cu).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/summary.txt
timeout 300 .carry/s15a/entropy_walk_probe 7e9 3 | tee $OUT/probe.jsonl
