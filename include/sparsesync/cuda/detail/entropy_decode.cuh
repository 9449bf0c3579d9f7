// The entropy decoder's class bodies (tag 1) a block per chunk, with the host decoder's checks (codec/entropy.hpp
// decode_classes, the specification). The thread-per-chunk decoder (entropy_codec.cuh) keeps the rice bodies
// (tag 0) and chunks longer than entropy_warp_max_numel: apply_entropy_kernel takes what this one leaves.
//
// The bitstream stays sequential (thread 0 reads the header, the gaps and the values), but the base is read once,
// coalesced, by 16 warps, each on a contiguous tile of the chunk:
//  1. walk 1: each element's class into shared memory (a byte each) and per warp the tile's class counts, a
//     class advanced once per 32 elements (__match_any_sync) -> the groups and, per warp and group, the rank of
//     the warp's first element of the group (per-class prefixes over the warps, summed over the group's classes);
//  2. thread 0 decodes the header and the gaps, marking each change's rank in a bitmap of the chunk's elements
//     by group (group g's rank r is bit gbase[g] + r);
//  3. a popcount of each warp's rank ranges gives where its changes go in position order;
//  4. walk 2 (shared memory only): 32 consecutive elements a step, an element's rank its group's count so far
//     plus the lanes below it holding the group; a set bit at that rank is a change.
// The parameter checks price all k at once with lane k holding k's cost (gaps in group order, values through
// per-group counters in shared memory); rice's size for the same changes is a warp reduction.
#pragma once

#include <sparsesync/codec/entropy_params.hpp>
#include <sparsesync/codec/rice_params.hpp>
#include <sparsesync/cuda/detail/entropy_codec.cuh>
#include <sparsesync/cuda/detail/entropy_warp.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

// The bitmap holds one bit per element and the staged classes a byte per element: chunks up to 2^16.
inline constexpr std::uint32_t entropy_warp_max_numel = 1u << 16;

// Whether apply_entropy_warp_kernel decodes this chunk (n changes, len data bytes starting with `tag`).
SPARSESYNC_HD constexpr bool entropy_warp_decodes(std::uint32_t n, std::uint32_t len, unsigned tag, std::uint32_t numel) {
  return n > 0 && len > 0 && tag == entropy_params::tag_classes && numel <= entropy_warp_max_numel;
}

// A block of 16 warps per chunk, each warp on a contiguous tile of it.
inline constexpr unsigned entropy_block_warps = 16;
inline constexpr int entropy_block_threads = 32 * static_cast<int>(entropy_block_warps);

// ~96 KB (dynamic shared memory): two blocks per SM.
struct entropy_decode_smem {
  static constexpr unsigned K = 256;  // the most classes of any width
  union {
    std::uint8_t cls[entropy_warp_max_numel];  // each element's class (walk 1 -> walk 2)
    std::uint32_t vcost[K * 16];               // then per group, value costs for 16 parameters
  };
  // Per warp: its class counts; then per class the elements of the warps before it; then per group the rank
  // of the warp's first element of the group (advanced through walk 2).
  std::uint32_t wcnt[entropy_block_warps][K];
  std::uint32_t bits[entropy_warp_max_numel / 32];
  std::uint32_t size[K];       // class histogram, then group sizes
  std::uint32_t gbase[K + 1];  // first bit of each group
  std::uint32_t first[K + 1];  // each group's first change in group order
  std::uint32_t best[K];       // value check: the best cost so far per group
  std::uint32_t wchg[entropy_block_warps];  // changes per warp tile
  std::uint16_t from[K];       // each group's first class
  std::uint8_t of_class[K], k_gap[K], k_val[K], best_k[K];
  std::uint8_t kv32[32];       // value parameters of the next 32 changes (lane 0 reads them)
  unsigned count;              // groups
  unsigned top;                // 1 + the highest class present
  int err;
};

// Warp w's tile [lo, hi) of a chunk: whole runs of 32 elements (so of whole 16-byte vectors, for any width).
SPARSESYNC_DEVICE void entropy_block_tile(std::uint32_t numel, unsigned w, std::uint32_t& lo, std::uint32_t& hi) {
  const std::uint32_t T = (numel + 32 * entropy_block_warps - 1) / (32 * entropy_block_warps) * 32;
  lo = w * T < numel ? w * T : numel;
  hi = numel - lo < T ? numel : lo + T;
}

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

// Warp 0, after the positions: the values in position order (lane 0), their parameters' check (lane k prices
// k), and the class body must beat rice's for the same changes. Returns the verdict to every lane.
template <class W>
SPARSESYNC_DEVICE errc entropy_block_tail(entropy_decode_smem& s, value_mode mode, bit_reader& r, std::uint32_t len, std::uint32_t n,
                                          bool fitted, std::uint32_t* spos, std::uint32_t* sval) {
  constexpr unsigned wbits = 8 * sizeof(W);
  const unsigned lane = lane_id();
  const bool ulp = mode == value_mode::ulp;
  const unsigned G = s.count;
  // 5. Values, in position order (lane 0), their groups' parameters fetched by the warp 32 at a time.
  {
    errc e = errc::ok;
    if (ulp) {
      for (std::uint32_t j0 = 0; j0 < n; j0 += 32) {
        if (j0 + lane < n) s.kv32[lane] = s.k_val[spos[j0 + lane] >> entropy_rank_bits];
        __syncwarp();
        if (lane == 0 && e == errc::ok) {
          const unsigned m = n - j0 < 32 ? n - j0 : 32u;
          for (unsigned t = 0; t < m && e == errc::ok; ++t) {
            std::uint64_t code = 0;
            e = entropy_rice_get(r, s.kv32[t], wbits, code);
            if (e == errc::ok && code >= (std::uint64_t{1} << wbits) - 1) e = errc::malformed;
            sval[j0 + t] = unzigzag<W>(static_cast<W>(code + 1));
          }
        }
        __syncwarp();
      }
    } else if (lane == 0) {
      for (std::uint32_t j = 0; j < n; ++j) sval[j] = static_cast<W>(r.get(wbits));
      if (r.failed()) e = errc::truncated;
    }
    if (lane == 0) {
      if (e == errc::ok && !r.at_padded_end()) e = errc::malformed;
      s.err = static_cast<int>(e);
    }
  }
  __syncwarp();
  if (s.err != 0) return static_cast<errc>(s.err);
  // Value parameters: lane k (16 at a time) prices k over the values, into per-group counters.
  if (ulp && fitted) {
    for (unsigned kb = 0; kb < wbits; kb += 16) {
      const unsigned k = kb + (lane & 15u);
      const bool pricing = lane < 16 && k < wbits;
      if (pricing)
        for (unsigned g = 0; g < G; ++g) s.vcost[g * 16 + lane] = 0;
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
          if (pricing) s.vcost[g * 16 + lane] += rice_params::code_bits<std::uint32_t>(code, k, wbits);
        }
      }
      __syncwarp();
      for (unsigned g = 0; g < G; ++g) {
        if (s.first[g + 1] == s.first[g]) continue;
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
      if (s.first[g + 1] != s.first[g] && s.best_k[g] != s.k_val[g]) fitted = false;
  }
  for (std::uint32_t j = lane; j < n; j += 32) spos[j] &= entropy_rank_mask;
  __syncwarp();
  if (!fitted) return errc::non_canonical;
  // Exactly consumed with the fitted parameters, the data is the class body's length: it must beat rice's.
  std::uint32_t rg[rice_params::max_gap_k + 1], rv[wbits];
#pragma unroll
  for (unsigned k = 0; k <= rice_params::max_gap_k; ++k) rg[k] = 0;
#pragma unroll
  for (unsigned k = 0; k < wbits; ++k) rv[k] = 0;
  for (std::uint32_t j = lane; j < n; j += 32) {
    const std::uint32_t gap = spos[j] - (j > 0 ? spos[j - 1] + 1 : 0u);
#pragma unroll
    for (unsigned k = 0; k <= rice_params::max_gap_k; ++k) rg[k] += rice_params::code_bits<std::uint32_t>(gap, k, rice_params::gap_raw_bits);
    if (ulp) {
      const std::uint32_t code = static_cast<std::uint32_t>(zigzag<W>(static_cast<W>(sval[j]))) - 1u;
#pragma unroll
      for (unsigned k = 0; k < wbits; ++k) rv[k] += rice_params::code_bits<std::uint32_t>(code, k, wbits);
    }
  }
  std::uint32_t gap_bits = 0, val_bits = 0;
  entropy_warp_best(rg, rice_params::max_gap_k, gap_bits);
  if (ulp) entropy_warp_best(rv, wbits - 1, val_bits);
  const std::uint64_t rice_bytes = 2 + (std::uint64_t{gap_bits} + (ulp ? std::uint64_t{val_bits} : std::uint64_t{n} * wbits) + 7) / 8;
  if (std::uint64_t{len} >= 1 + rice_bytes) return errc::non_canonical;
  return errc::ok;
}

// Walk 1, every warp on its tile: each element's class into s.cls, and the tile's class counts into s.wcnt[w]
// (a class's count advanced once per 32 elements by the lowest lane holding it). Also clears the bitmap.
template <class W>
SPARSESYNC_DEVICE void entropy_block_classes(entropy_decode_smem& s, const W* fast, const resolved_segment* segs, std::uint32_t segment_count,
                                             std::uint64_t first, std::uint32_t numel) {
  constexpr unsigned K = entropy_params::class_count<W>;
  constexpr unsigned V = 16 / sizeof(W);
  constexpr unsigned none = 0xFFFFu;
  const unsigned lane = lane_id(), w = threadIdx.x / 32;
  for (unsigned x = lane; x < K; x += 32) s.wcnt[w][x] = 0;
  for (std::uint32_t i = threadIdx.x; i < (numel + 31) / 32; i += blockDim.x) s.bits[i] = 0;
  if (threadIdx.x == 0) {
    s.top = 0;
    s.err = 0;
  }
  __syncwarp();
  std::uint32_t lo = 0, hi = 0;
  entropy_block_tile(numel, w, lo, hi);
  for (std::uint32_t b = lo; b < hi; b += 32 * V) {  // (uniform over the warp)
    const std::uint32_t e0 = b + lane * V;
    unsigned c[V];
#pragma unroll
    for (unsigned k = 0; k < V; ++k) c[k] = none;
    const bool whole = e0 + V <= hi;
    if (fast != nullptr && whole) {
      const uint4 v = *reinterpret_cast<const uint4*>(fast + e0);
#pragma unroll
      for (unsigned k = 0; k < V; ++k) c[k] = entropy_params::class_of<W>(vec_get<W>(v, static_cast<int>(k)));
    } else if (e0 < hi) {
      if (fast != nullptr) {
#pragma unroll
        for (unsigned k = 0; k < V; ++k)
          if (e0 + k < hi) c[k] = entropy_params::class_of<W>(fast[e0 + k]);
      } else {
        base_walker<W> bw(segs, segment_count, first + e0);
#pragma unroll
        for (unsigned k = 0; k < V; ++k)
          if (e0 + k < hi) c[k] = entropy_params::class_of<W>(bw.next());
      }
    }
#pragma unroll
    for (unsigned k = 0; k < V; ++k) {
      const unsigned m = __match_any_sync(full_warp, c[k]);
      if (c[k] < K && lane == static_cast<unsigned>(__ffs(static_cast<int>(m))) - 1u) atomicAdd(&s.wcnt[w][c[k]], static_cast<unsigned>(__popc(m)));
    }
    if (whole) {
#pragma unroll
      for (unsigned j = 0; j < V / 4; ++j)
        reinterpret_cast<std::uint32_t*>(s.cls + e0)[j] = c[4 * j] | (c[4 * j + 1] << 8) | (c[4 * j + 2] << 16) | (c[4 * j + 3] << 24);
    } else {
#pragma unroll
      for (unsigned k = 0; k < V; ++k)
        if (e0 + k < hi) s.cls[e0 + k] = static_cast<std::uint8_t>(c[k]);
    }
  }
}

// After walk 1 (block-wide): the histogram, the groups (codec/entropy.hpp entropy_groups_of), and per warp and
// group the rank of the warp's first element of the group (s.wcnt[w][g]).
template <class W>
SPARSESYNC_DEVICE void entropy_block_groups(entropy_decode_smem& s, std::uint32_t numel) {
  constexpr unsigned K = entropy_params::class_count<W>;
  const unsigned t = threadIdx.x;
  if (t < K) {
    std::uint32_t run = 0;
#pragma unroll
    for (unsigned w = 0; w < entropy_block_warps; ++w) {
      const std::uint32_t v = s.wcnt[w][t];
      s.wcnt[w][t] = run;
      run += v;
    }
    s.size[t] = run;
    if (run > 0) atomicMax(&s.top, t + 1);
  }
  __syncthreads();
  if (t == 0) {
    const unsigned count = entropy_groups_from_counts<W>(s.size, s.of_class, s.from, numel);
    s.count = count;
    s.gbase[0] = 0;
    for (unsigned g = 0; g < count; ++g) s.gbase[g + 1] = s.gbase[g] + s.size[g];
  }
  __syncthreads();
}

// Per warp and group: gbase + the group's elements in the warps before (a sum over the group's classes of the
// per-class prefixes), gathered first and written after a barrier (group g's slot may hold a class of an
// earlier group). Run by the block's threads from `t0` on (`nthreads` of them, whole warps), with barrier `bar`.
template <class W>
SPARSESYNC_DEVICE void entropy_block_group_starts(entropy_decode_smem& s, unsigned t0, unsigned nthreads, unsigned bar) {
  constexpr unsigned K = entropy_params::class_count<W>;
  constexpr unsigned per = (entropy_block_warps * K + 32 * 15 - 1) / (32 * 15);  // (nthreads >= 480)
  const unsigned G = s.count, top = s.top, t = threadIdx.x - t0;
  std::uint32_t got[per];
#pragma unroll
  for (unsigned j = 0; j < per; ++j) {
    const unsigned i = t + j * nthreads, w = i % entropy_block_warps, g = i / entropy_block_warps;
    got[j] = 0;
    if (g < G) {
      const unsigned x1 = g + 1 < G ? s.from[g + 1] : K;
      std::uint32_t sum = s.gbase[g];
      for (unsigned x = s.from[g]; x < (x1 < top ? x1 : top); ++x) sum += s.wcnt[w][x];
      got[j] = sum;
    }
  }
  asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(nthreads) : "memory");
#pragma unroll
  for (unsigned j = 0; j < per; ++j) {
    const unsigned i = t + j * nthreads, w = i % entropy_block_warps, g = i / entropy_block_warps;
    if (g < G) s.wcnt[w][g] = got[j];
  }
}

// Thread 0: the header and the gaps (gaps into gap_out in group order, ranks into the bitmap), checked as
// entropy_decode_chunk does. Returns the first error.
template <class W>
SPARSESYNC_DEVICE errc entropy_block_header(entropy_decode_smem& s, value_mode mode, bit_reader& r, std::uint32_t len, std::uint32_t n,
                                            std::uint32_t* gap_out) {
  constexpr unsigned wbits = 8 * sizeof(W);
  const unsigned count = s.count;
  const bool ulp = mode == value_mode::ulp;
  std::uint32_t remaining = n;
  s.first[0] = 0;
  for (unsigned g = 0; g < count; ++g) {
    const std::uint32_t size = s.size[g];
    std::uint32_t c = remaining;
    if (g + 1 < count) {
      c = r.get(entropy_params::count_bits(size, remaining));
      if (c > (size < remaining ? size : remaining)) return errc::malformed;
    } else if (c > size) {
      return errc::malformed;
    }
    s.first[g + 1] = s.first[g] + c;
    remaining -= c;
    s.k_gap[g] = s.k_val[g] = 0;
    if (c > 0 && c < size) {
      s.k_gap[g] = static_cast<std::uint8_t>(r.get(entropy_params::gap_k_bits(size)));
      if (s.k_gap[g] > entropy_params::max_gap_k_of(size)) return errc::malformed;
    }
    if (c > 0 && ulp) s.k_val[g] = static_cast<std::uint8_t>(r.get_unary(wbits - 1));
  }
  if (r.failed()) return errc::truncated;
  std::uint64_t least = 0;
  for (unsigned g = 0; g < count; ++g)
    if (s.first[g + 1] - s.first[g] < s.size[g]) least += s.first[g + 1] - s.first[g];
  if (least > 8 * std::uint64_t{len}) return errc::truncated;
  for (unsigned g = 0; g < count; ++g) {
    const std::uint32_t size = s.size[g], c = s.first[g + 1] - s.first[g];
    if (c == size) {
      entropy_set_range(s.bits, s.gbase[g], s.gbase[g] + size);
      continue;
    }
    const unsigned raw = entropy_params::gap_raw_bits(size);
    std::uint64_t next = 0;
    for (std::uint32_t i = s.first[g]; i < s.first[g + 1]; ++i) {
      std::uint64_t gap = 0;
      if (const errc e = entropy_rice_get(r, s.k_gap[g], raw, gap); e != errc::ok) return e;
      next += gap;
      if (next >= size) return errc::index_out_of_range;
      gap_out[i] = static_cast<std::uint32_t>(gap);
      const std::uint32_t b = s.gbase[g] + static_cast<std::uint32_t>(next);
      s.bits[b >> 5] |= 1u << (b & 31);
      ++next;
    }
  }
  return errc::ok;
}

// Decodes a class body (entropy_warp_decodes) into spos[0, n) (chunk-relative positions) and sval[0, n)
// (coded values), the whole block calling; returns (to every thread) the same verdict as entropy_decode_chunk.
// The base: `fast` (the chunk's elements, 16-byte aligned) or, when null, the segments from bucket element
// `first`.
template <class W>
SPARSESYNC_DEVICE errc entropy_block_decode_classes(entropy_decode_smem& s, value_mode mode, const unsigned char* data, std::uint32_t len,
                                                    std::uint32_t numel, std::uint32_t n, const W* fast, const resolved_segment* segs,
                                                    std::uint32_t segment_count, std::uint64_t first, const unsigned char* lo,
                                                    const unsigned char* hi, std::uint32_t* spos, std::uint32_t* sval) {
  const unsigned lane = lane_id(), w = threadIdx.x / 32;
  // 1. Classes and per-warp class counts; the groups; per warp and group its first rank (warps 1..15) while
  // thread 0 reads the header and the gaps (the gaps into sval, free until the values).
  entropy_block_classes<W>(s, fast, segs, segment_count, first, numel);
  __syncthreads();
  entropy_block_groups<W>(s, numel);
  const unsigned G = s.count;
  bit_reader r(data + 1, data + len, lo, hi);
  if (w == 0) {
    if (lane == 0) s.err = static_cast<int>(entropy_block_header<W>(s, mode, r, len, n, sval));
  } else {
    entropy_block_group_starts<W>(s, 32, entropy_block_threads - 32, 1);
  }
  __syncthreads();
  if (s.err != 0) return static_cast<errc>(s.err);
  // 2. Gap parameters (warp 0): lane k prices k over each group's gaps, read 32 at a time (one load for the
  // warp, then broadcast): the gaps of wholly changed groups were never written and are skipped.
  bool fitted = true;
  if (w == 0) {
    unsigned g = 0;
    std::uint32_t cost = 0;
    auto close = [&] {  // (uniform)
      const std::uint32_t c = s.first[g + 1] - s.first[g];
      if (c > 0 && c < s.size[g] && entropy_warp_argmin(cost, entropy_params::max_gap_k_of(s.size[g])) != s.k_gap[g]) fitted = false;
      ++g;
      cost = 0;
    };
    unsigned raw = entropy_params::gap_raw_bits(s.size[0]);
    for (std::uint32_t j0 = 0; j0 < n; j0 += 32) {
      const std::uint32_t v = j0 + lane < n ? sval[j0 + lane] : 0u;
      const unsigned m = n - j0 < 32 ? n - j0 : 32u;
      for (unsigned t = 0; t < m; ++t) {
        if (j0 + t >= s.first[g + 1]) {
          while (j0 + t >= s.first[g + 1]) close();
          raw = entropy_params::gap_raw_bits(s.size[g]);
        }
        cost += rice_params::code_bits<std::uint32_t>(__shfl_sync(full_warp, v, static_cast<int>(t)), lane, raw);
      }
    }
    while (g < G) close();
  }
  // 3. Each warp's changes: the set bits in its rank range of each group.
  std::uint32_t mine = 0;
  for (unsigned g = lane; g < G; g += 32) {
    const std::uint32_t a = s.wcnt[w][g], b = w + 1 < entropy_block_warps ? s.wcnt[w + 1][g] : s.gbase[g + 1];
    mine += entropy_popcount_range(s.bits, a, b);
  }
  mine = entropy_warp_add(mine);
  if (lane == 0) s.wchg[w] = mine;
  __syncthreads();
  std::uint32_t at = 0, total = 0;
#pragma unroll
  for (unsigned v = 0; v < entropy_block_warps; ++v) {
    at += v < w ? s.wchg[v] : 0u;
    total += s.wchg[v];
  }
  if (total != n) return errc::malformed;  // (never: the ranks are distinct and below the sizes)
  // 4. Walk 2, positions: 32 consecutive elements a step, each lane's rank in its group the group's count so far
  // plus its lanes below holding the group; a set bit at that rank is a change. The group rides in the top bits
  // of the staged position until the values are read.
  {
    std::uint32_t a = 0, b = 0;
    entropy_block_tile(numel, w, a, b);
    std::uint32_t* out = spos + at;
    std::uint32_t* ctr = s.wcnt[w];
    const unsigned below = lanes_below();
    std::uint32_t placed = 0;
    for (std::uint32_t e0 = a; e0 < b; e0 += 128) {  // (uniform over the warp)
      unsigned gq[4];
#pragma unroll
      for (unsigned j = 0; j < 4; ++j) {
        const std::uint32_t e = e0 + 32 * j + lane;
        gq[j] = e < b ? s.of_class[s.cls[e]] : 0xFFFFu;
      }
#pragma unroll
      for (unsigned j = 0; j < 4; ++j) {
        const unsigned g = gq[j];
        const bool valid = g != 0xFFFFu;
        const unsigned m = __match_any_sync(full_warp, g);
        const std::uint32_t rk = valid ? ctr[g] + static_cast<std::uint32_t>(__popc(m & below)) : 0u;
        const bool hit = valid && ((s.bits[rk >> 5] >> (rk & 31)) & 1u);
        __syncwarp();
        if (valid && (m >> lane) == 1u) ctr[g] = rk + 1;  // the group's highest lane here
        const unsigned hm = __ballot_sync(full_warp, hit);
        if (hit) {
          const std::uint32_t k = placed + static_cast<std::uint32_t>(__popc(hm & below));
          if (k < mine) out[k] = (static_cast<std::uint32_t>(g) << entropy_rank_bits) | (e0 + 32 * j + lane);
        }
        placed += static_cast<std::uint32_t>(__popc(hm));
        __syncwarp();
      }
    }
    if (placed != mine && lane == 0) atomicCAS(&s.err, 0, static_cast<int>(errc::malformed));  // (never: both walks read the same classes)
  }
  __syncthreads();
  if (s.err != 0) return static_cast<errc>(s.err);
  // 5-7 (warp 0): values, their parameters, rice's size for the same changes.
  if (w == 0) {
    const errc e = entropy_block_tail<W>(s, mode, r, len, n, fitted, spos, sval);
    if (lane == 0) s.err = static_cast<int>(e);
  }
  __syncthreads();
  return static_cast<errc>(s.err);
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
