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
