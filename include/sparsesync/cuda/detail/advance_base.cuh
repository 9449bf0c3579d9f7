// Bringing an encode's base to its target from the changes the detect pass found: the trainer's snapshot
// advance without a dense copy (or, with `old`, back from a fused advance: encode_config::advance_base). The detect pass left, per tile, the tile-relative positions of the changed
// elements in scratch; one block per tile copies those elements' target bits over the base's, through the
// segments resolved for that encode. Reads and writes only the changed elements (1% of a step's model).
#pragma once

#include <sparsesync/cuda/types.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

struct advance_params {
  const resolved_segment* segments;  // sorted by bucket_first, covering the bucket
  std::uint32_t segment_count;
  unsigned tile_log2;
  std::uint64_t num_tiles;
  const std::uint16_t* pos;
  const std::uint64_t* tile_off;
  const std::uint32_t* tile_cnt;
  const void* old;         // nullptr: write the target's bits; else the old bits of each change slot (undo a fused advance)
  std::uint64_t capacity;  // change slots: a tile reserved past it stored nothing (and advanced nothing)
};

// The segment holding bucket element e (binary search: the last with bucket_first <= e).
SPARSESYNC_DEVICE std::uint32_t segment_of(const resolved_segment* s, std::uint32_t n, std::uint64_t e) {
  std::uint32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    if (s[mid].bucket_first <= e) lo = mid;
    else hi = mid;
  }
  return lo;
}

template <class W, int Threads>
SPARSESYNC_KERNEL void __launch_bounds__(Threads) advance_base_kernel(advance_params p) {
  for (std::uint64_t tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
    const std::uint32_t cnt = p.tile_cnt[tile];
    if (cnt == 0) continue;
    const std::uint64_t off = p.tile_off[tile];
    if (off + ((cnt + 7u) & ~7u) > p.capacity) continue;  // as detect's `store`
    const std::uint64_t first = tile << p.tile_log2;
    for (std::uint32_t k = threadIdx.x; k < cnt; k += Threads) {
      const std::uint64_t e = first + p.pos[off + k];
      const resolved_segment& sg = p.segments[segment_of(p.segments, p.segment_count, e)];
      const std::uint64_t at = e - sg.bucket_first;
      // The base is the caller's own snapshot (encode reads it as const; advancing it is the point).
      W* base = const_cast<W*>(static_cast<const W*>(sg.a));
      base[at] = p.old ? static_cast<const W*>(p.old)[off + k] : static_cast<const W*>(sg.b)[at];
    }
  }
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
