#!/usr/bin/env bash
# The entropy apply's first pass and the whole apply at -O2 (CMake's RelWithDebInfo level, what many consumers of
# a header-only library build with) and -O3, before (9b4e8ac's headers) and after (this session's), on the dev VM.
# bench/cpu/entropy_hash_pass_probe.cpp is this session's file; it is compiled against either tree's include/.
# Usage: bench/results/cpu-s31/o2/run.sh STREAM_DIR XXHASH_INCLUDE_DIR   (from the repository root)
set -euo pipefail
stream=$1 xxh=$2 out=bench/results/cpu-s31/o2 tmp=$(mktemp -d)
git archive 9b4e8ac include | tar -x -C "$tmp"
for opt in O2 O3; do
  for tree in old new; do
    inc=$([ $tree = old ] && echo "$tmp/include" || echo include)
    g++ -$opt -DNDEBUG -std=gnu++20 -w -Ibench/support -I"$inc" -Itests/support/include -I"$xxh" -DSPARSESYNC_SHARED_DIR='"."' \
      bench/cpu/entropy_hash_pass_probe.cpp -o "$tmp/probe-$opt-$tree"
  done
done
for r in 1 2 3; do
  for opt in O2 O3; do
    for tree in old new; do
      "$tmp/probe-$opt-$tree" --stream "$stream" --reps 41 --out "$out/$opt-$tree-run$r.json" > /dev/null
    done
  done
done
rm -rf "$tmp"
