#!/usr/bin/env bash
# Each libFuzzer harness (tests/fuzz: decoders, patch reader, safetensors reader, session protocol, handshake)
# for a bounded run (6 s each) over its committed corpus, built with clang (ASan + UBSan). Run by .ci/run after the
# test command, which replays the same corpora and regression inputs without coverage guidance
# (fuzz_replay_* tests); scripts/fuzz.sh runs the harnesses for longer. SPARSESYNC_FUZZ=0 skips this. Needs what
# scripts/install-deps.sh installs (clang with its libFuzzer runtime). Exit status non-zero if a run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ "${SPARSESYNC_FUZZ:-1}" == 1 ]] || exit 0
fuzz=${SPARSESYNC_BUILD_DIR:-build/test}-fuzz
CC=clang CXX=clang++ cmake -S . -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARSESYNC_ENABLE_CUDA=OFF \
  -DSPARSESYNC_BUILD_BENCH=OFF -DSPARSESYNC_BUILD_EXAMPLES=OFF -DSPARSESYNC_BUILD_FUZZ=ON >/dev/null
# (grep reads all of ninja's output: with pipefail, grep -q's early exit would fail the pipeline by SIGPIPE.)
if ! ninja -C "$fuzz" -t targets all | grep '^fuzz_chunk_decode:' >/dev/null; then
  echo "fuzz_ci.sh: skipped: clang's libFuzzer runtime is missing (cmake -S . -B $fuzz -DSPARSESYNC_BUILD_FUZZ=ON says why)"
  exit 0
fi
cmake --build "$fuzz" -j "$(nproc)" --target fuzz_chunk_decode fuzz_patch fuzz_protocol fuzz_safetensors fuzz_handshake
ctest --test-dir "$fuzz" --output-on-failure -j "$(nproc)" -L fuzz
