// Where the entropy codec's GPU walks spend their time: the base walk of its size pass and decoder (a warp
// per 2^16-element BF16 chunk, 18 KB of shared memory per chunk) taken apart, over a 7e9-element model of
// random-exponent BF16 words. Each variant is one kernel; the figures are ms per pass over the whole model,
// beside a full-occupancy coalesced read of the same bytes (the memory floor) in the same run.
//   layout: range   lane l walks [l R, (l + 1) R), R = chunk / 32 (what the codec does: lanes 4 KB apart)
//           skew    lane l walks [l (R - 8), ...) (lanes 4080 bytes apart; the last lane takes the rest)
//           coal    lane l reads vector (step 32 + l) (a warp reads 512 contiguous bytes per load)
//           async   as range, but each lane keeps D vectors in flight with cp.async into a shared-memory ring
//                   (D * 512 bytes a warp) instead of registers
//           xpose   as range, but the warp fetches by cp.async in rounds of P vectors a lane, P lanes taking one
//                   lane's P contiguous vectors (16 / P lane ranges a load instruction, P * 16 contiguous bytes
//                   each, where range has 32 ranges of 16 bytes), into a ring of S rounds (S * P * 512 bytes a
//                   warp); each lane then reads its own vectors from shared memory (session 20)
//           tile    lane l walks [t T + l S V, t T + (l + 1) S V) in tiles t of T = 32 S V elements (S vectors a lane a
//                   tile, all loaded at once, the next tile's while this one is counted): a warp's 32 streams within
//                   T * 2 contiguous bytes, as range's are within the chunk's 128 KB (session 27: whether range is bound
//                   by its access pattern; the per-tile scan of a decoder built so is not in this probe)
//           tilescan  tile's order with what a placing walk built so would do per tile (the work argument is
//                   ignored): each lane's elements of each of 16 groups (a class -> group table, byte counters),
//                   a scan over the lanes per group (16-bit pairs) into each lane's rank counters, then per element
//                   the rank (the counter atomic's old value) tested against a bitmap (session 27)
//           encrange  the encoder's ranking walk (its size pass, step 3) over the lane ranges: per element its group
//                   (a class -> group table), a whole-word lane counter's atomic with its old value, one test a vector
//                   for the lane's next change (every 117th element of the model: 0.85%), its rank kept there
//           enctile   the same ranks in tile order (S vectors a lane a tile): per tile, a warp sum per change before
//                   the tile is counted (the lanes after the change's lane) and one after (the lanes before it), the
//                   changing lane's counter value at the change between them (session 27)
//           match   the placing walk in position order, 32 consecutive elements a step (lane l the l-th, a 2-byte load
//                   each): an element's rank is its group's running count in shared memory plus the lanes below it
//                   of the same group (__match_any_sync), the lowest of which advances the count; no per-lane
//                   counters, so no count walk would be needed before it but the group totals (a coalesced hist);
//                   the rank tested against a bitmap of 2^16 bits with ~0.8% set (session 30)
//           coalsnap  coal's count (work hist: lane-private class counters), and at the end of each lane range's
//                   elements (every R / 256 steps) the warp's sum of each present class's counters
//                   (__reduce_add_sync, a loop over a 256-bit mask of present classes) kept in a table: the lane ranges'
//                   starting counts that the decoder's lane-range placing walk needs, from a coalesced walk (session 30;
//                   slots 2: a warp sum per counter word of two classes, over a list of the present ones)
//           matchref  the same ranks and tests by lane 0 alone, walking the chunk in order (checks match's sum)
//   smem:   the counters' shared memory a warp: 18 KB (the decoder's class counters) or 11 KB (the placing kernel's
//           and the size pass's), which with the ring sets the chunks an SM
//   work:   sum     the words xor-ed (the loads alone)
//           hist    + one 16-bit shared-memory atomic per element (the class histogram, walk 1)
//           rank    + the atomic's old value read and tested against a bitmap (walk 2 of the decoder)
// Build: the bench build (target entropy_walk_probe), or nvcc -O3 -std=c++20 -arch=sm_90 -o entropy_walk_probe
//        -Iinclude bench/gpu/entropy_walk_probe.cu
// Run:   ./entropy_walk_probe [numel=7e9] [reps=3] [27, 28 or 29: session 27's sets only; 30: session 30's]   (prints one JSON object per line; session 14's run on an H100:
//        bench/results/gpu-test-runs/s14/probe/probe.jsonl)
#include <sparsesync/cuda/cuda_error.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK(x) ::sparsesync::cuda::throw_on_cuda_error((x), #x)

namespace {

enum class layout { range, skew, coal, async, xpose, tile, tilescan, encrange, enctile, match, matchref, coalsnap };
enum class work { sum, hist, rank };

constexpr unsigned chunk = 1u << 16, V = 8;  // BF16 elements per chunk and per 16-byte vector

__device__ __forceinline__ unsigned ctr_at(unsigned x, unsigned lane) { return (x >> 1) * 32 + lane; }

// A lane's range [lo, hi) of whole vectors, D loaded ahead: fv(i, v) for each (i its first element).
template <unsigned D, class FV>
__device__ __forceinline__ std::uint32_t lane_walk(const std::uint16_t* b, std::uint32_t lo, std::uint32_t hi, FV&& fv) {
  std::uint32_t i = lo;
  uint4 v[D], w[D];
  if (i + D * V <= hi) {
#pragma unroll
    for (unsigned u = 0; u < D; ++u) v[u] = *reinterpret_cast<const uint4*>(b + i + u * V);
  }
  for (; i + D * V <= hi; i += D * V) {
    const bool more = i + 2 * D * V <= hi;
    if (more) {
#pragma unroll
      for (unsigned u = 0; u < D; ++u) w[u] = *reinterpret_cast<const uint4*>(b + i + (D + u) * V);
    }
#pragma unroll
    for (unsigned u = 0; u < D; ++u) fv(i + u * V, v[u]);
    if (more) {
#pragma unroll
      for (unsigned u = 0; u < D; ++u) v[u] = w[u];
    }
  }
  return i;  // (the first element not walked)
}

// The chunk's whole tiles of 32 S vectors, each lane S contiguous ones, the next tile loaded while ft(t, v) takes
// this one. Returns the tiles walked.
template <unsigned S, class FT>
__device__ __forceinline__ std::uint32_t tile_walk(const std::uint16_t* b, std::uint32_t n, unsigned lane, FT&& ft) {
  constexpr unsigned T = 32 * S * V;
  const std::uint32_t tiles = n / T;
  uint4 v[S], w[S];
  auto load = [&](std::uint32_t t, uint4 (&to)[S]) {
#pragma unroll
    for (unsigned u = 0; u < S; ++u) to[u] = reinterpret_cast<const uint4*>(b + t * T + lane * S * V)[u];
  };
  if (tiles > 0) load(0, v);
  for (std::uint32_t t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) load(t + 1, w);
    ft(t, v);
#pragma unroll
    for (unsigned u = 0; u < S; ++u) v[u] = w[u];
  }
  return tiles;
}

// The eight BF16 words of a vector.
__device__ __forceinline__ void words8(const uint4& v, std::uint32_t (&e)[8]) {
  const std::uint32_t x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (unsigned k = 0; k < 8; ++k) e[k] = k & 1 ? x[k / 2] >> 16 : x[k / 2] & 0xffffu;
}

// D: vectors ahead (range, skew, coal, async) or P (xpose); S: xpose's slots; CtrWords: the counters' words.
template <layout L, work Wk, unsigned D, unsigned S = 1, unsigned CtrWords = 128 * 32 + 512>
__global__ void __launch_bounds__(32) walk_kernel(const std::uint16_t* base, std::uint64_t numel, std::uint32_t* sink) {
  // 16 KB of counters + 2 KB (the decoder's 18 KB per chunk), or 11 KB (the placing kernel's), classes folded in
  __shared__ std::uint32_t ctr[CtrWords];
  constexpr unsigned ctr_classes = (CtrWords - 512) / 32 * 2 < 256 ? (CtrWords - 512) / 32 * 2 : 256;
  __shared__ uint4 ring[L == layout::async ? D * 32 : L == layout::xpose ? S * D * 32 : 1];
  const unsigned lane = threadIdx.x;
  const std::uint64_t first = std::uint64_t{blockIdx.x} * chunk;
  if (first >= numel) return;
  const std::uint32_t n = numel - first < chunk ? static_cast<std::uint32_t>(numel - first) : chunk;
  for (unsigned i = lane; i < CtrWords; i += 32) ctr[i] = 0;
  __syncwarp();
  const std::uint16_t* b = base + first;
  std::uint32_t acc = 0;
  auto element = [&](std::uint32_t i, std::uint32_t bits) {
    if constexpr (Wk == work::sum) {
      acc ^= bits + i;
    } else {
      const unsigned x = ((bits >> 7) & 0xffu) % ctr_classes;
      const unsigned sh = (x & 1u) * 16;
      const std::uint32_t old = atomicAdd(&ctr[ctr_at(x, lane)], 1u << sh);
      if constexpr (Wk == work::rank) {
        const std::uint32_t rk = (old >> sh) & 0xffffu;
        if ((ctr[CtrWords - 512 + ((rk >> 5) & 511u)] >> (rk & 31)) & 1u) acc += i;
      }
    }
  };
  auto vec = [&](std::uint32_t i, const uint4& v) {
    const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (unsigned k = 0; k < 4; ++k) {
      element(i + 2 * k, w[k] & 0xffffu);
      element(i + 2 * k + 1, w[k] >> 16);
    }
  };
  if constexpr (L == layout::coalsnap) {
    static_assert(Wk == work::hist, "coalsnap counts");
    __shared__ std::uint32_t present[8];                   // classes seen (the probe's data: 112..124)
    __shared__ std::uint16_t starts[32 * 64];              // per lane range, per present class (its slot)
    if (lane < 8) present[lane] = lane == 3 ? 0xffff0000u : 0u;  // classes 112..127
    __syncwarp();
    const std::uint32_t vecs = n / V, range_vecs = (n + 32 * V - 1) / (32 * V);  // (R / V: whole ranges of 2^16 / 32)
    uint4 v[D];
    std::uint32_t s = lane;
#pragma unroll
    for (unsigned u = 0; u < D; ++u)
      if (s + u * 32 < vecs) v[u] = reinterpret_cast<const uint4*>(b)[s + u * 32];
    unsigned range = 0;
    // The counter words (class pairs) of the present classes, listed once (a decoder would append a pair when
    // one of its classes is first seen). S: the snapshot's form, 1 = a warp sum per class in a loop over the
    // mask, 2 = a warp sum per counter word (both 16-bit halves at once; a half's sum stays below 2^16 unless
    // one class holds the whole chunk, which a decoder would test for) over the listed words.
    __shared__ std::uint16_t pair_words[128];
    __shared__ unsigned n_pairs;
    if (lane == 0) {
      unsigned k = 0;
      for (unsigned x = 0; x < 256; x += 2)
        if ((present[x / 32] >> (x % 32)) & 3u) pair_words[k++] = static_cast<std::uint16_t>(x / 2);
      n_pairs = k;
    }
    __syncwarp();
    auto snapshot = [&](unsigned r) {  // the counts so far are the starts of range r
      if constexpr (S == 2) {
        const unsigned k = n_pairs;
        for (unsigned j = 0; j < k; ++j) {
          const std::uint32_t sum = __reduce_add_sync(0xffffffffu, ctr[pair_words[j] * 32u + lane]);
          if (lane == j % 32u && j < 32) reinterpret_cast<std::uint32_t*>(starts)[r * 32 + j] = sum;
        }
      } else {
        unsigned slot = 0;
        for (unsigned w = 0; w < 8; ++w)
          for (std::uint32_t m = present[w]; m != 0; m &= m - 1, ++slot) {
            const unsigned x = w * 32 + static_cast<unsigned>(__ffs(m) - 1);
            const std::uint32_t half = (ctr[ctr_at(x, lane)] >> ((x & 1u) * 16)) & 0xffffu;
            const std::uint32_t sum = __reduce_add_sync(0xffffffffu, half);
            if (lane == 0 && slot < 64) starts[r * 64 + slot] = static_cast<std::uint16_t>(sum);
          }
      }
    };
    for (; s < vecs; s += D * 32) {
      uint4 w[D];
#pragma unroll
      for (unsigned u = 0; u < D; ++u)
        if (s + (D + u) * 32 < vecs) w[u] = reinterpret_cast<const uint4*>(b)[s + (D + u) * 32];
#pragma unroll
      for (unsigned u = 0; u < D; ++u) {
        const std::uint32_t first_vec = s - lane + u * 32;  // (uniform: the step's first vector)
        if (first_vec < vecs && first_vec / range_vecs != range) {
          range = first_vec / range_vecs;
          __syncwarp();
          snapshot(range);
        }
        if (s + u * 32 < vecs) vec((s + u * 32) * V, v[u]);
      }
#pragma unroll
      for (unsigned u = 0; u < D; ++u) v[u] = w[u];
    }
    __syncwarp();
    if (lane < 32) acc += starts[lane * 64 + (acc & 15u)];
  } else if constexpr (L == layout::match || L == layout::matchref) {
    // D: tiles of 32 S elements loaded ahead (match). The bitmap: the counters' last 2048 words (2^16 ranks).
    constexpr unsigned G = 16, T = 32 * S, bitmap_words = 2048;
    static_assert(CtrWords >= bitmap_words + G, "match keeps its running counts and its bitmap in the counters' memory");
    std::uint32_t* const bitmap = ctr + CtrWords - bitmap_words;
    std::uint32_t* const running = ctr;
    __shared__ std::uint8_t of_class[256];
    for (unsigned x = lane; x < 256; x += 32) of_class[x] = static_cast<std::uint8_t>(x % G);
    for (unsigned w = lane; w < bitmap_words; w += 32) {  // ~0.8% of the ranks set, the same in every chunk
      std::uint32_t h = (w + 1) * 0x9E3779B9u;
      h ^= h >> 15;
      h *= 0x85EBCA6Bu;
      h ^= h >> 13;
      bitmap[w] = (h & 3u) == 0 ? 1u << ((h >> 8) & 31u) : 0u;
    }
    __syncwarp();
    auto group_of = [&](std::uint32_t bits) { return static_cast<unsigned>(of_class[(bits >> 7) & 0xffu]); };
    auto test = [&](unsigned g, std::uint32_t rk, std::uint32_t i) {
      const std::uint32_t bit = (g * 4096u + rk) & 0xffffu;  // (each group's ranks from its own offset)
      if ((bitmap[bit >> 5] >> (bit & 31)) & 1u) acc += i;
    };
    if constexpr (L == layout::matchref) {
      if (lane == 0) {
        std::uint32_t cnt[G] = {};
        for (std::uint32_t i = 0; i < n; ++i) {
          const unsigned g = group_of(b[i]);
          std::uint32_t rk = 0;
#pragma unroll
          for (unsigned q = 0; q < G; ++q)
            if (q == g) rk = cnt[q]++;
          test(g, rk, i);
        }
      }
    } else {
      const std::uint32_t tiles = n / T;
      std::uint32_t v[D][S];
      auto load = [&](std::uint32_t t, std::uint32_t (&to)[S]) {
#pragma unroll
        for (unsigned k = 0; k < S; ++k) to[k] = t < tiles ? b[t * T + 32 * k + lane] : 0u;
      };
#pragma unroll
      for (unsigned d = 0; d < D; ++d) load(d, v[d]);
      const unsigned below = (1u << lane) - 1u;
      for (std::uint32_t t = 0; t < tiles; t += D) {
#pragma unroll
        for (unsigned d = 0; d < D; ++d) {
          if (t + d >= tiles) break;
#pragma unroll
          for (unsigned k = 0; k < S; ++k) {
            const unsigned g = group_of(v[d][k]);
            const unsigned peers = __match_any_sync(0xffffffffu, g);
            const unsigned before = static_cast<unsigned>(__popc(peers & below));
            const std::uint32_t rk = running[g] + before;
            __syncwarp();
            if (before == 0) running[g] = rk + static_cast<unsigned>(__popc(peers));
            __syncwarp();
            test(g, rk, (t + d) * T + 32 * k + lane);
          }
          load(t + d + D, v[d]);
        }
      }
      // The elements past the last whole tile, in order, 32 at a time.
      for (std::uint32_t i0 = tiles * T; i0 < n; i0 += 32) {
        const std::uint32_t i = i0 + lane;
        const unsigned g = i < n ? group_of(b[i]) : G;  // (G: no group)
        const unsigned peers = __match_any_sync(0xffffffffu, g);
        const unsigned before = static_cast<unsigned>(__popc(peers & below));
        const std::uint32_t rk = g < G ? running[g] + before : 0u;
        __syncwarp();
        if (g < G && before == 0) running[g] = rk + static_cast<unsigned>(__popc(peers));
        __syncwarp();
        if (g < G) test(g, rk, i);
      }
    }
  } else if constexpr (L == layout::encrange || L == layout::enctile) {
    constexpr unsigned G = 16, gap = 117;
    __shared__ std::uint8_t of_class[256];
    __shared__ std::uint32_t mask[32], olds[32];
    for (unsigned x = lane; x < 256; x += 32) of_class[x] = static_cast<std::uint8_t>(x % G);
    for (unsigned w = lane; w < G * 32; w += 32) ctr[w] = 0;
    __syncwarp();
    auto group_of = [&](std::uint32_t bits) { return static_cast<unsigned>(of_class[(bits >> 7) & 0xffu]); };
    auto first_change_at = [&](std::uint32_t i) {  // chunk-relative, at or after i
      const std::uint64_t gi = first + i;
      return static_cast<std::uint32_t>((gi + gap - 1) / gap * gap - first);
    };
    if constexpr (L == layout::encrange) {
      const std::uint32_t R = (n + 32 * V - 1) / (32 * V) * V;
      const std::uint32_t lo = lane * R < n ? lane * R : n, hi = lo + R < n ? lo + R : n;
      std::uint32_t at = first_change_at(lo);
      lane_walk<D>(b, lo, hi, [&](std::uint32_t i0, const uint4& vec) {
        std::uint32_t e[8];
        words8(vec, e);
        unsigned g[8];
        std::uint32_t r[8];
#pragma unroll
        for (unsigned k = 0; k < 8; ++k) g[k] = group_of(e[k]);
#pragma unroll
        for (unsigned k = 0; k < 8; ++k) r[k] = atomicAdd(&ctr[g[k] * 32 + lane], 1u);
        if (at < i0 + V) {
#pragma unroll
          for (unsigned k = 0; k < 8; ++k)
            if (i0 + k == at) {
              acc += (g[k] << 24) | r[k];
              at += gap;
            }
        }
      });
    } else {
      constexpr unsigned T = 32 * S * V, slice = S * V;
      tile_walk<S>(b, n, lane, [&](std::uint32_t t, const uint4 (&v)[S]) {
        const std::uint32_t t0 = t * T, c0 = first_change_at(t0);
        const std::uint32_t m = c0 < t0 + T ? (t0 + T - 1 - c0) / gap + 1 : 0;  // (uniform; at most 9)
        // The tile's changes, lane j the j-th: its lane, its group (a load of the base), the sum before the tile.
        const std::uint32_t pos = c0 + lane * gap;
        const bool mine_j = lane < m;
        const unsigned lj = mine_j ? (pos - t0) / slice : 0u;
        const unsigned gj = mine_j ? group_of(b[pos]) : 0u;
        mask[lane] = 0;
        __syncwarp();
        if (mine_j) atomicOr(&mask[lj], 1u << (pos - t0 - lj * slice));
        // A warp sum per change over the lanes after (before the tile is counted) or before its lane (after).
        auto sums = [&](bool after) {
          std::uint32_t mine = 0;
          for (unsigned j = 0; j < m; ++j) {
            const unsigned g = __shfl_sync(0xffffffffu, gj, static_cast<int>(j)), l = __shfl_sync(0xffffffffu, lj, static_cast<int>(j));
            const std::uint32_t sum = __reduce_add_sync(0xffffffffu, (after ? lane > l : lane < l) ? ctr[g * 32 + lane] : 0u);
            if (lane == j) mine = sum;
          }
          return mine;
        };
        const std::uint32_t A = sums(true);
        __syncwarp();
        const std::uint32_t my = mask[lane];
        std::uint32_t j0 = static_cast<std::uint32_t>(__popc(my));
#pragma unroll
        for (unsigned o = 1; o < 32; o *= 2) {
          const std::uint32_t u = __shfl_up_sync(0xffffffffu, j0, o);
          if (lane >= o) j0 += u;
        }
        j0 -= static_cast<std::uint32_t>(__popc(my));
#pragma unroll
        for (unsigned u = 0; u < S; ++u) {
          std::uint32_t e[8];
          words8(v[u], e);
          unsigned g[8];
          std::uint32_t r[8];
#pragma unroll
          for (unsigned k = 0; k < 8; ++k) g[k] = group_of(e[k]);
#pragma unroll
          for (unsigned k = 0; k < 8; ++k) r[k] = atomicAdd(&ctr[g[k] * 32 + lane], 1u);
          if ((my >> (u * 8)) & 0xffu) {
#pragma unroll
            for (unsigned k = 0; k < 8; ++k)
              if ((my >> (u * 8 + k)) & 1u) olds[j0++] = r[k];
          }
        }
        __syncwarp();
        const std::uint32_t B = sums(false);
        if (mine_j) acc += (gj << 24) | (A + B + olds[lane]);
        __syncwarp();
      });
    }
  } else if constexpr (L == layout::tilescan) {
    constexpr unsigned T = 32 * S * V, G = 16;
    __shared__ std::uint32_t gbytes[G / 4 * 32];
    __shared__ std::uint8_t of_class[256];
    for (unsigned x = lane; x < 256; x += 32) of_class[x] = static_cast<std::uint8_t>(x % G);
    for (unsigned w = lane; w < G / 4 * 32; w += 32) gbytes[w] = 0;
    __syncwarp();
    std::uint32_t run_e[G / 4], run_o[G / 4];  // groups 4q, 4q + 2 / 4q + 1, 4q + 3 in 16-bit halves
#pragma unroll
    for (unsigned q = 0; q < G / 4; ++q) run_e[q] = run_o[q] = 0;
    auto group_of = [&](std::uint32_t bits) { return static_cast<unsigned>(of_class[(bits >> 7) & 0xffu]); };
    tile_walk<S>(b, n, lane, [&](std::uint32_t t, const uint4 (&v)[S]) {
#pragma unroll
      for (unsigned u = 0; u < S; ++u) {
        std::uint32_t e[8];
        words8(v[u], e);
#pragma unroll
        for (unsigned k = 0; k < 8; ++k) {
          const unsigned g = group_of(e[k]);
          atomicAdd(&gbytes[(g >> 2) * 32 + lane], 1u << ((g & 3u) * 8));
        }
      }
      __syncwarp();
#pragma unroll
      for (unsigned q = 0; q < G / 4; ++q) {
        const std::uint32_t by = gbytes[q * 32 + lane];
        gbytes[q * 32 + lane] = 0;
        const std::uint32_t even = by & 0x00ff00ffu, odd = (by >> 8) & 0x00ff00ffu;
        std::uint32_t ie = even, io = odd;
#pragma unroll
        for (unsigned o = 1; o < 32; o *= 2) {
          const std::uint32_t ue = __shfl_up_sync(0xffffffffu, ie, o), uo = __shfl_up_sync(0xffffffffu, io, o);
          if (lane >= o) {
            ie += ue;
            io += uo;
          }
        }
        const std::uint32_t se = run_e[q] + ie - even, so = run_o[q] + io - odd;
        ctr[(2 * q) * 32 + lane] = (se & 0xffffu) | (so << 16);
        ctr[(2 * q + 1) * 32 + lane] = (se >> 16) | (so & 0xffff0000u);
        run_e[q] += __shfl_sync(0xffffffffu, ie, 31);
        run_o[q] += __shfl_sync(0xffffffffu, io, 31);
      }
      __syncwarp();
#pragma unroll
      for (unsigned u = 0; u < S; ++u) {
        std::uint32_t e[8];
        words8(v[u], e);
        unsigned g[8];
        std::uint32_t rk[8];
#pragma unroll
        for (unsigned k = 0; k < 8; ++k) g[k] = group_of(e[k]);
#pragma unroll
        for (unsigned k = 0; k < 8; ++k) {
          const unsigned sh = (g[k] & 1u) * 16;
          rk[k] = (atomicAdd(&ctr[(g[k] >> 1) * 32 + lane], 1u << sh) >> sh) & 0xffffu;
        }
#pragma unroll
        for (unsigned k = 0; k < 8; ++k)
          if ((ctr[CtrWords - 512 + ((rk[k] >> 5) & 511u)] >> (rk[k] & 31)) & 1u) acc += t * T + (lane * S + u) * V + k;
      }
    });
  } else if constexpr (L == layout::tile) {
    constexpr unsigned T = 32 * S * V;
    const std::uint32_t tiles = tile_walk<S>(b, n, lane, [&](std::uint32_t t, const uint4 (&v)[S]) {
#pragma unroll
      for (unsigned u = 0; u < S; ++u) vec(t * T + (lane * S + u) * V, v[u]);
    });
    for (std::uint32_t i = tiles * T + lane; i < n; i += 32) element(i, b[i]);
  } else if constexpr (L == layout::coal) {
    // Step s: lane reads vector s * 32 + lane.
    const std::uint32_t vecs = n / V;
    std::uint32_t s = lane;
    uint4 v[D];
#pragma unroll
    for (unsigned u = 0; u < D; ++u)
      if (s + u * 32 < vecs) v[u] = reinterpret_cast<const uint4*>(b)[s + u * 32];
    for (; s < vecs; s += D * 32) {
      uint4 w[D];
#pragma unroll
      for (unsigned u = 0; u < D; ++u)
        if (s + (D + u) * 32 < vecs) w[u] = reinterpret_cast<const uint4*>(b)[s + (D + u) * 32];
#pragma unroll
      for (unsigned u = 0; u < D; ++u)
        if (s + u * 32 < vecs) vec((s + u * 32) * V, v[u]);
#pragma unroll
      for (unsigned u = 0; u < D; ++u) v[u] = w[u];
    }
  } else if constexpr (L == layout::xpose) {
    constexpr unsigned P = D, per = 32 / P;  // lanes a range takes, ranges a load instruction
    const std::uint32_t R = (n + 32 * V - 1) / (32 * V) * V;
    auto range_of = [&](unsigned l, std::uint32_t& lo, std::uint32_t& m) {
      lo = l * R < n ? l * R : n;
      const std::uint32_t hi = lo + R < n ? lo + R : n;
      m = (hi - lo) / V;
    };
    std::uint32_t lo = 0, m = 0;
    range_of(lane, lo, m);
    const std::uint32_t rounds = (R / V + P - 1) / P;  // (uniform)
    // Lane q fetches vector q % P of the round for ranges q / P + per * j.
    std::uint32_t olo[P], om[P];
#pragma unroll
    for (unsigned j = 0; j < P; ++j) range_of(lane / P + per * j, olo[j], om[j]);
    auto issue = [&](std::uint32_t r) {
      const std::uint32_t v = r * P + lane % P;
#pragma unroll
      for (unsigned j = 0; j < P; ++j) {
        if (r < rounds && v < om[j]) {
          const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&ring[((r % S) * P + lane % P) * 32 + lane / P + per * j]));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(b + olo[j] + v * V) : "memory");
        }
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    };
#pragma unroll
    for (unsigned u = 0; u + 1 < S; ++u) issue(u);
    for (std::uint32_t r = 0; r < rounds; ++r) {
      asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
      __syncwarp();  // (the round's vectors were fetched by other lanes; the slot refilled below was read by all)
      uint4 v[P];
#pragma unroll
      for (unsigned u = 0; u < P; ++u) v[u] = ring[((r % S) * P + u) * 32 + lane];
      issue(r + S - 1);
#pragma unroll
      for (unsigned u = 0; u < P; ++u)
        if (r * P + u < m) vec(lo + (r * P + u) * V, v[u]);
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    const std::uint32_t hi = lo + R < n ? lo + R : n;
    for (std::uint32_t i = lo + m * V; i < hi; ++i) element(i, b[i]);
  } else if constexpr (L == layout::async) {
    const std::uint32_t R = (n + 32 * V - 1) / (32 * V) * V;
    const std::uint32_t lo = lane * R < n ? lane * R : n;
    const std::uint32_t hi = lo + R < n ? lo + R : n;
    const std::uint32_t m = (hi - lo) / V;
    auto issue = [&](std::uint32_t j) {
      if (j < m) {
        const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&ring[(j % D) * 32 + lane]));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(b + lo + j * V) : "memory");
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    };
#pragma unroll
    for (unsigned u = 0; u < D; ++u) issue(u);
    for (std::uint32_t j = 0; j < m; ++j) {
      asm volatile("cp.async.wait_group %0;" ::"n"(D - 1) : "memory");
      const uint4 v = ring[(j % D) * 32 + lane];
      issue(j + D);
      vec(lo + j * V, v);
    }
    for (std::uint32_t i = lo + m * V; i < hi; ++i) element(i, b[i]);
  } else {
    const std::uint32_t R = (n + 32 * V - 1) / (32 * V) * V;
    const std::uint32_t stride = L == layout::skew ? R - V : R;
    const std::uint32_t lo = lane * stride < n ? lane * stride : n;
    const std::uint32_t hi = lane == 31 ? n : (lo + stride < n ? lo + stride : n);
    std::uint32_t i = lane_walk<D>(b, lo, hi, [&](std::uint32_t i0, const uint4& v) { vec(i0, v); });
    for (; i < hi; ++i) element(i, b[i]);
  }
  __syncwarp();
  acc += ctr[ctr_at((lane * 7) % ctr_classes, lane) + (acc & 1u)];  // (every variant keeps its counters' memory)
  atomicAdd(sink, acc);
}

// The memory floor: a grid-stride coalesced read of the same bytes at full occupancy.
__global__ void __launch_bounds__(256) read_kernel(const uint4* p, std::uint64_t vecs, std::uint32_t* sink) {
  std::uint32_t acc = 0;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < vecs; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) atomicAdd(sink, acc);
}

__global__ void fill_kernel(std::uint16_t* p, std::uint64_t n) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    // Exponents of real weights: ~a dozen values around 2^-7 (classes 112..124), mantissa and sign random.
    const unsigned e = 112 + static_cast<unsigned>(h % 13);
    p[i] = static_cast<std::uint16_t>(((h >> 20) & 0x8000u) | (e << 7) | ((h >> 8) & 0x7fu));
  }
}

template <class F>
float time_ms(F&& f, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  f();  // warm-up
  CHECK(cudaEventRecord(a));
  for (int r = 0; r < reps; ++r) f();
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaGetLastError());
  return ms / reps;
}

const char* name(layout l) {
  return l == layout::range ? "range" : l == layout::skew ? "skew" : l == layout::coal ? "coal" : l == layout::async ? "async" : l == layout::tile ? "tile" : l == layout::tilescan ? "tilescan" : l == layout::encrange ? "encrange" : l == layout::enctile ? "enctile" : l == layout::match ? "match" : l == layout::matchref ? "matchref" : l == layout::coalsnap ? "coalsnap" : "xpose";
}
const char* name(work w) { return w == work::sum ? "sum" : w == work::hist ? "hist" : "rank"; }

template <layout L, work Wk, unsigned D, unsigned S = 1, unsigned CtrWords = 128 * 32 + 512>
void run(const std::uint16_t* base, std::uint64_t numel, std::uint32_t* sink, int reps, float floor_ms) {
  const unsigned blocks = static_cast<unsigned>((numel + chunk - 1) / chunk);
  // One launch alone first: the lane-range variants (range, async, xpose) of a work must leave the same sum (each
  // lane visits its range's elements once, in order); coal and skew walk other ranges.
  CHECK(cudaMemset(sink, 0, 4));
  walk_kernel<L, Wk, D, S, CtrWords><<<blocks, 32>>>(base, numel, sink);
  std::uint32_t once = 0;
  CHECK(cudaMemcpy(&once, sink, 4, cudaMemcpyDeviceToHost));
  static std::uint32_t reference[3][2] = {};
  static bool seen[3][2] = {};
  const int wi = static_cast<int>(Wk), ci = CtrWords == 128 * 32 + 512 ? 0 : 1;
  if (L == layout::match || L == layout::matchref) {
    static std::uint32_t match_reference = 0;
    static bool match_seen = false;
    if (!match_seen) {
      match_seen = true;
      match_reference = once;
    } else if (once != match_reference) {
      std::printf("{\"error\": \"%s depth %u slots %u: sum %u, expected %u (the first match variant's)\"}\n", name(L), D, S, once, match_reference);
    }
  } else if (L == layout::coalsnap || L == layout::coal || L == layout::skew || L == layout::tile || L == layout::tilescan || L == layout::encrange || L == layout::enctile) {
  } else if (!seen[wi][ci]) {
    seen[wi][ci] = true;
    reference[wi][ci] = once;
  } else if (once != reference[wi][ci]) {
    std::printf("{\"error\": \"%s %s depth %u slots %u: sum %u, expected %u\"}\n", name(L), name(Wk), D, S, once, reference[wi][ci]);
  }
  const float ms = time_ms([&] { walk_kernel<L, Wk, D, S, CtrWords><<<blocks, 32>>>(base, numel, sink); }, reps);
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, walk_kernel<L, Wk, D, S, CtrWords>, 32, 0));
  std::printf("{\"layout\": \"%s\", \"work\": \"%s\", \"depth\": %u, \"slots\": %u, \"counter_kb\": %u, \"ms\": %.3f, \"x_floor\": %.2f, \"chunks_per_sm\": %d}\n",
              name(L), name(Wk), D, S, CtrWords * 4 / 1024, ms, ms / floor_ms, per_sm);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t numel = argc > 1 ? static_cast<std::uint64_t>(std::atof(argv[1])) : 7000000000ull;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  std::uint16_t* base = nullptr;
  std::uint32_t* sink = nullptr;
  CHECK(cudaMalloc(&base, numel * 2 + 16));
  CHECK(cudaMalloc(&sink, 4));
  fill_kernel<<<4096, 256>>>(base, numel);
  CHECK(cudaDeviceSynchronize());
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const float floor_ms = time_ms([&] { read_kernel<<<prop.multiProcessorCount * 8, 256>>>(reinterpret_cast<const uint4*>(base), numel / V, sink); }, reps);
  std::printf("{\"device\": \"%s\", \"numel\": %llu, \"read_floor_ms\": %.3f, \"read_GBps\": %.0f}\n", prop.name,
              static_cast<unsigned long long>(numel), floor_ms, numel * 2 / floor_ms / 1e6);
  if (argc > 3 && std::atoi(argv[3]) == 27) {  // session 27: tile beside range and coal, at both counter sizes
    constexpr unsigned small = 64 * 16 + 512 + 1212;
    run<layout::range, work::sum, 2>(base, numel, sink, reps, floor_ms);
    run<layout::coal, work::sum, 2>(base, numel, sink, reps, floor_ms);
    run<layout::coal, work::sum, 8>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::sum, 1, 4>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::sum, 1, 8>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::sum, 1, 16>(base, numel, sink, reps, floor_ms);
    run<layout::range, work::hist, 4>(base, numel, sink, reps, floor_ms);
    run<layout::coal, work::hist, 8>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::hist, 1, 4>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::hist, 1, 8>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::hist, 1, 16>(base, numel, sink, reps, floor_ms);
    run<layout::range, work::rank, 2, 1, small>(base, numel, sink, reps, floor_ms);
    run<layout::xpose, work::rank, 2, 2, small>(base, numel, sink, reps, floor_ms);
    run<layout::coal, work::rank, 2, 1, small>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::rank, 1, 4, small>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::rank, 1, 8, small>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::rank, 1, 16, small>(base, numel, sink, reps, floor_ms);
    CHECK(cudaFree(base));
    return 0;
  }
  if (argc > 3 && std::atoi(argv[3]) == 30) {  // session 30: the placing walk in position order by __match_any_sync
    constexpr unsigned match_words = 2048 + 64;  // the 2^16-bit bitmap and the running counts: ~8.3 KB a warp
    constexpr unsigned small = 64 * 16 + 512 + 1212;
    run<layout::coal, work::hist, 8>(base, numel, sink, reps, floor_ms);
    run<layout::range, work::hist, 4>(base, numel, sink, reps, floor_ms);
    run<layout::xpose, work::rank, 2, 2, small>(base, numel, sink, reps, floor_ms);
    run<layout::coalsnap, work::hist, 8>(base, numel, sink, reps, floor_ms);
    run<layout::coalsnap, work::hist, 4>(base, numel, sink, reps, floor_ms);
    run<layout::coalsnap, work::hist, 2>(base, numel, sink, reps, floor_ms);
    run<layout::coalsnap, work::hist, 8, 2>(base, numel, sink, reps, floor_ms);
    run<layout::coalsnap, work::hist, 4, 2>(base, numel, sink, reps, floor_ms);
    if (numel <= 100000000ull) run<layout::matchref, work::rank, 1, 1, match_words>(base, numel, sink, reps, floor_ms);
    run<layout::match, work::rank, 1, 8, match_words>(base, numel, sink, reps, floor_ms);
    run<layout::match, work::rank, 2, 8, match_words>(base, numel, sink, reps, floor_ms);
    run<layout::match, work::rank, 1, 16, match_words>(base, numel, sink, reps, floor_ms);
    run<layout::match, work::rank, 2, 4, match_words>(base, numel, sink, reps, floor_ms);
    run<layout::match, work::rank, 4, 4, match_words>(base, numel, sink, reps, floor_ms);
    CHECK(cudaFree(base));
    return 0;
  }
  if (argc > 3 && std::atoi(argv[3]) == 29) {  // session 27, call G: the encoder's ranking walk, lane ranges or tiles
    constexpr unsigned enc = 16 * 32 + 512 + 512;  // 16 groups' whole-word lane counters and room: ~6 KB
    run<layout::range, work::hist, 4>(base, numel, sink, reps, floor_ms);
    run<layout::encrange, work::rank, 2, 1, enc>(base, numel, sink, reps, floor_ms);
    run<layout::encrange, work::rank, 2, 1>(base, numel, sink, reps, floor_ms);
    run<layout::enctile, work::rank, 1, 2, enc>(base, numel, sink, reps, floor_ms);
    run<layout::enctile, work::rank, 1, 4, enc>(base, numel, sink, reps, floor_ms);
    run<layout::enctile, work::rank, 1, 4>(base, numel, sink, reps, floor_ms);
    run<layout::enctile, work::rank, 1, 8, enc>(base, numel, sink, reps, floor_ms);
    CHECK(cudaFree(base));
    return 0;
  }
  if (argc > 3 && std::atoi(argv[3]) == 28) {  // session 27, call F: the tiled placing walk with its per-tile scans
    constexpr unsigned small = 64 * 16 + 512 + 1212;
    run<layout::range, work::hist, 4>(base, numel, sink, reps, floor_ms);
    run<layout::range, work::rank, 2, 1, small>(base, numel, sink, reps, floor_ms);
    run<layout::xpose, work::rank, 2, 2, small>(base, numel, sink, reps, floor_ms);
    run<layout::tile, work::rank, 1, 4, small>(base, numel, sink, reps, floor_ms);
    run<layout::tilescan, work::rank, 1, 2, small>(base, numel, sink, reps, floor_ms);
    run<layout::tilescan, work::rank, 1, 4, small>(base, numel, sink, reps, floor_ms);
    run<layout::tilescan, work::rank, 1, 8, small>(base, numel, sink, reps, floor_ms);
    CHECK(cudaFree(base));
    return 0;
  }
  run<layout::range, work::sum, 2>(base, numel, sink, reps, floor_ms);
  run<layout::skew, work::sum, 2>(base, numel, sink, reps, floor_ms);
  run<layout::coal, work::sum, 2>(base, numel, sink, reps, floor_ms);
  run<layout::range, work::hist, 2>(base, numel, sink, reps, floor_ms);
  run<layout::skew, work::hist, 2>(base, numel, sink, reps, floor_ms);
  run<layout::coal, work::hist, 2>(base, numel, sink, reps, floor_ms);
  run<layout::range, work::rank, 2>(base, numel, sink, reps, floor_ms);
  run<layout::skew, work::rank, 2>(base, numel, sink, reps, floor_ms);
  run<layout::coal, work::rank, 2>(base, numel, sink, reps, floor_ms);
  run<layout::range, work::sum, 8>(base, numel, sink, reps, floor_ms);
  run<layout::range, work::hist, 8>(base, numel, sink, reps, floor_ms);
  run<layout::coal, work::hist, 8>(base, numel, sink, reps, floor_ms);
  run<layout::async, work::sum, 4>(base, numel, sink, reps, floor_ms);
  run<layout::async, work::sum, 8>(base, numel, sink, reps, floor_ms);
  run<layout::async, work::sum, 16>(base, numel, sink, reps, floor_ms);
  run<layout::async, work::hist, 8>(base, numel, sink, reps, floor_ms);
  run<layout::async, work::hist, 16>(base, numel, sink, reps, floor_ms);
  run<layout::async, work::rank, 8>(base, numel, sink, reps, floor_ms);
  run<layout::async, work::rank, 16>(base, numel, sink, reps, floor_ms);
  // Session 20: the transposed fetch, beside range at the same counters (18 KB, then the placing kernel's 11 KB).
  constexpr unsigned small = 64 * 16 + 512 + 1212;  // 64 groups of 16-bit lane counters, the bitmap, the rest: ~11 KB
  run<layout::range, work::rank, 2, 1, small>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::sum, 2, 3>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::hist, 2, 3>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::rank, 2, 3>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::rank, 2, 3, small>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::rank, 2, 2, small>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::rank, 4, 2, small>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::rank, 4, 3, small>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::rank, 8, 2, small>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::hist, 4, 2>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::hist, 4, 3>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::hist, 8, 2>(base, numel, sink, reps, floor_ms);
  run<layout::range, work::hist, 4, 1, small>(base, numel, sink, reps, floor_ms);
  run<layout::xpose, work::hist, 4, 3, small>(base, numel, sink, reps, floor_ms);
  CHECK(cudaFree(base));
  return 0;
}
