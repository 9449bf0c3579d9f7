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

// Linkage of header-defined device code, as CCCL does it:
// - Every kernel is a template (on the tuning policy of the dispatch that launches it, or an unused `int = 0`
//   where there is none): its definition in each translation unit that includes these headers is then a weak
//   (COMDAT) symbol, which the linker merges. A non-template __global__ function would be a strong symbol
//   defined in every .cu file of the program ("multiple definition"). tests/cuda/link_*.cu checks it.
// - Every other function is a template, inline (SPARSESYNC_DEVICE and SPARSESYNC_HD imply it) or constexpr;
//   namespace-scope constants are `inline constexpr`; there are no __device__ or __constant__ variables.
// - Kernels get hidden visibility and live in the versioned inline namespace of SPARSESYNC_NS_BEGIN: two
//   shared libraries that both include these headers (perhaps different versions, built for different GPUs)
//   keep their own kernels instead of silently sharing one weak symbol.
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

// Tuning of the change-detection kernel (one per mode, see tuning_policy): a block of `detect_threads`
// threads reads `detect_iters` 16-byte vectors per thread of each copy per tile (tile = threads x iters x 16
// bytes of each copy, at most 2^16 elements so that tile-relative positions fit 16 bits), asking the compiler
// for `detect_min_blocks` resident blocks per SM. Optional: `detect_stages` (0 when absent), the tiles a block
// keeps in a shared-memory ring: with S >= 2 the next S - 1 tiles of both copies are copied in (cp.async) while
// the block works on the current one, instead of each tile's loads waiting before its work.
template <class D>
inline constexpr int detect_stages_v = [] {
  if constexpr (requires { D::detect_stages; }) return static_cast<int>(D::detect_stages);
  else return 0;
}();

template <class D>
concept detect_tuning = requires {
  { D::detect_threads } -> std::convertible_to<int>;
  { D::detect_iters } -> std::convertible_to<int>;
  { D::detect_min_blocks } -> std::convertible_to<int>;
} && (D::detect_threads % 32 == 0) && (D::detect_threads <= 1024) && (D::detect_iters >= 1) && (D::detect_iters <= 4) &&
                        (detect_stages_v<D> == 0 || (detect_stages_v<D> >= 2 && detect_stages_v<D> <= 4));

// A tuning policy: detect tunings for the incremental path (known base checksum: only changes are hashed) and
// for the full path (every base element hashed: more arithmetic per byte), and the block size of the
// chunk-level kernels (one thread per chunk).
template <class P>
concept tuning_policy = detect_tuning<typename P::detect_known> && detect_tuning<typename P::detect_hashed> && requires {
  { P::chunk_threads } -> std::convertible_to<int>;
} && (P::chunk_threads % 32 == 0) && (P::chunk_threads <= 1024);

template <int Threads, int Iters, int MinBlocks, int Stages = 0>
struct detect_config {
  static constexpr int detect_threads = Threads;
  static constexpr int detect_iters = Iters;
  static constexpr int detect_min_blocks = MinBlocks;
  static constexpr int detect_stages = Stages;
};

// Hopper (sm_90, H100/H200), chosen by a sweep on an H100 (bench/results/gpu-*): incremental path 128 threads
// x 4 vectors (8 KiB of each copy per tile), full path 256 x 2; 4 resident blocks per SM either way. The
// incremental path reads through a ring of 2 tiles (H200, 7e9 BF16 at 0.85%: 7.37 -> 6.86 ms against a 6.08 ms
// read of both copies; gpu_bench's detect sweep, bench/results/gpu-test-runs/s21/callA).
struct policy_sm90 {
  using detect_known = detect_config<128, 4, 4, 2>;
  using detect_hashed = detect_config<256, 2, 4>;
  static constexpr int chunk_threads = 128;
};

using default_policy = policy_sm90;
static_assert(tuning_policy<default_policy>, "sparsesync: the default CUDA tuning policy does not satisfy tuning_policy");

namespace detail {
// Checksum partial sums are spread over this many words: fewer atomics on one address.
inline constexpr int hash_slots = 32;
}  // namespace detail

}  // namespace cuda
SPARSESYNC_NS_END
