#!/usr/bin/env bash
# Session 27, call K (one H200): the GPU engine's tests with their host code under ThreadSanitizer (GCC 12
# -fsanitize=thread on the C++ and, through nvcc -Xcompiler, on the CUDA translation units' host code; built on the
# dev VM, carried with its libtsan in .carry/s27t). Reports are kept, not fatal (halt_on_error=0): the CUDA driver's
# own threads are not instrumented, so a report whose other side is a driver thread can be false. Call J's 13 reports
# were all one kind: libcuda's own memcpy into a driver buffer during kernel launches from two threads (two
# receivers' lanes, each on its own stream; CUDA documents launches from several threads as safe): here they are
# suppressed (race:libcuda.so), so that any report left is in code TSan sees.
set -u
mkdir -p $OUT /tmp/t && tar xJf .carry/s27t/bin.tar.xz -C /tmp/t
export LD_LIBRARY_PATH=/tmp/t/lib:${LD_LIBRARY_PATH:-}
printf 'race:libcuda.so\n' > /tmp/t/libcuda.supp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
for t in engine_gpu_tests engine_sharded_gpu_tests; do
  s=$(date +%s)
  TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 history_size=4 suppressions=/tmp/t/libcuda.supp" timeout 300 /tmp/t/$t --duration=true > $OUT/$t.log 2>&1
  echo "$t rc=$? $(( $(date +%s) - s ))s reports=$(grep -c 'WARNING: ThreadSanitizer' $OUT/$t.log)" >> $OUT/summary.txt
  grep -E "test cases|assertions|FATAL" $OUT/$t.log | head -4 >> $OUT/summary.txt
  grep -A14 "WARNING: ThreadSanitizer" $OUT/$t.log | grep -E "WARNING|#[0-3] " | head -40 >> $OUT/summary.txt
done
gzip -9 $OUT/*.log
cat $OUT/summary.txt
