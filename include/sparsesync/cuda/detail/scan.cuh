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

// Two sums scanned in one set of launches (the apply's chunk data offsets and staging offsets).
struct u64_pair {
  std::uint64_t a, b;
};
SPARSESYNC_DEVICE u64_pair operator+(const u64_pair& x, const u64_pair& y) { return {x.a + y.a, x.b + y.b}; }
struct scan_plus {
  template <class V>
  SPARSESYNC_DEVICE V operator()(const V& x, const V& y) const { return x + y; }
};

// `load(i)` returns item i (std::uint64_t or u64_pair); the count is *d_count when d_count != nullptr, else
// `count`. Partials: one V per block.
template <class Load>
SPARSESYNC_KERNEL void __launch_bounds__(scan_threads) scan_upsweep_kernel(Load load, const std::uint32_t* d_count, std::uint64_t count,
                                                                          void* partials) {
  using V = decltype(load(0));
  using reduce_t = cub::BlockReduce<V, scan_threads>;
  __shared__ typename reduce_t::TempStorage tmp;
  const std::uint64_t n = d_count ? *d_count : count;
  const std::uint64_t per = (n + gridDim.x - 1) / gridDim.x;
  const std::uint64_t lo = per * blockIdx.x;
  const std::uint64_t hi = lo + per < n ? lo + per : n;
  V sum{};
  for (std::uint64_t i = lo + threadIdx.x; i < hi; i += scan_threads) sum = sum + load(i);
  sum = reduce_t(tmp).Reduce(sum, scan_plus{});
  if (threadIdx.x == 0) static_cast<V*>(partials)[blockIdx.x] = sum;
}

// `total(v)` stores the sum of all items.
template <class V, class Total>
SPARSESYNC_KERNEL void __launch_bounds__(scan_blocks) scan_spine_kernel(void* partials_v, int blocks, Total total) {
  using scan_t = cub::BlockScan<V, scan_blocks>;
  __shared__ typename scan_t::TempStorage tmp;
  V* partials = static_cast<V*>(partials_v);
  V v = static_cast<int>(threadIdx.x) < blocks ? partials[threadIdx.x] : V{};
  V all{};
  scan_t(tmp).ExclusiveScan(v, v, V{}, scan_plus{}, all);
  if (static_cast<int>(threadIdx.x) < blocks) partials[threadIdx.x] = v;
  if (threadIdx.x == 0) total(all);
}

// `out(i, v)` stores item i's exclusive prefix sum.
template <class Load, class Out>
SPARSESYNC_KERNEL void __launch_bounds__(scan_threads) scan_downsweep_kernel(Load load, const std::uint32_t* d_count, std::uint64_t count,
                                                                            const void* partials, Out out) {
  using V = decltype(load(0));
  using scan_t = cub::BlockScan<V, scan_threads>;
  __shared__ typename scan_t::TempStorage tmp;
  const std::uint64_t n = d_count ? *d_count : count;
  const std::uint64_t per = (n + gridDim.x - 1) / gridDim.x;
  const std::uint64_t lo = per * blockIdx.x;
  const std::uint64_t hi = lo + per < n ? lo + per : n;
  V carry = static_cast<const V*>(partials)[blockIdx.x];
  for (std::uint64_t base = lo; base < hi; base += scan_threads) {
    const std::uint64_t i = base + threadIdx.x;
    V v = i < hi ? load(i) : V{};
    V agg{};
    scan_t(tmp).ExclusiveScan(v, v, V{}, scan_plus{}, agg);
    if (i < hi) out(i, carry + v);
    carry = carry + agg;
    __syncthreads();  // tmp is reused by the next round
  }
}

// Temporary storage: the partials, one u64_pair per block at most.
inline constexpr std::size_t scan_partials_words = 2 * scan_blocks;

template <class Load, class Out, class Total>
cudaError_t exclusive_scan(Load load, const std::uint32_t* d_count, std::uint64_t count, std::uint64_t* partials, Out out, Total total,
                           cudaStream_t stream) {
  using V = decltype(load(0));
  static_assert(sizeof(V) <= 8 * scan_partials_words / scan_blocks, "sparsesync: the scan's partials hold at most a u64_pair per block");
  scan_upsweep_kernel<Load><<<scan_blocks, scan_threads, 0, stream>>>(load, d_count, count, partials);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  scan_spine_kernel<V, Total><<<1, scan_blocks, 0, stream>>>(partials, scan_blocks, total);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  scan_downsweep_kernel<Load, Out><<<scan_blocks, scan_threads, 0, stream>>>(load, d_count, count, partials, out);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  return cudaSuccess;
}

// One u64 sum: prefix sums into out[], the total into *d_total.
struct scan_to_array {
  std::uint64_t* out;
  SPARSESYNC_DEVICE void operator()(std::uint64_t i, std::uint64_t v) const { out[i] = v; }
};
struct scan_total_to {
  std::uint64_t* total;
  SPARSESYNC_DEVICE void operator()(std::uint64_t v) const { *total = v; }
};
template <class Load>
cudaError_t exclusive_scan(Load load, const std::uint32_t* d_count, std::uint64_t count, std::uint64_t* partials, std::uint64_t* out,
                           std::uint64_t* d_total, cudaStream_t stream) {
  return exclusive_scan(load, d_count, count, partials, scan_to_array{out}, scan_total_to{d_total}, stream);
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
