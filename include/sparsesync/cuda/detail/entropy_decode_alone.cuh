// The entropy chunks that the warp decoder (entropy_decode.cuh) does not take: class bodies of chunks longer than
// its 2^16-element bitmap, rice bodies (tag 0), and the trivial or malformed ones. A warp per chunk, with the
// one-thread decoder's tables (entropy_chunk_tables) in shared memory and its sequential parts (header, gaps,
// values, checks: entropy_codec.cuh) in lane 0; the two walks over the base, which took most of a chunk's time in
// one thread, go 32 elements a step over the whole warp:
//  1. the class histogram, in any order (entropy_warp_walk_any_order, shared-memory atomics);
//  2. the placing walk in element order, lane L holding element 32s + L: the lanes of each group (match_any) learn
//     from their leader which of them are its next changes (the group's skip count, as in the one-thread walk),
//     and a ballot orders the step's changes.
// No bitmap, so any chunk length. Rice bodies, and class bodies whose base is not one aligned array (a chunk across
// tensors), are decoded by lane 0 alone (entropy_decode_chunk); so are the class bodies of the warp decoder's
// chunks of more than 64 groups.
#pragma once

#include <sparsesync/cuda/detail/entropy_codec.cuh>
#include <sparsesync/cuda/detail/entropy_warp.cuh>
#include <sparsesync/cuda/detail/warp_decode.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

// A warp's shared memory: the tables, and lane 0's verdicts for the other lanes.
struct entropy_alone_smem {
  entropy_chunk_tables t;
  int err;
  bool fitted;
};

// Step 2 over a chunk of numel elements at `fast` (groups, skip counts and cursors in t, gaps in group order in
// gaps[]), the whole warp calling: each change's position, with its group in the bits from entropy_rank_bits
// up, into spos[0, n) in position order. Returns whether exactly n were placed (always, for validated gaps).
template <class W>
SPARSESYNC_DEVICE bool entropy_warp_place_ordered(entropy_chunk_tables& t, const std::uint32_t* gaps, const W* fast, std::uint32_t numel,
                                                  std::uint32_t n, std::uint32_t* spos) {
  const unsigned lane = lane_id(), below = lanes_below();
  std::uint32_t* const skip = t.g.size;
  std::uint32_t* const cursor = t.seen;
  constexpr unsigned outside = 0xffffu;  // lanes past the chunk: a group of their own, never a change
  std::uint32_t placed = 0;              // (uniform)
  W next = lane < numel ? fast[lane] : W{0};
  for (std::uint32_t i0 = 0; i0 < numel && placed < n; i0 += 32) {
    const std::uint32_t i = i0 + lane;
    const W v = next;
    if (i + 32 < numel) next = fast[i + 32];  // (the next step's element on its way)
    const unsigned g = i < numel ? entropy_dev_group(t.g, v) : outside;
    const unsigned same = __match_any_sync(full_warp, g);
    const unsigned leader = static_cast<unsigned>(__ffs(same)) - 1u;
    // The leader walks its group's changes that fall among the group's c elements of this step: the first after
    // skip of them, each next one after its gap.
    std::uint32_t hits = 0;
    if (lane == leader && g != outside) {
      const std::uint32_t c = static_cast<std::uint32_t>(__popc(same));
      std::uint32_t at = skip[g];
      while (at < c) {
        hits |= 1u << at;
        const std::uint32_t nx = ++cursor[g];
        at = nx < t.first[g + 1] ? at + 1 + gaps[nx] : entropy_no_change;
      }
      skip[g] = at == entropy_no_change ? at : at - c;
    }
    hits = __shfl_sync(full_warp, hits, static_cast<int>(leader));
    const bool mine = g != outside && ((hits >> __popc(same & below)) & 1u) != 0;
    const unsigned changed = __ballot_sync(full_warp, mine);
    const std::uint32_t j = placed + static_cast<std::uint32_t>(__popc(changed & below));
    if (mine && j < n) spos[j] = (g << entropy_rank_bits) | i;
    placed += static_cast<std::uint32_t>(__popc(changed));
  }
  return placed == n;
}

// Decodes a chunk as entropy_decode_chunk does (same checks, same staged output), the whole warp calling; every
// lane gets the verdict. The base: `fast` (the chunk's elements, 16-byte aligned) or, when null, the segments from
// bucket element `first`.
template <class W>
SPARSESYNC_DEVICE errc entropy_warp_decode_alone(entropy_alone_smem& s, value_mode mode, const unsigned char* data, std::uint32_t len,
                                                 std::uint32_t numel, std::uint32_t n, const W* fast, const resolved_segment* segs,
                                                 std::uint32_t segment_count, std::uint64_t first, const unsigned char* lo,
                                                 const unsigned char* hi, std::uint32_t* spos, std::uint32_t* sval) {
  constexpr unsigned K = entropy_params::class_count<W>;
  const unsigned lane = lane_id();
  entropy_chunk_tables& t = s.t;
  // Lane 0 alone where there is no class body to share out, or no aligned array to read in element order.
  const bool shared = n > 0 && len > 0 && data[0] == entropy_params::tag_classes && fast != nullptr;
  if (!shared) {
    if (lane == 0)
      s.err = static_cast<int>(entropy_decode_chunk<W>(mode, data, len, numel, n, base_walker<W>(segs, segment_count, first), lo, hi, spos, sval, t));
    __syncwarp();
    return static_cast<errc>(s.err);
  }
  // 1. Class histogram, then the groups (lane 0).
  for (unsigned x = lane; x < K; x += 32) t.g.size[x] = 0;
  __syncwarp();
  constexpr unsigned V = 16 / sizeof(W);
  entropy_warp_walk_any_order<W, 4>(
      fast, segs, segment_count, first, numel,
      [&](std::uint32_t, const W (&e)[V]) {
#pragma unroll
        for (unsigned k = 0; k < V; ++k) atomicAdd(&t.g.size[entropy_params::class_of<W>(e[k])], 1u);
      },
      [&](std::uint32_t, W v) { atomicAdd(&t.g.size[entropy_params::class_of<W>(v)], 1u); });
  __syncwarp();
  // 2. Header and gaps (lane 0), each group's walk state.
  bit_reader r(data + 1, data + len, lo, hi);
  if (lane == 0) {
    t.g.count = entropy_groups_from_counts<W>(t.g.size, t.g.of_class, nullptr, numel);
    bool fitted = true;
    s.err = static_cast<int>(entropy_chunk_header_gaps<W>(mode, r, len, n, t, sval, fitted));
    s.fitted = fitted;
    if (s.err == 0) entropy_place_start(t, sval, 0, 1);
  }
  __syncwarp();
  if (s.err != 0) return static_cast<errc>(s.err);
  // 3. Positions.
  const bool all = entropy_warp_place_ordered<W>(t, sval, fast, numel, n, spos);
  __syncwarp();
  // 4. Values and the checks that need them (lane 0).
  if (lane == 0)
    s.err = static_cast<int>(all ? entropy_chunk_values<W>(mode, r, len, numel, n, t, s.fitted, spos, sval) : errc::malformed);
  __syncwarp();
  return static_cast<errc>(s.err);
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
