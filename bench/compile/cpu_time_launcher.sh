#!/usr/bin/env bash
# Compiler launcher (CMAKE_CXX_COMPILER_LAUNCHER / CMAKE_CUDA_COMPILER_LAUNCHER) that records the CPU time of
# every compile: one line "user_s sys_s max_rss_kb output" appended to $SPARSESYNC_CPU_LOG. CPU time, not wall
# time, because the build machine is shared and wall time depends on what else runs.
set -u
log=${SPARSESYNC_CPU_LOG:?set SPARSESYNC_CPU_LOG to the file that collects the timings}
out=unknown
prev=
for a in "$@"; do
  if [[ "$prev" == "-o" ]]; then out=$a; fi
  prev=$a
done
tmp=$(mktemp)
/usr/bin/time -o "$tmp" -f "%U %S %M" "$@"
rc=$?
echo "$(tail -n 1 "$tmp") $out" >>"$log"
rm -f "$tmp"
exit $rc
