// The entropy decoder's class bodies in three steps (a chunk that entropy_split_fits), so that no warp waits
// while one of its lanes reads a bitstream:
//  1. the warp decoder (entropy_decode.cuh) counts the chunk's classes and stores its plan: groups and each
//     lane's first rank in each group (entropy_split_layout, in the chunk's staged positions);
//  2. a thread per chunk reads the header and the gaps (entropy_split_parse: a warp reads 32 chunks' at once),
//     each change's rank in its group into the staged values, the header into the plan;
//  3. a warp per chunk places the changes (entropy_split_place): the ranks into a bitmap, the gap parameters'
//     check, then one walk of the base as the warp decoder's last.
// The values and their checks then follow as for the warp decoder's chunks (entropy_warp_values,
// entropy_warp_check_values). Session 14's phase clocks (bench/results/gpu-h100-entropy.md) put lane 0's header
// and gap reading at 28% of the warp decoder's cycles.
#pragma once

#include <sparsesync/cuda/detail/entropy_decode.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

// Each change's rank in its group, as the header and gap reader gives them (a wholly changed group: 0, 1, ...).
struct entropy_rank_sink {
  std::uint32_t* rank;
  SPARSESYNC_DEVICE void whole(unsigned, std::uint32_t i0, std::uint32_t size) {
    for (std::uint32_t r = 0; r < size; ++r) rank[i0 + r] = r;
  }
  SPARSESYNC_DEVICE void begin() {}
  SPARSESYNC_DEVICE void put(std::uint32_t i, unsigned, std::uint32_t r, std::uint32_t) { rank[i] = r; }
  SPARSESYNC_DEVICE void end() {}
};

// Step 2's tables for a block of Threads threads, in shared memory (each thread's column, entropy_column): each
// group's first change and its parameters (24 KB for 128 threads; at the parse kernel's 72 registers, 7 blocks
// an SM fit either way). As a thread's own arrays they took 336 bytes of stack, which the driver reserves for
// every thread the GPU can hold; read and written in the plan (global memory) they put a round trip to L2 into
// each group's step of the thread's chain (session 18, call E: 1.47 -> 1.71 ms).
template <unsigned Threads>
struct entropy_parse_smem {
  std::uint32_t first[entropy_split_groups + 1][Threads];
  std::uint8_t k[entropy_split_groups][2 * Threads];  // k_gap, k_val
};

// Step 2, one thread (column t of the block's tables s): the header and the gaps of a counted chunk (state
// entropy_split_counted), with the warp decoder's checks; the ranks into rank[0, n), first[] and the parameters
// into the plan; state gets the values' first bit. Returns the first error.
template <class W, unsigned Threads>
SPARSESYNC_DEVICE errc entropy_split_parse(entropy_parse_smem<Threads>& s, unsigned t, value_mode mode, const unsigned char* data,
                                           std::uint32_t len, std::uint32_t n, const unsigned char* lo, const unsigned char* hi,
                                           std::uint32_t* plan, std::uint32_t* rank, std::uint32_t& state) {
  const unsigned G = plan[0];
  if (G == 0 || G > entropy_split_groups) return errc::malformed;  // (never: the warp decoder wrote it)
  const entropy_split_layout L(G);
  // The sizes stay in the plan: their line (or two) on its way to L1 first, so that the header's reads of them,
  // one per group, are not each a round trip.
  for (unsigned g = 0; g < G; g += 32) asm volatile("prefetch.global.L1 [%0];" ::"l"(plan + L.size + g));
  const entropy_column<std::uint32_t, Threads> first{&s.first[0][t]};
  const entropy_column<std::uint8_t, 2 * Threads> k_gap{&s.k[0][2 * t]}, k_val{&s.k[0][2 * t + 1]};
  bit_reader r(data + 1, data + len, lo, hi);
  entropy_rank_sink sink{rank};
  if (const errc e = entropy_read_header_gaps<W>(G, plan + L.size, first, k_gap, k_val, mode, r, len, n, sink); e != errc::ok) return e;
  const std::uint64_t values_bit = r.position_bits();
  if (values_bit > entropy_values_bit_mask) return errc::malformed;  // (never: a chunk's gaps take far fewer bits)
  for (unsigned g = 0; g <= G; ++g) plan[L.first + g] = first[g];
  for (unsigned g = 0; g < G; g += 2) {
    const std::uint32_t lo16 = k_gap[g] | (std::uint32_t{k_val[g]} << 8);
    const std::uint32_t hi16 = g + 1 < G ? k_gap[g + 1] | (std::uint32_t{k_val[g + 1]} << 8) : 0u;
    plan[L.k + g / 2] = lo16 | (hi16 << 16);
  }
  state = entropy_split_parsed | static_cast<std::uint32_t>(values_bit);
  return errc::ok;
}

// Step 3's walk reads the base this many 16-byte vectors ahead per lane. At 19 warps an SM as at 12 (the warp
// decoder's entropy_decode_depth) 2 is best (session 17, call C, H100, verified apply at 7e9: 1 ahead 32.08 / 32.25
// ms, 2 ahead 30.96 / 31.04, 3 ahead 31.06 / 30.85).
inline constexpr unsigned entropy_place_depth = 2;
// Its loads are staged in a shared-memory ring (entropy_lane_walk_staged), 2 vectors a lane a round, 2 rounds: the
// kernel goes from 19 to 16 warps an SM (13 KB, 128 registers) and runs faster (session 20, calls B-C, H200, verified
// apply at 7e9: placing kernel 10.87 -> 9.52 ms; 3 rounds or 4 vectors a round: slower than 2 and 2).
inline constexpr unsigned entropy_place_ring_p = 2, entropy_place_ring_s = 2;

// Step 3's tables, a warp's: 13 KB with the ring (10.9 before it), where the warp decoder needs 17.3 (its class
// counters).
struct entropy_place_smem {
  static constexpr unsigned G = entropy_split_groups;
  uint4 ring[entropy_walk_ring<entropy_place_ring_p, entropy_place_ring_s>::vectors];  // the walk's loads in flight
  std::uint32_t start[(G + 1) / 2 * 32];              // lane counters of ranks (entropy_ctr), from the plan
  std::uint32_t bits[entropy_warp_max_numel / 32];  // the changed ranks, gbase[g] + rank
  std::uint32_t size[G], gbase[G + 1], first[G + 1];
  std::uint8_t of_class[256], k_gap[G], k_val[G];
};

// Step 3, the whole warp calling, for a parsed chunk (state entropy_split_parsed): the changes' positions into
// plan[0, n) (the staged positions: the plan is read first) as entropy_warp_decode_classes leaves them, and the
// state for entropy_warp_values. The base as there.
template <class W>
SPARSESYNC_DEVICE errc entropy_split_place(entropy_place_smem& s, std::uint32_t numel, std::uint32_t n, const W* fast, const resolved_segment* segs,
                                           std::uint32_t segment_count, std::uint64_t first, std::uint32_t* plan, const std::uint32_t* rank,
                                           std::uint32_t* state) {
  constexpr unsigned K = entropy_params::class_count<W>;
  const unsigned lane = lane_id();
  const unsigned G = plan[0];
  const std::uint32_t parsed = *state;
  if (G == 0 || G > entropy_place_smem::G) return errc::malformed;  // (never: the warp decoder wrote it)
  const entropy_split_layout L(G);
  std::uint32_t a = 0, b = 0;
  entropy_lane_range<W>(numel, lane, a, b);
  for (unsigned g = lane; g < G; g += 32) {
    s.size[g] = plan[L.size + g];
    const std::uint32_t k = plan[L.k + g / 2] >> (16 * (g & 1));
    s.k_gap[g] = static_cast<std::uint8_t>(k & 0xffu);
    s.k_val[g] = static_cast<std::uint8_t>((k >> 8) & 0xffu);
  }
  for (unsigned g = lane; g <= G; g += 32) s.first[g] = plan[L.first + g];
  for (unsigned w = lane; w < (G + 1) / 2 * 32; w += 32) s.start[w] = plan[L.start + w];
  // Each class's group: lane g fills its group's classes, [from[g], from[g + 1]) (the last group's run to the last
  // class; classes below group 0's first are absent from the base and never looked up).
  const auto from_of = [&](unsigned g) { return (plan[L.from + g / 2] >> (16 * (g & 1))) & 0xffffu; };
  for (unsigned g = lane; g < G; g += 32) {
    const unsigned x1 = g + 1 < G ? from_of(g + 1) : K;
    for (unsigned x = from_of(g); x < x1; ++x) s.of_class[x] = static_cast<std::uint8_t>(g);
  }
  __syncwarp();  // (lane 0 sums the sizes the lanes stored)
  if (lane == 0) {
    s.gbase[0] = 0;
    for (unsigned g = 0; g < G; ++g) s.gbase[g + 1] = s.gbase[g] + s.size[g];
  }
  for (std::uint32_t w = lane; w < (numel + 31) / 32; w += 32) s.bits[w] = 0;
  __syncwarp();
  // The ranks, 32 at a time in group order: each into the bitmap, and its gap (from the rank before in its group)
  // to the parameter check.
  unsigned gb = 0;           // (uniform) the group of change j0
  std::uint32_t before = 0;  // (uniform) the rank of change j0 - 1
  const bool fitted = entropy_warp_gaps_fitted(G, n, s.size, s.first, s.k_gap, [&](std::uint32_t j0) {
    const std::uint32_t j = j0 + lane;
    std::uint32_t gap = 0;
    unsigned g = gb;
    std::uint32_t r = 0;
    if (j < n) {
      while (j >= s.first[g + 1]) ++g;
      r = rank[j];
      const std::uint32_t bit = s.gbase[g] + r;
      atomicOr(&s.bits[bit >> 5], 1u << (bit & 31));
    }
    const std::uint32_t up = __shfl_up_sync(full_warp, r, 1);
    const std::uint32_t prev = lane == 0 ? before : up;
    if (j < n) gap = j == s.first[g] ? r : r - prev - 1;
    before = __shfl_sync(full_warp, r, 31);
    gb = __shfl_sync(full_warp, g, 31);
    return gap;
  });
  __syncwarp();
  // A lane's elements of group g: the next lane's first rank less its own (16-bit counters: modulo 2^16).
  auto lane_count = [&](unsigned g) {
    const std::uint32_t mine = entropy_ctr_get(s.start, g, lane);
    const std::uint32_t next = __shfl_down_sync(full_warp, mine, 1);
    return ((lane == 31 ? s.gbase[g + 1] : next) - mine) & 0xffffu;
  };
  if (const errc e = entropy_warp_place<W, entropy_place_depth, decltype(lane_count)&, entropy_place_ring_p, entropy_place_ring_s>(
          G, n, s.bits, s.start, s.of_class, s.k_val, lane_count, fast, segs, segment_count, first, a, b, plan, s.ring, numel);
      e != errc::ok)
    return e;
  __syncwarp();
  if (lane == 0) *state = entropy_values_pending | (fitted ? entropy_values_fitted : 0u) | (parsed & entropy_values_bit_mask);
  return errc::ok;
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
