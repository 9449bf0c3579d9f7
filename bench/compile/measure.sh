#!/usr/bin/env bash
# Compile-time figures (bench/results/compile-time.md): CPU time (user + sys), which depends less than wall
# time on what else the machine runs.
#   1. the minimal consumer (minimal_consumer.cpp, g++ -O2): header-only, and with the compiled part;
#   2. a build of the tests, the CLI and the rest (host parts), every compile timed by cpu_time_launcher.sh,
#      summed per target by summarize.py.
# Usage: bench/compile/measure.sh [BUILD_DIR] [extra cmake args]   (BUILD_DIR is wiped first)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-/tmp/sparsesync-compile-time}
shift || true
cxx=${CXX:-g++}

cpu() {  # cpu CMD...: prints the user + sys seconds of CMD
  local t
  t=$(mktemp)
  /usr/bin/time -o "$t" -f "%U %S" "$@" >/dev/null
  awk '{printf "%.2f", $1 + $2}' "$t"
  rm -f "$t"
}

obj=$(mktemp -d)
echo "minimal consumer, header-only:        $(cpu "$cxx" -std=c++20 -O2 -I"$root/include" -c "$here/minimal_consumer.cpp" -o "$obj/a.o") s"
echo "minimal consumer, compiled part:      $(cpu "$cxx" -std=c++20 -O2 -DSPARSESYNC_COMPILED_LIBRARY -I"$root/include" -c "$here/minimal_consumer.cpp" -o "$obj/b.o") s"
echo "the compiled part itself (once):      $(cpu "$cxx" -std=c++20 -O2 -DSPARSESYNC_COMPILED_LIBRARY -I"$root/include" -c "$root/src/compiled.cpp" -o "$obj/c.o") s"
"$cxx" "$obj/b.o" "$obj/c.o" -o "$obj/consumer" && "$obj/consumer" >/dev/null && echo "(linked and ran: ok)"
rm -rf "$obj"

rm -rf "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARSESYNC_ENABLE_CUDA=OFF \
  "-DCMAKE_CXX_COMPILER_LAUNCHER=$here/cpu_time_launcher.sh" "$@" >/dev/null
SPARSESYNC_CPU_LOG="$build/cpu-times.log" cmake --build "$build" -j "$(nproc)" >/dev/null
"$here/summarize.py" "$build/cpu-times.log" --json "$build/cpu-times.json"
