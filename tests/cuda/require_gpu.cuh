// The GPU tests' entry check: where no CUDA device exists, say so and exit 77 (CTest: skipped), before any
// test runs. Call it from a namespace-scope initializer.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace sparsesync_test {

// Returns the number of CUDA devices (at least 1); exits 77 when there is none or no usable driver.
inline int require_gpu_or_skip() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: skipped\n");
    std::fflush(stdout);
    std::exit(77);
  }
  return n;
}

// As require_gpu_or_skip, and exits 77 with fewer than `n` devices; keeps NVLink multicast off (shared hosts:
// NCCL_NVLS_ENABLE=0, inherited by the processes a test starts). Returns the device count.
inline int require_gpus_or_skip(int n) {
  const int have = require_gpu_or_skip();
  if (have < n) {
    std::printf("%d CUDA device(s), this test needs %d: skipped\n", have, n);
    std::fflush(stdout);
    std::exit(77);
  }
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  return have;
}

}  // namespace sparsesync_test
