#!/usr/bin/env bash
# The decoders of untrusted input, the golden files, the sync engine and the safetensors reader once more under
# AddressSanitizer and UndefinedBehaviorSanitizer (host code). Only the programs it runs are built. Run by .ci/run
# after the test command (and by scripts/test.sh with SPARSESYNC_SANITIZE=1); needs what scripts/install-deps.sh
# installs. SPARSESYNC_SANITIZE_CLI=1 adds the CLI's file commands (about 50 s more on 2 cores: their readers of
# untrusted input are also the fuzz harnesses' targets, scripts/fuzz_ci.sh). SPARSESYNC_SANITIZE_THREAD=1 adds the
# programs that run threads (the sync engine in process and over TCP, a killed worker, the transports) under
# ThreadSanitizer, in a build of their own (about 10 minutes more on 2 cores, mostly compiling; not run by .ci/run);
# SPARSESYNC_SANITIZE_ADDRESS=0 leaves out the ASan + UBSan stage. Exit status non-zero if a test failed (a data race
# fails its test: halt_on_error).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${SPARSESYNC_SANITIZE_ADDRESS:-1} == 1 ]]; then
  asan=${SPARSESYNC_BUILD_DIR:-build/test}-asan
  # -O1 (assertions stay on): the real-stream test takes minutes at -O0 under the sanitizers. -g1: line tables
  # only (reports keep file:line), a quarter less compile time than full debug information.
  cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPARSESYNC_ENABLE_CUDA=OFF -DSPARSESYNC_BUILD_BENCH=OFF \
    -DSPARSESYNC_BUILD_EXAMPLES=OFF -DSPARSESYNC_CLI_NET=OFF "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" >/dev/null
  targets=(core_tests golden_tests real_stream_tests sync_tests safetensors_tests)
  [[ ${SPARSESYNC_SANITIZE_CLI:-0} == 1 ]] && targets+=(cli_tests sparsesync_cli)
  cmake --build "$asan" -j "$(nproc)" --target "${targets[@]}"
  tests=$(printf '%s|' "${targets[@]}" | sed -e 's/|sparsesync_cli|$//' -e 's/|$//')
  ctest --test-dir "$asan" --output-on-failure --timeout 900 -j "$(nproc)" -R "^(${tests})$"
fi
if [[ ${SPARSESYNC_SANITIZE_THREAD:-0} == 1 ]]; then
  tsan=${SPARSESYNC_BUILD_DIR:-build/test}-tsan
  cmake -S . -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPARSESYNC_ENABLE_CUDA=OFF -DSPARSESYNC_BUILD_BENCH=OFF \
    -DSPARSESYNC_BUILD_EXAMPLES=OFF -DSPARSESYNC_CLI_NET=ON "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
    "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" >/dev/null
  threaded=(sync_tests sync_lag_test transport_inproc_test transport_asio_tcp_test sync_tcp_fanout_test sync_sharded_tcp_test
            sync_killed_worker_test)
  cmake --build "$tsan" -j "$(nproc)" --target "${threaded[@]}"
  TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}" ctest --test-dir "$tsan" --output-on-failure --timeout 900 -j "$(nproc)" \
    -R "^($(IFS='|'; echo "${threaded[*]}"))$"
fi
