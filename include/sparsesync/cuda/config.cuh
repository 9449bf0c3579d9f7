// Build configuration of the CUDA layer: kernel attributes, error handling, tuning policies.
//
// Layering (as in CUB): public functions in `sparsesync::cuda` (encode.cuh, apply.cuh) forward at once to
// `sparsesync::cuda::detail` dispatch code, which sizes temporary storage and launches kernels templated on a
// tuning policy. Device code reports failures as `cudaError_t` or as a status word in device memory; nothing
// in this layer throws, except the RAII plan objects of plan.cuh, which are the host convenience layer.
#pragma once

#include <sparsesync/core/config.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#if !defined(__CUDACC__)
#error "sparsesync/cuda/*.cuh must be compiled by nvcc (or another CUDA compiler)"
#endif

// Kernels get hidden visibility and live in the versioned inline namespace of SPARSESYNC_NS_BEGIN: two shared
// libraries that both include these headers (perhaps different versions, built for different GPUs) keep
// their own kernels instead of silently sharing one weak symbol.
#if defined(__GNUC__) || defined(__clang__)
#define SPARSESYNC_KERNEL_VISIBILITY __attribute__((visibility("hidden")))
#else
#define SPARSESYNC_KERNEL_VISIBILITY
#endif
#define SPARSESYNC_KERNEL __global__ SPARSESYNC_KERNEL_VISIBILITY

// Device-only helpers.
#define SPARSESYNC_DEVICE __device__ __forceinline__

// Define SPARSESYNC_CUDA_DEBUG_SYNC to synchronize after every launch, so that an asynchronous fault is
// reported by the launch that caused it (CUB's CUB_DEBUG_SYNC). Slow; for debugging only.
#if defined(SPARSESYNC_CUDA_DEBUG_SYNC)
#define SPARSESYNC_CUDA_LAUNCH_CHECK(stream)                              \
  do {                                                                    \
    if (cudaError_t e_ = cudaPeekAtLastError(); e_ != cudaSuccess) return e_; \
    if (cudaError_t e_ = cudaStreamSynchronize(stream); e_ != cudaSuccess) {  \
      std::fprintf(stderr, "sparsesync: kernel fault at %s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      return e_;                                                          \
    }                                                                     \
  } while (0)
#else
#define SPARSESYNC_CUDA_LAUNCH_CHECK(stream)                              \
  do {                                                                    \
    if (cudaError_t e_ = cudaPeekAtLastError(); e_ != cudaSuccess) return e_; \
  } while (0)
#endif

// Returns the error of a CUDA runtime call from the enclosing function (which returns cudaError_t).
#define SPARSESYNC_CUDA_TRY(call)                   \
  do {                                              \
    if (cudaError_t e_ = (call); e_ != cudaSuccess) return e_; \
  } while (0)

SPARSESYNC_NS_BEGIN
namespace cuda {

// Tuning of the change-detection kernel: a block of `detect_threads` threads reads `detect_iters` 16-byte
// vectors per thread of each copy per tile (tile = threads x iters x 16 bytes of each copy, at most 2^16
// elements so that tile-relative positions fit 16 bits). Chunk-level kernels run one thread per chunk.
template <class P>
concept tuning_policy = requires {
  { P::detect_threads } -> std::convertible_to<int>;
  { P::detect_iters } -> std::convertible_to<int>;
  { P::chunk_threads } -> std::convertible_to<int>;
  { P::hash_slots } -> std::convertible_to<int>;
} && (P::detect_threads % 32 == 0) && (P::detect_threads <= 1024) && (P::detect_iters >= 1) &&
                        (P::detect_iters <= 4) && (P::chunk_threads % 32 == 0) && (P::hash_slots >= 1);

// Hopper (sm_90, H100/H200): 256 x 4 x 16 B = 16 KiB of each copy per tile; enough loads in flight per SM at
// the 6-8 resident blocks that the register budget allows.
struct policy_sm90 {
  static constexpr int detect_threads = 256;
  static constexpr int detect_iters = 4;
  static constexpr int chunk_threads = 128;
  static constexpr int hash_slots = 32;  // checksum partial sums are spread over this many words (fewer atomics on one address)
};

using default_policy = policy_sm90;
static_assert(tuning_policy<default_policy>, "sparsesync: the default CUDA tuning policy does not satisfy tuning_policy");

}  // namespace cuda
SPARSESYNC_NS_END
