// Exclusive prefix sum of per-chunk byte counts whose number may be known only on the device (a received
// payload's chunk count): three launches of fixed grid size (upsweep, spine, downsweep), each reading the
// count from device memory, so the host never waits. Chunk counts are O(model / 64K), so this is cheap.
#pragma once

#include <sparsesync/cuda/types.cuh>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

inline constexpr int scan_threads = 256;
inline constexpr int scan_blocks = 256;  // the spine is one block of this many threads

// Values are u64; `load(i)` returns item i. The count is *d_count when d_count != nullptr, else `count`.
template <class Load>
SPARSESYNC_KERNEL void __launch_bounds__(scan_threads) scan_upsweep_kernel(Load load, const std::uint32_t* d_count, std::uint64_t count,
                                                                          std::uint64_t* partials) {
  using reduce_t = cub::BlockReduce<std::uint64_t, scan_threads>;
  __shared__ typename reduce_t::TempStorage tmp;
  const std::uint64_t n = d_count ? *d_count : count;
  const std::uint64_t per = (n + gridDim.x - 1) / gridDim.x;
  const std::uint64_t lo = per * blockIdx.x;
  const std::uint64_t hi = lo + per < n ? lo + per : n;
  std::uint64_t sum = 0;
  for (std::uint64_t i = lo + threadIdx.x; i < hi; i += scan_threads) sum += load(i);
  sum = reduce_t(tmp).Sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

template <int = 0>  // (a template only for its linkage: see SPARSESYNC_KERNEL)
SPARSESYNC_KERNEL void __launch_bounds__(scan_blocks) scan_spine_kernel(std::uint64_t* partials, int blocks, std::uint64_t* d_total) {
  using scan_t = cub::BlockScan<std::uint64_t, scan_blocks>;
  __shared__ typename scan_t::TempStorage tmp;
  std::uint64_t v = static_cast<int>(threadIdx.x) < blocks ? partials[threadIdx.x] : 0;
  std::uint64_t total = 0;
  scan_t(tmp).ExclusiveSum(v, v, total);
  if (static_cast<int>(threadIdx.x) < blocks) partials[threadIdx.x] = v;
  if (threadIdx.x == 0) *d_total = total;
}

template <class Load>
SPARSESYNC_KERNEL void __launch_bounds__(scan_threads) scan_downsweep_kernel(Load load, const std::uint32_t* d_count, std::uint64_t count,
                                                                            const std::uint64_t* partials, std::uint64_t* out) {
  using scan_t = cub::BlockScan<std::uint64_t, scan_threads>;
  __shared__ typename scan_t::TempStorage tmp;
  const std::uint64_t n = d_count ? *d_count : count;
  const std::uint64_t per = (n + gridDim.x - 1) / gridDim.x;
  const std::uint64_t lo = per * blockIdx.x;
  const std::uint64_t hi = lo + per < n ? lo + per : n;
  std::uint64_t carry = partials[blockIdx.x];
  for (std::uint64_t base = lo; base < hi; base += scan_threads) {
    const std::uint64_t i = base + threadIdx.x;
    std::uint64_t v = i < hi ? load(i) : 0;
    std::uint64_t agg = 0;
    scan_t(tmp).ExclusiveSum(v, v, agg);
    if (i < hi) out[i] = carry + v;
    carry += agg;
    __syncthreads();  // tmp is reused by the next round
  }
}

// Temporary storage: scan_blocks + 1 words (partials, then nothing else).
inline constexpr std::size_t scan_partials_words = scan_blocks;

template <class Load>
cudaError_t exclusive_scan(Load load, const std::uint32_t* d_count, std::uint64_t count, std::uint64_t* partials, std::uint64_t* out,
                           std::uint64_t* d_total, cudaStream_t stream) {
  scan_upsweep_kernel<Load><<<scan_blocks, scan_threads, 0, stream>>>(load, d_count, count, partials);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  scan_spine_kernel<><<<1, scan_blocks, 0, stream>>>(partials, scan_blocks, d_total);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  scan_downsweep_kernel<Load><<<scan_blocks, scan_threads, 0, stream>>>(load, d_count, count, partials, out);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  return cudaSuccess;
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
