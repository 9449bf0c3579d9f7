// The entropy decoder's class bodies (tag 1) a warp per chunk, with the host decoder's checks (codec/entropy.hpp
// decode_classes, the specification). The rice bodies (tag 0), chunks longer than entropy_warp_max_numel and
// chunks with too many groups go to entropy_decode_alone.cuh (apply_entropy_alone_kernel; the last are decoded in
// this kernel by lane 0, entropy_lane0_decode, in its warp's shared memory).
//
// The bitstream stays sequential (lane 0 reads the header and the gaps; the values are read afterwards by a
// thread per chunk, entropy_warp_values), but everything that touched the base per element is spread over the
// warp, as in the encoder's size pass (entropy_plan.cuh):
//  1. each lane counts the classes of its 1/32 of the chunk (16-bit lane-private counters) -> the groups;
//  2. per lane and group its element count, and after a scan over lanes its first bit (group g's rank r is
//     bit gbase[g] + r of a bitmap of the chunk's elements by group);
//  3. lane 0 decodes the header and the gaps, marking each change's rank in the bitmap; a popcount of each
//     lane's bit ranges tells where its changes go in position order;
//  4. each lane walks its range again, counting its groups' elements up the bitmap: a set bit is a change.
// The walks' counters are shared-memory atomics (no chain from element to element), and the tables of steps
// 2-4 reuse the class counters' memory, which keeps many chunks in flight per SM to hide lane 0's latency.
// The gap parameter check prices all k at once with lane k holding k's cost. The values are read afterwards by a
// thread per chunk (entropy_warp_values, entropy_codec.cuh's entropy_read_values: a warp reads 32 chunks' values
// at once), then their parameter check and rice's size for the same changes by a warp per chunk again
// (entropy_warp_check_values, lane k pricing k). Session 14, H100, 7e9 BF16 at 0.72%: lane 0 reading the values
// here took a quarter of this kernel's 49 ms; split so, 33.7 + 1.6 + 2.2 ms (bench/results/gpu-h100-entropy.md).
// Likewise the header and the gaps of a chunk whose plan fits its staged positions (entropy_split_fits): after
// step 2 the warp hands it on to a thread per chunk and a smaller placing kernel (entropy_decode_split.cuh;
// session 17, call B: verified apply 34.8 -> 31.0 ms); lane 0 reads them here only for the other chunks.
#pragma once

#include <sparsesync/codec/entropy_params.hpp>
#include <sparsesync/codec/rice_params.hpp>
#include <sparsesync/cuda/detail/entropy_codec.cuh>
#include <sparsesync/cuda/detail/entropy_decode_alone.cuh>
#include <sparsesync/cuda/detail/entropy_warp.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

// The bitmap holds one bit per element and the lane counters 16 bits (a rank below 2^16).
inline constexpr std::uint32_t entropy_warp_max_numel = 1u << 16;

// Whether apply_entropy_warp_kernel decodes this chunk (n changes, len data bytes starting with `tag`).
SPARSESYNC_HD constexpr bool entropy_warp_decodes(std::uint32_t n, std::uint32_t len, unsigned tag, std::uint32_t numel) {
  return n > 0 && len > 0 && tag == entropy_params::tag_classes && numel <= entropy_warp_max_numel;
}

// One region holds, in turn: the lane-private class counters (walk 1); then per lane and group its element count
// (entropy_decode_tables::cnt), its first bit (start, the counters of walk 2), the bitmap of changed ranks (bits)
// and, where room is left, a copy of the chunk's data for lane 0 to read. So that this fits in the class
// counters' 16 KB (and 12 warps fit an SM, not 7), a chunk with more than G groups is decoded by lane 0 alone
// (entropy_decode_chunk): weights in BF16, FP16 or FP32 have a few dozen exponents with 2^-12 of a chunk's
// elements or more, random bit patterns up to 256.
struct entropy_decode_smem {
  static constexpr unsigned K = 256;  // the most classes of any width
  static constexpr unsigned G = 64;   // the most groups
  static constexpr unsigned words = K * 16;
  union {
    alignas(16) std::uint32_t ctr[words];  // lane-private 16-bit counters, two a word, lane L's in bank L (entropy_ctr)
    entropy_alone_smem alone;              // or those of a chunk of too many groups (entropy_warp_decode_alone)
  };
  std::uint32_t size[G];       // group sizes (the class totals go straight to entropy_group_builder)
  std::uint32_t gbase[G + 1];  // first bit of each group
  std::uint32_t first[G + 1];  // each group's first change in group order
  std::uint16_t from[G];       // each group's first class
  std::uint8_t of_class[K], k_gap[G], k_val[G];
  unsigned count;              // groups
  int err;
};
// Where the tables of a chunk of `groups` groups and numel elements lie in the region (words): a table of 16-bit
// lane counters for g groups takes (g + 1) / 2 * 32 words (entropy_ctr); the data copy starts 16-byte aligned.
struct entropy_decode_tables {
  std::uint32_t cnt = 0, start = 0, bits = 0, data = 0;
  SPARSESYNC_DEVICE entropy_decode_tables(unsigned groups, std::uint32_t numel) {
    const std::uint32_t table = (groups + 1) / 2 * 32;
    start = table;
    bits = 2 * table;
    data = bits + ((numel + 31) / 32 + 3) / 4 * 4;
  }
};
static_assert(2 * ((entropy_decode_smem::G + 1) / 2 * 32) + entropy_warp_max_numel / 32 <= entropy_decode_smem::words,
              "sparsesync: the rank bitmap shares the class counters' region");
static_assert(sizeof(entropy_alone_smem) <= sizeof(std::uint32_t) * entropy_decode_smem::words,
              "sparsesync: a chunk of too many groups keeps its tables in the class counters' region");

// A chunk of too many groups for the warp decoder's region, decoded by lane 0 alone (entropy_decode_chunk) with
// its tables in that region, the whole warp calling; returns the verdict to every lane. Lane 0 alone, not
// entropy_warp_decode_alone's walks: a second inlined copy of the one-thread decoder's pieces gave this kernel a
// 696-byte stack frame at its 168 registers (ptxas -v), and such chunks (random bit patterns) are rare.
template <class W>
SPARSESYNC_DEVICE errc entropy_lane0_decode(entropy_decode_smem& s, value_mode mode, const unsigned char* data, std::uint32_t len,
                                            std::uint32_t numel, std::uint32_t n, const resolved_segment* segs,
                                            std::uint32_t segment_count, std::uint64_t first, const unsigned char* lo,
                                            const unsigned char* hi, std::uint32_t* spos, std::uint32_t* sval) {
  if (lane_id() == 0)
    s.err = static_cast<int>(
        entropy_decode_chunk<W>(mode, data, len, numel, n, base_walker<W>(segs, segment_count, first), lo, hi, spos, sval, s.alone.t));
  __syncwarp();
  return static_cast<errc>(s.err);
}

// The chunk's data bytes [data, data + len) copied, the whole warp calling, into `room` bytes of shared memory at
// buf (16-byte aligned) as the 16-byte blocks that hold them, so that lane 0 reads its bitstream there, with
// word_bit_reader (bit_io.cuh), rather than wait on a global load for each 16-byte block (session 15, H100, 7e9:
// the copy alone saved 0.5 ms, call B; the word reader on it 2.9 ms more, call H: lane 0 is bound by its own
// instruction chain, which bit_reader's byte-by-byte refill lengthened). Blocks are loaded
// whole only inside [align_down16(lo), hi), as bit_reader does. Returns the copy's first block (what buf + 0
// stands for), or null when it does not fit (lane 0 then reads global memory).
SPARSESYNC_DEVICE const unsigned char* entropy_stage_data(const unsigned char* data, std::uint32_t len, const unsigned char* lo,
                                                          const unsigned char* hi, unsigned char* buf, std::uint32_t room) {
  const auto align = [](const unsigned char* q) { return reinterpret_cast<std::uintptr_t>(q) & ~std::uintptr_t{15}; };
  const std::uintptr_t first = align(data), lo16 = align(lo), end = reinterpret_cast<std::uintptr_t>(data + len);
  const std::uint32_t blocks = static_cast<std::uint32_t>((end - first + 15) / 16);
  if (std::uint64_t{blocks} * 16 > room) return nullptr;
  const auto hi_at = reinterpret_cast<std::uintptr_t>(hi);
  for (std::uint32_t b = lane_id(); b < blocks; b += 32) {
    const std::uintptr_t at = first + 16u * b;
    if (at >= lo16 && at + 16 <= hi_at) {
      *reinterpret_cast<uint4*>(buf + 16u * b) = *reinterpret_cast<const uint4*>(at);
    } else {
      for (unsigned i = 0; i < 16; ++i)  // (the bytes of the range in a block that straddles an end)
        if (at + i >= reinterpret_cast<std::uintptr_t>(data) && at + i < end) buf[16u * b + i] = *reinterpret_cast<const unsigned char*>(at + i);
    }
  }
  __syncwarp();
  return reinterpret_cast<const unsigned char*>(first);
}

// The base is read D vectors of 16 bytes ahead per lane: each step's elements are independent of each other.
// Each step unrolls the per-element code for all of them, and less of it runs faster (session 13, H100, verified
// apply at 7e9: 8 ahead 64.7 ms, 4 ahead 56.5 (call J), 2 ahead 53.9 (call K); session 14, call C: 4 ahead 53.9,
// 2 ahead 51.4; call G, on the final decoder: 1 ahead 44.2, 2 ahead 42.6; session 15, call G: 3 ahead 41.8 against 41.1):
// the per-element code's latency, with 11-12 warps an SM, not the loads in flight, bounds them.
inline constexpr unsigned entropy_decode_depth = 2;
// The first walk, a count and nothing else per element, reads further ahead (session 15, call D, verified apply at
// 7e9 on an H100: 2 ahead 42.08 / 42.07 ms, 4 ahead 41.84 / 41.84, 8 ahead 42.54 / 42.57).
inline constexpr unsigned entropy_count_depth = 4;

// Set bits among bits[lo, hi).
SPARSESYNC_DEVICE std::uint32_t entropy_popcount_range(const std::uint32_t* bits, std::uint32_t lo, std::uint32_t hi) {
  if (lo >= hi) return 0;
  const std::uint32_t a = lo >> 5, b = (hi - 1) >> 5;
  const std::uint32_t lo_mask = ~0u << (lo & 31), hi_mask = ~0u >> (31 - ((hi - 1) & 31));
  if (a == b) return static_cast<std::uint32_t>(__popc(bits[a] & lo_mask & hi_mask));
  std::uint32_t c = static_cast<std::uint32_t>(__popc(bits[a] & lo_mask)) + static_cast<std::uint32_t>(__popc(bits[b] & hi_mask));
  for (std::uint32_t w = a + 1; w < b; ++w) c += static_cast<std::uint32_t>(__popc(bits[w]));
  return c;
}

// Sets bits[lo, hi) (lane 0 only).
SPARSESYNC_DEVICE void entropy_set_range(std::uint32_t* bits, std::uint32_t lo, std::uint32_t hi) {
  for (std::uint32_t i = lo; i < hi;) {
    if ((i & 31) == 0 && hi - i >= 32) {
      bits[i >> 5] = ~0u;
      i += 32;
    } else {
      bits[i >> 5] |= 1u << (i & 31);
      ++i;
    }
  }
}

// What the warp decoder leaves for entropy_warp_values (a thread per chunk) in the chunk's state word: the
// values' first bit (counted from the byte after the tag), whether the gap parameters were the fitted ones, and
// that the values are pending at all (else the chunk is finished: decoded whole, or failed); once they are read,
// entropy_values_read tells entropy_warp_check_values (a warp per chunk again) to finish the chunk.
inline constexpr std::uint32_t entropy_values_pending = 1u << 31, entropy_values_fitted = 1u << 30, entropy_values_read = 1u << 29;
// Before that, a chunk the split decoder takes (entropy_split_fits): counted (its plan stored, the parse kernel's
// turn), then parsed (its ranks stored, the placing kernel's turn; with the values' first bit).
inline constexpr std::uint32_t entropy_split_counted = 1u << 28, entropy_split_parsed = 1u << 27;
inline constexpr std::uint32_t entropy_values_bit_mask = (1u << 24) - 1;  // (a chunk's gaps take far fewer bits)
// A staged change of a chunk that the warp decoder placed: position (below 2^16), its group's value parameter
// in bits 16-20, its group from entropy_rank_bits up.
inline constexpr unsigned entropy_staged_k_shift = 16;
static_assert(entropy_warp_max_numel <= (1u << entropy_staged_k_shift), "sparsesync: the staged value parameter sits above the position");

// The split decoder (entropy_decode_split.cuh): the warp decoder counts a chunk's classes and hands the rest on
// through the chunk's staged positions, free until its changes are placed: the plan below, whose header, gaps and
// ranks a thread per chunk then reads (so that 31 lanes of a warp do not wait while one reads a bitstream), and a
// smaller warp kernel places the changes. Words of the plan of a chunk of G groups: G; the group sizes; each
// group's first class (16-bit halves); then, from the parse, first[0, G] and each group's k_gap | k_val << 8
// (halves); the 16-bit lane counters of each lane's first rank in each group (entropy_ctr's layout).
inline constexpr unsigned entropy_split_groups = 32;
struct entropy_split_layout {
  std::uint32_t size = 1, from = 0, first = 0, k = 0, start = 0, words = 0;
  SPARSESYNC_HD constexpr explicit entropy_split_layout(unsigned G) {
    from = size + G;
    first = from + (G + 1) / 2;
    k = first + G + 1;
    start = k + (G + 1) / 2;
    words = start + (G + 1) / 2 * 32;
  }
};
// Entry g of one thread's column in a shared-memory table of Stride columns (a thread's own tables without a
// stack: the driver reserves a kernel's stack for every thread the GPU can hold; columns keep a warp's threads in
// distinct banks).
template <class T, unsigned Stride>
struct entropy_column {
  T* p;
  SPARSESYNC_DEVICE T& operator[](unsigned g) const { return p[g * Stride]; }
};
// Whether a chunk of G groups and n changes goes the split way: its plan must fit its n staged positions.
SPARSESYNC_HD constexpr bool entropy_split_fits(unsigned G, std::uint32_t n) {
  return G <= entropy_split_groups && entropy_split_layout(G).words <= n;
}

// Where lane 0 of the warp decoder puts a chunk's changes as it reads them: a bit per change at its rank in the
// bitmap of the chunk's elements by group (gbase[g] + rank), the gaps kept for the parameter check. The bitmap word
// being filled stays in a register until the ranks leave it: close ranks share words, and a read-modify-write of
// shared memory per rank would wait on the one before.
struct entropy_bitmap_sink {
  std::uint32_t* bits;
  const std::uint32_t* gbase;
  std::uint32_t* gap_out;
  std::uint32_t word = ~0u, word_bits = 0;
  SPARSESYNC_DEVICE void whole(unsigned g, std::uint32_t, std::uint32_t size) { entropy_set_range(bits, gbase[g], gbase[g] + size); }
  SPARSESYNC_DEVICE void begin() { word = ~0u; }
  SPARSESYNC_DEVICE void put(std::uint32_t i, unsigned g, std::uint32_t rank, std::uint32_t gap) {
    gap_out[i] = gap;
    const std::uint32_t b = gbase[g] + rank;
    if (b >> 5 != word) {
      if (word != ~0u) bits[word] |= word_bits;
      word = b >> 5;
      word_bits = 0;
    }
    word_bits |= 1u << (b & 31);
  }
  SPARSESYNC_DEVICE void end() {
    if (word != ~0u) bits[word] |= word_bits;
  }
};

// The header and the gaps of a class body of `count` groups (sizes size[g]), read as entropy_decode_chunk does
// with its checks: first[0, count] and the parameters k_gap, k_val of each group, each change's rank in its group
// to the sink (whole(g, first change, size) for a wholly changed group, else put(change, g, rank, gap) in group
// order). Returns the first error. The tables: arrays, or a thread's column of a shared-memory table
// (entropy_column).
template <class W, class Reader, class Sink, class FirstTable, class KTable>
SPARSESYNC_DEVICE errc entropy_read_header_gaps(unsigned count, const std::uint32_t* size, FirstTable first, KTable k_gap, KTable k_val,
                                                value_mode mode, Reader& r, std::uint32_t len, std::uint32_t n, Sink& sink) {
  constexpr unsigned wbits = 8 * sizeof(W);
  // Header: per group its change count, gap and value parameters.
  const bool ulp = mode == value_mode::ulp;
  // (The tables may be global memory that the sink's stores could alias: each value is read once into a local.)
  std::uint32_t remaining = n, at = 0;
  std::uint64_t least = 0;
  first[0] = 0;
  for (unsigned g = 0; g < count; ++g) {
    const std::uint32_t sz = size[g];
    std::uint32_t c = remaining;
    if (g + 1 < count) {
      c = r.get(entropy_params::count_bits(sz, remaining));
      if (c > (sz < remaining ? sz : remaining)) return errc::malformed;
    } else if (c > sz) {
      return errc::malformed;
    }
    at += c;
    first[g + 1] = at;
    remaining -= c;
    if (c < sz) least += c;
    unsigned kg = 0, kv = 0;
    if (c > 0 && c < sz) {
      kg = r.get(entropy_params::gap_k_bits(sz));
      if (kg > entropy_params::max_gap_k_of(sz)) return errc::malformed;
    }
    if (c > 0 && ulp) kv = r.get_unary(wbits - 1);
    k_gap[g] = static_cast<std::uint8_t>(kg);
    k_val[g] = static_cast<std::uint8_t>(kv);
  }
  if (r.failed()) return errc::truncated;
  if (least > 8 * std::uint64_t{len}) return errc::truncated;
  // Gaps, group by group.
  for (unsigned g = 0; g < count; ++g) {
    const std::uint32_t sz = size[g], i0 = first[g], i1 = first[g + 1];
    if (i1 - i0 == sz) {
      sink.whole(g, i0, sz);
      continue;
    }
    const unsigned raw = entropy_params::gap_raw_bits(sz), k = k_gap[g];
    sink.begin();
    std::uint64_t next = 0;
    for (std::uint32_t i = i0; i < i1; ++i) {
      std::uint64_t gap = 0;
      if (const errc e = entropy_rice_get(r, k, raw, gap); e != errc::ok) return e;
      next += gap;
      if (next >= sz) return errc::index_out_of_range;
      sink.put(i, g, static_cast<std::uint32_t>(next), static_cast<std::uint32_t>(gap));
      ++next;
    }
    sink.end();
  }
  return errc::ok;
}

// The gap parameters' check, the whole warp calling: lane k prices k over each group's gaps, 32 at a time
// (gap_block(j0) gives lane L the gap of change j0 + L, any value past n; one load for the warp, then broadcast);
// whether every group's k_gap is the fitted one. Wholly changed groups have no gaps and are skipped.
template <class GapBlock>
SPARSESYNC_DEVICE bool entropy_warp_gaps_fitted(unsigned G, std::uint32_t n, const std::uint32_t* size, const std::uint32_t* first,
                                                const std::uint8_t* k_gap, GapBlock&& gap_block) {
  const unsigned lane = lane_id();
  bool fitted = true;
  unsigned g = 0;
  std::uint32_t cost = 0;
  auto close = [&] {  // (uniform)
    const std::uint32_t c = first[g + 1] - first[g];
    if (c > 0 && c < size[g] && entropy_warp_argmin(cost, entropy_params::max_gap_k_of(size[g])) != k_gap[g]) fitted = false;
    ++g;
    cost = 0;
  };
  unsigned raw = entropy_params::gap_raw_bits(size[0]);
  for (std::uint32_t j0 = 0; j0 < n; j0 += 32) {
    const std::uint32_t v = gap_block(j0);
    const unsigned m = n - j0 < 32 ? n - j0 : 32u;
    if (m == 32 && j0 + 32 <= first[g + 1]) {  // (uniform) all 32 in group g: no group test, the shuffles unrolled
      std::uint32_t c32 = 0;
#pragma unroll
      for (unsigned t = 0; t < 32; ++t) c32 += rice_params::code_bits<std::uint32_t>(__shfl_sync(full_warp, v, static_cast<int>(t)), lane, raw);
      cost += c32;
      continue;
    }
    for (unsigned t = 0; t < m; ++t) {
      if (j0 + t >= first[g + 1]) {
        while (j0 + t >= first[g + 1]) close();
        raw = entropy_params::gap_raw_bits(size[g]);
      }
      cost += rice_params::code_bits<std::uint32_t>(__shfl_sync(full_warp, v, static_cast<int>(t)), lane, raw);
    }
  }
  while (g < G) close();
  return fitted;
}

// The changes' positions from the bitmap of their ranks, the whole warp calling, each lane over its range [a, b)
// of the chunk: lane_count(g) is the lane's element count of group g, start (entropy_ctr's 16-bit lane counters)
// the rank of its first element of g, advanced as it walks. A set bit at an element's rank in its group is a
// change: spos gets its position with its group and the group's value parameter above it, until
// entropy_warp_values reads them. A counter reaches 2^16 only past the chunk's last element (numel <= 2^16), and its
// carry into the neighbouring half then lands in no group's counter.
// Ring: null for the register walk (D vectors ahead), else a warp's entropy_walk_ring<RingP, RingS> (the staged walk
// over the chunk's numel elements, whose lane ranges [a, b) are).
template <class W, unsigned D, class LaneCount, unsigned RingP = 0, unsigned RingS = 0>
SPARSESYNC_DEVICE errc entropy_warp_place(unsigned G, std::uint32_t n, const std::uint32_t* bits, std::uint32_t* start,
                                          const std::uint8_t* of_class, const std::uint8_t* k_val, LaneCount&& lane_count, const W* fast,
                                          const resolved_segment* segs, std::uint32_t segment_count, std::uint64_t first, std::uint32_t a,
                                          std::uint32_t b, std::uint32_t* spos, uint4* ring = nullptr, std::uint32_t numel = 0) {
  const unsigned lane = lane_id();
  // Per lane: its changes (set bits in its ranges; a start is exact where the lane has elements of g).
  std::uint32_t mine = 0;
  for (unsigned g = 0; g < G; ++g) {
    const std::uint32_t c = lane_count(g);
    if (c == 0) continue;
    const std::uint32_t b0 = entropy_ctr_get(start, g, lane);
    mine += entropy_popcount_range(bits, b0, b0 + c);
  }
  std::uint32_t at = mine;
#pragma unroll
  for (unsigned o = 1; o < 32; o *= 2) {
    const std::uint32_t u = __shfl_up_sync(full_warp, at, o);
    if (lane >= o) at += u;
  }
  if (__shfl_sync(full_warp, at, 31) != n) return errc::malformed;  // (never: the ranks are distinct and below the sizes)
  at -= mine;
  std::uint32_t* out = spos + at;
  std::uint32_t placed = 0;
  auto place = [&](std::uint32_t i, unsigned g, std::uint32_t rk) {
    if (((bits[rk >> 5] >> (rk & 31)) & 1u) && placed < mine)
      out[placed++] = (static_cast<std::uint32_t>(g) << entropy_rank_bits) | (static_cast<std::uint32_t>(k_val[g]) << entropy_staged_k_shift) | i;
  };
  auto rank = [&](unsigned g) {
    const unsigned sh = entropy_ctr_shift(g);
    return (atomicAdd(&start[entropy_ctr(g, lane)], 1u << sh) >> sh) & 0xffffu;
  };
  constexpr unsigned V = 16 / sizeof(W);
  // A vector's groups, then its ranks, then the bitmap tests: each a batch of independent accesses.
  auto fv = [&](std::uint32_t i, const W(&e)[V]) {
    unsigned g[V];
    std::uint32_t rk[V];
#pragma unroll
    for (unsigned k = 0; k < V; ++k) g[k] = of_class[entropy_params::class_of<W>(e[k])];
#pragma unroll
    for (unsigned k = 0; k < V; ++k) rk[k] = rank(g[k]);
#pragma unroll
    for (unsigned k = 0; k < V; ++k) place(i + k, g[k], rk[k]);
  };
  auto f1 = [&](std::uint32_t i, W v) {
    const unsigned g = of_class[entropy_params::class_of<W>(v)];
    place(i, g, rank(g));
  };
  if constexpr (RingP > 0)
    entropy_lane_walk_staged<W, RingP, RingS>(ring, fast, segs, segment_count, first, numel, fv, f1);
  else
    entropy_lane_walk_vectors<W, D>(fast, segs, segment_count, first, a, b, fv, f1);
  if (__any_sync(full_warp, placed != mine)) return errc::malformed;  // (never: both walks read the same base)
  return errc::ok;
}

// Decodes a class body (entropy_warp_decodes) up to its values, the whole warp calling: the changes' positions into
// spos[0, n) (chunk-relative, each with its group and the group's value parameter, entropy_staged_k_shift) and
// *state for entropy_warp_values, which reads the values into sval[0, n), and entropy_warp_check_values, which
// makes the checks of entropy_decode_chunk that need them; the three return its verdict. The bitstream is
// sequential: its values are read by a thread per chunk, where a warp reads 32 chunks' at once, not by one lane
// of a warp that waits. The base: `fast` (the chunk's elements, 16-byte aligned) or, when null, the segments
// from bucket element `first`. With too many groups it sets `alone` (every lane) and leaves the chunk to
// entropy_lane0_decode, whose tables may take the class counters' region: one call site in the kernel, so that
// the one-thread decoder is inlined, not called (a call's frame took 560 bytes of stack a thread, ptxas -v).
template <class W>
SPARSESYNC_DEVICE errc entropy_warp_decode_classes(entropy_decode_smem& s, value_mode mode, const unsigned char* data, std::uint32_t len,
                                                   std::uint32_t numel, std::uint32_t n, const W* fast, const resolved_segment* segs,
                                                   std::uint32_t segment_count, std::uint64_t first, const unsigned char* lo,
                                                   const unsigned char* hi, std::uint32_t* spos, std::uint32_t* sval, std::uint32_t* state,
                                                   bool& alone) {
  constexpr unsigned K = entropy_params::class_count<W>;
  const unsigned lane = lane_id();
  std::uint32_t a = 0, b = 0;
  if (lane == 0) *state = 0;
  entropy_lane_range<W>(numel, lane, a, b);
  // The data, which lane 0 reads bit by bit after the first walk, on its way to L2 meanwhile.
  for (std::uint32_t o = lane * 128u; o < len; o += 32u * 128u) asm volatile("prefetch.L2 [%0];" ::"l"(data + o));
  // 1. Class histogram. A lane's count stays below 2^16 (its range is at most 2^11).
  for (unsigned x = 0; x < K; x += 2) s.ctr[entropy_ctr(x, lane)] = 0;
  __syncwarp();
  entropy_lane_walk<W, entropy_count_depth>(fast, segs, segment_count, first, a, b, [&](std::uint32_t, W v) {
    const unsigned x = entropy_params::class_of<W>(v);
    atomicAdd(&s.ctr[entropy_ctr(x, lane)], 1u << entropy_ctr_shift(x));
  });
  __syncwarp();
  // 2. Groups (codec/entropy.hpp entropy_groups_of). Each lane sums the counter words of its pairs of classes over
  // the lanes (lane l reading lane (l + i) % 32's word at step i: one bank each), then lane 0 takes the totals of
  // the classes present, in class order, by shuffles: a few dozen serial steps where a warp sum for each of the K
  // classes made K (ncu, session 19: 13% of this kernel's stall samples). No table of class totals (12 chunks fit
  // an SM in 17.3 KB, 11 in 18.4: session 16, call J, verified apply at 7e9 on an H100 37.7 -> 35.2 ms). With too
  // many groups for the region lane 0 decodes the chunk alone.
  entropy_group_builder groups(numel);
  for (unsigned m = 0; m < (K / 2 + 31) / 32; ++m) {  // classes 2 p and 2 p + 1 for p = lane + 32 m
    const unsigned pair = lane + 32 * m;
    std::uint32_t even = 0, odd = 0;
    if (pair < K / 2) {
#pragma unroll 8
      for (unsigned i = 0; i < 32; ++i) {
        const std::uint32_t w = s.ctr[pair * 32 + ((lane + i) & 31u)];  // (entropy_ctr(2 pair, l): word pair * 32 + l)
        even += w & 0xffffu;
        odd += w >> 16;
      }
    }
    for (unsigned present = __ballot_sync(full_warp, even != 0 || odd != 0); present != 0; present &= present - 1) {
      const unsigned l = static_cast<unsigned>(__ffs(static_cast<int>(present))) - 1;
      const std::uint32_t e = __shfl_sync(full_warp, even, static_cast<int>(l)), o = __shfl_sync(full_warp, odd, static_cast<int>(l));
      if (lane == 0) {
        const unsigned x = 2 * (l + 32 * m);
        groups.add(x, e, s.size, s.of_class, s.from, entropy_decode_smem::G);
        groups.add(x + 1, o, s.size, s.of_class, s.from, entropy_decode_smem::G);
      }
    }
  }
  if (lane == 0) {
    s.count = groups.finish<K>(s.size, s.of_class, s.from, entropy_decode_smem::G);
    s.gbase[0] = 0;
    for (unsigned g = 0; g < s.count && g < entropy_decode_smem::G; ++g) s.gbase[g + 1] = s.gbase[g] + s.size[g];
  }
  __syncwarp();
  const unsigned G = s.count;
  alone = G > entropy_decode_smem::G;
  if (alone) return errc::ok;
  // 3. Per lane and group: its elements (the sum of the group's classes, in place: group g <= its classes), then
  // its first bit after a scan over lanes; the class counters are all read before either is stored past the first.
  const entropy_decode_tables at_(G, numel);
  std::uint32_t* const cnt = s.ctr + at_.cnt;
  std::uint32_t* const start = s.ctr + at_.start;
  std::uint32_t* const bits = s.ctr + at_.bits;
  for (unsigned g = 0; g < G; ++g) {
    const unsigned x1 = g + 1 < G ? s.from[g + 1] : K;
    std::uint32_t c = 0;
    for (unsigned x = s.from[g]; x < x1; ++x) c += entropy_ctr_get(s.ctr, x, lane);
    entropy_ctr_set(cnt, g, lane, c);
  }
  __syncwarp();
  for (unsigned g = 0; g < G; ++g) {
    const std::uint32_t c = entropy_ctr_get(cnt, g, lane);
    std::uint32_t incl = c;
#pragma unroll
    for (unsigned o = 1; o < 32; o *= 2) {
      const std::uint32_t u = __shfl_up_sync(full_warp, incl, o);
      if (lane >= o) incl += u;
    }
    entropy_ctr_set(start, g, lane, s.gbase[g] + incl - c);  // (2^16 only where the lane has none of g)
  }
  __syncwarp();
  // A chunk with enough changes to hold its plan in its staged positions goes the split way from here.
  if (entropy_split_fits(G, n)) {
    const entropy_split_layout L(G);
    for (unsigned g = lane; g < G; g += 32) spos[L.size + g] = s.size[g];
    for (unsigned g = lane; g < (G + 1) / 2; g += 32)
      spos[L.from + g] = s.from[2 * g] | (2 * g + 1 < G ? static_cast<std::uint32_t>(s.from[2 * g + 1]) << 16 : 0u);
    for (unsigned w = lane; w < (G + 1) / 2 * 32; w += 32) spos[L.start + w] = start[w];
    if (lane == 0) {
      spos[0] = G;
      *state = entropy_split_counted;
    }
    return errc::ok;
  }
  for (std::uint32_t w = lane; w < (numel + 31) / 32; w += 32) bits[w] = 0;
  __syncwarp();
  // 4. Header and gaps, read by lane 0 from a copy of the data in the region when it fits.
  unsigned char* const buf = reinterpret_cast<unsigned char*>(s.ctr + at_.data);
  const unsigned char* const copied =
      entropy_stage_data(data, len, lo, hi, buf, at_.data < entropy_decode_smem::words ? 4 * (entropy_decode_smem::words - at_.data) : 0u);
  const std::uint32_t copy_bytes = copied ? static_cast<std::uint32_t>((data + len - copied + 15) & ~15u) : 0u;
  // The gaps, kept for the parameter check below: in the region too where they fit, else in sval (free until the
  // values).
  const std::uint32_t gaps_at = at_.data + copy_bytes / 4;
  std::uint32_t* const gaps = gaps_at <= entropy_decode_smem::words && n <= entropy_decode_smem::words - gaps_at ? s.ctr + gaps_at : sval;
  std::uint64_t values_bit = 0;  // (lane 0's): where the values start, from the byte after the tag
  if (lane == 0) {
    entropy_bitmap_sink sink{bits, s.gbase, gaps};
    auto read = [&](auto&& r) {
      s.err = static_cast<int>(entropy_read_header_gaps<W>(G, s.size, s.first, s.k_gap, s.k_val, mode, r, len, n, sink));
      values_bit = r.position_bits();
    };
    if (copied)
      read(word_bit_reader(reinterpret_cast<const std::uint32_t*>(buf), copy_bytes / 4, static_cast<std::uint32_t>(8 * (data + 1 - copied)),
                           static_cast<std::uint32_t>(8 * (data + len - copied))));
    else
      read(bit_reader(data + 1, data + len, lo, hi));
  }
  __syncwarp();
  if (s.err != 0) return static_cast<errc>(s.err);
  const bool fitted = entropy_warp_gaps_fitted(G, n, s.size, s.first, s.k_gap, [&](std::uint32_t j0) { return j0 + lane < n ? gaps[j0 + lane] : 0u; });
  // 5-6. Positions.
  if (const errc e = entropy_warp_place<W, entropy_decode_depth>(G, n, bits, start, s.of_class, s.k_val, [&](unsigned g) { return entropy_ctr_get(cnt, g, lane); }, fast,
                                           segs, segment_count, first, a, b, spos);
      e != errc::ok)
    return e;
  __syncwarp();
  if (lane == 0) s.err = values_bit > entropy_values_bit_mask ? static_cast<int>(errc::malformed) : 0;  // (never: see the mask)
  __syncwarp();
  if (s.err != 0) return static_cast<errc>(s.err);
  if (lane == 0) *state = entropy_values_pending | (fitted ? entropy_values_fitted : 0u) | static_cast<std::uint32_t>(values_bit);
  return errc::ok;
}

// The values of a chunk the warp decoder left pending (state), read by one thread (entropy_read_values).
template <class W>
SPARSESYNC_DEVICE errc entropy_warp_values(value_mode mode, const unsigned char* data, std::uint32_t len, std::uint32_t n, std::uint32_t state,
                                           const unsigned char* lo, const unsigned char* hi, const std::uint32_t* spos, std::uint32_t* sval) {
  const std::uint32_t bit = state & entropy_values_bit_mask;
  bit_reader r(data + 1 + bit / 8, data + len, lo, hi);
  if (bit % 8) r.get(bit % 8);
  return entropy_read_values<W>(mode, r, n, [&](std::uint32_t j) { return (spos[j] >> entropy_staged_k_shift) & 31u; }, sval);
}

// What entropy_warp_check_values keeps per warp: per group its changes, value parameter and value costs.
struct entropy_check_smem {
  static constexpr unsigned G = entropy_decode_smem::G;
  std::uint32_t vcost[G * 16];  // per group, value costs for 16 parameters
  std::uint32_t changes[G];
  std::uint32_t best[G];        // the best cost so far per group
  std::uint8_t k_val[G], best_k[G];
};

// The checks that end the decode of a chunk whose values entropy_warp_values read (entropy_check_values' verdict),
// the whole warp calling: lane k (16 at a time) prices k over the values into per-group counters; rice's size for
// the same changes is a warp reduction. Clears the group and parameter bits of the staged positions.
template <class W>
SPARSESYNC_DEVICE errc entropy_warp_check_values(entropy_check_smem& s, value_mode mode, std::uint32_t len, std::uint32_t n, std::uint32_t state,
                                                 std::uint32_t* spos, const std::uint32_t* sval) {
  constexpr unsigned wbits = 8 * sizeof(W);
  constexpr unsigned G = entropy_check_smem::G;
  const unsigned lane = lane_id();
  const bool ulp = mode == value_mode::ulp;
  bool fitted = (state & entropy_values_fitted) != 0;
  for (unsigned g = lane; g < G; g += 32) s.changes[g] = 0;
  __syncwarp();
  for (std::uint32_t j = lane; j < n; j += 32) {
    const std::uint32_t a = spos[j];
    const unsigned g = a >> entropy_rank_bits;
    atomicAdd(&s.changes[g], 1u);
    s.k_val[g] = static_cast<std::uint8_t>((a >> entropy_staged_k_shift) & 31u);  // (the same for every change of g)
  }
  __syncwarp();
  if (ulp && fitted) {
    for (unsigned kb = 0; kb < wbits; kb += 16) {
      const unsigned k = kb + (lane & 15u);
      const bool pricing = lane < 16 && k < wbits;
      if (pricing)
        for (unsigned g = 0; g < G; ++g) s.vcost[g * 16 + lane] = 0;
      __syncwarp();
      for (std::uint32_t j0 = 0; j0 < n; j0 += 32) {
        std::uint32_t gl = 0, cl = 0;
        if (j0 + lane < n) {
          gl = spos[j0 + lane] >> entropy_rank_bits;
          cl = static_cast<std::uint32_t>(zigzag<W>(static_cast<W>(sval[j0 + lane]))) - 1u;
        }
        const unsigned m = n - j0 < 32 ? n - j0 : 32u;
        for (unsigned t = 0; t < m; ++t) {
          const std::uint32_t g = __shfl_sync(full_warp, gl, static_cast<int>(t));
          const std::uint32_t code = __shfl_sync(full_warp, cl, static_cast<int>(t));
          if (pricing) atomicAdd(&s.vcost[g * 16 + lane], rice_params::code_bits<std::uint32_t>(code, k, wbits));
        }
      }
      __syncwarp();
      for (unsigned g = 0; g < G; ++g) {
        if (s.changes[g] == 0) continue;
        const std::uint32_t cost = pricing ? s.vcost[g * 16 + lane] : ~std::uint32_t{0};
        const unsigned bk = entropy_warp_argmin(cost, 15);
        const std::uint32_t bc = __shfl_sync(full_warp, cost, bk);
        if (lane == 0 && (kb == 0 || bc < s.best[g])) {
          s.best[g] = bc;
          s.best_k[g] = static_cast<std::uint8_t>(kb + bk);
        }
      }
      __syncwarp();
    }
    for (unsigned g = 0; g < G; ++g)
      if (s.changes[g] != 0 && s.best_k[g] != s.k_val[g]) fitted = false;
  }
  for (std::uint32_t j = lane; j < n; j += 32) spos[j] &= entropy_warp_max_numel - 1;
  __syncwarp();
  if (!fitted) return errc::non_canonical;
  // Exactly consumed with the fitted parameters, the data is the class body's length: it must beat rice's.
  entropy_warp_rice_cost<W> rice;
  for (std::uint32_t j = lane; j < n; j += 32)
    rice.add(spos[j] - (j > 0 ? spos[j - 1] + 1 : 0u), ulp, ulp ? static_cast<std::uint32_t>(zigzag<W>(static_cast<W>(sval[j]))) - 1u : 0u);
  unsigned k_gap = 0, k_val = 0;
  if (std::uint64_t{len} >= 1 + rice.bytes(ulp, n, k_gap, k_val)) return errc::non_canonical;
  return errc::ok;
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
