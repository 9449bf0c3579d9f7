#!/usr/bin/env bash
# Installs missing dependencies, builds everything (CUDA parts too when nvcc is present) and runs all tests.
# GPU tests skip with a message where no GPU is present. Usage: ./scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="$PATH:/usr/local/cuda/bin"
build=${SPARSESYNC_BUILD_DIR:-build/test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure --timeout 900 -j "$(nproc)" "$@"

# The decoders of untrusted input, the sync engine and the CLI once more under AddressSanitizer and
# UndefinedBehaviorSanitizer (host code; SPARSESYNC_SANITIZE=0 skips this).
if [[ "${SPARSESYNC_SANITIZE:-1}" == 1 ]]; then
  asan=${build}-asan
  cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPARSESYNC_ENABLE_CUDA=OFF -DSPARSESYNC_BUILD_BENCH=OFF \
    -DSPARSESYNC_BUILD_EXAMPLES=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
  cmake --build "$asan" -j "$(nproc)" --target core_tests real_stream_tests sync_tests safetensors_tests cli_tests sparsesync_cli
  ctest --test-dir "$asan" --output-on-failure --timeout 900 -j "$(nproc)" -R "^(core_tests|real_stream_tests|sync_tests|safetensors_tests|cli_tests)$"
fi
