#!/usr/bin/env bash
# Installs missing dependencies, builds the demo and runs it: a GPT-shaped model takes AdamW steps at an RL
# learning rate; each step's BF16 change is encoded, applied by a "rollout worker" and proven bit-identical.
# Extra arguments go to the demo (e.g. --hidden 1024 --layers 24 --steps 5 --lr 3e-6).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${SPARSESYNC_BUILD_DIR:-build/demo}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARSESYNC_ENABLE_CUDA=OFF -DSPARSESYNC_BUILD_TESTS=OFF \
  -DSPARSESYNC_BUILD_BENCH=OFF -DSPARSESYNC_BUILD_TOOLS=OFF >/dev/null
cmake --build "$build" --target sparsesync_demo -j "$(nproc)"
exec "$build/examples/demo" "$@"
