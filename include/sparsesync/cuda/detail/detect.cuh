// Change detection and compaction: the one pass of the encoder that reads the weights.
//
// A bucket's element space is cut into tiles of 2^tile_log2 elements (a tile never straddles a chunk). A block
// takes a few tiles in turn and reads base and target once with 16-byte streaming loads (when the tile lies in one
// segment and both copies are 16-byte aligned; otherwise element by element across segments: hundreds of tiny
// tensors share one launch), hashes the base elements if asked, finds changes with a per-thread mask, ranks them with
// one block scan of packed per-iteration counts, reserves room for the tile's changes with one atomicAdd, and
// writes (tile-relative u16 position, coded value) pairs there. Tiles land in scratch in any order; the
// per-tile (offset, count) table lets the chunk kernels read each chunk's changes in order.
// Scratch per change: 2 bytes + the element width (+ up to 7 padding entries per tile), never a dense copy.
#pragma once

#include <sparsesync/codec/value_mode.hpp>
#include <sparsesync/core/hash.hpp>
#include <sparsesync/cuda/detail/cp_async.cuh>
#include <sparsesync/cuda/types.cuh>

#include <cub/block/block_scan.cuh>

#include <cstring>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

template <class W, int Threads, int Iters>
struct tile_traits {
  static constexpr int vec = 16 / static_cast<int>(sizeof(W));
  static constexpr unsigned max_tile = static_cast<unsigned>(Threads * Iters * vec);
  static constexpr unsigned max_tile_log2 = static_cast<unsigned>(__builtin_ctz(max_tile));
  static_assert((max_tile & (max_tile - 1)) == 0, "sparsesync: tile size must be a power of two");
  static_assert(max_tile <= 65536, "sparsesync: tile-relative positions must fit 16 bits");
};

// Element k of a 16-byte vector of W words (k is a compile-time constant after unrolling: registers only).
template <class W>
SPARSESYNC_DEVICE W vec_get(const uint4& v, int k) {
  constexpr int per_word = 4 / static_cast<int>(sizeof(W));
  const int word = k / per_word;
  const unsigned shift = static_cast<unsigned>(8 * sizeof(W) * (k % per_word));
  const std::uint32_t x = word == 0 ? v.x : word == 1 ? v.y : word == 2 ? v.z : v.w;
  return static_cast<W>(x >> shift);
}

template <class W>
SPARSESYNC_DEVICE void vec_set(uint4& v, int k, W value) {
  constexpr int per_word = 4 / static_cast<int>(sizeof(W));
  const int word = k / per_word;
  const unsigned shift = static_cast<unsigned>(8 * sizeof(W) * (k % per_word));
  const std::uint32_t x = static_cast<std::uint32_t>(value) << shift;
  if (word == 0) v.x |= x;
  else if (word == 1) v.y |= x;
  else if (word == 2) v.z |= x;
  else v.w |= x;
}

// Bit k set where element k of the two 16-byte vectors differs (vec_get order), by SIMD compares of whole words.
template <class W>
SPARSESYNC_DEVICE unsigned change_bits(const uint4& a, const uint4& b) {
  const std::uint32_t x[4] = {a.x, a.y, a.z, a.w}, y[4] = {b.x, b.y, b.z, b.w};
  unsigned bits = 0;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    if constexpr (sizeof(W) == 1) {
      const std::uint32_t ne = __vcmpne4(x[w], y[w]);  // 0xFF per differing byte
      bits |= ((ne & 1u) | ((ne >> 7) & 2u) | ((ne >> 14) & 4u) | ((ne >> 21) & 8u)) << (4 * w);
    } else if constexpr (sizeof(W) == 2) {
      const std::uint32_t ne = __vcmpne2(x[w], y[w]);  // 0xFFFF per differing half
      bits |= ((ne & 1u) | ((ne >> 15) & 2u)) << (2 * w);
    } else {
      bits |= static_cast<unsigned>(x[w] != y[w]) << w;
    }
  }
  return bits;
}

// Largest s in [lo, hi) with segs[s].bucket_first <= e (segs[lo].bucket_first <= e is given), found by the
// whole warp (all 32 lanes call it with the same arguments) in ceil(log32(hi - lo)) rounds of independent
// loads. A binary search chains log2(hi - lo) dependent loads, which at the start of every tile would stall
// the block before it has issued a single load of the weights.
template <class Seg>
SPARSESYNC_DEVICE std::uint32_t warp_find_segment(const Seg* segs, std::uint32_t lo, std::uint32_t hi, std::uint64_t e) {
  const unsigned lane = threadIdx.x & 31u;
  while (hi - lo > 1) {
    const std::uint32_t step = (hi - lo + 31) / 32;  // lane i probes lo + i * step
    const std::uint32_t idx = lo + lane * step;
    const bool at_or_before = idx < hi && segs[idx].bucket_first <= e;
    const unsigned ballot = __ballot_sync(0xFFFFFFFFu, at_or_before);  // a prefix of the lanes, lane 0 included
    lo += (31u - static_cast<unsigned>(__clz(static_cast<int>(ballot)))) * step;
    hi = lo + step < hi ? lo + step : hi;
  }
  return lo;
}

struct tile_desc {
  std::uint32_t seg_lo;
  std::uint32_t seg_hi;  // inclusive
  bool fast;
};

// Every thread computes it (the same few broadcast loads, searched warp-wide): no barrier stands between a
// tile's start and its loads.
template <class W>
SPARSESYNC_DEVICE tile_desc describe_tile(const resolved_segment* segs, std::uint32_t segment_count, bool two, std::uint64_t first,
                                          std::uint32_t n, std::uint32_t tile_elems) {
  tile_desc d;
  d.seg_lo = warp_find_segment(segs, 0, segment_count, first);
  d.seg_hi = warp_find_segment(segs, d.seg_lo, segment_count, first + n - 1);
  d.fast = false;
  if (d.seg_lo == d.seg_hi && n == tile_elems) {
    const resolved_segment& sg = segs[d.seg_lo];
    const std::uint64_t rel = first - sg.bucket_first;
    const auto ap = reinterpret_cast<std::uintptr_t>(static_cast<const W*>(sg.a) + rel);
    const auto bp = two ? reinterpret_cast<std::uintptr_t>(static_cast<const W*>(sg.b) + rel) : 0;
    d.fast = ((ap | bp) & 15u) == 0;
  }
  return d;
}

// A tile's base (and target) words are loaded into registers, packed: thread t owns words [(it*Threads + t)*vec,
// +vec) for each it, in b[it] and t[it]; words past n read as 0 (and equal).
//
// The 16-byte loads of a fast tile (d.fast).
template <class W, int Threads, int Iters, bool Two>
SPARSESYNC_DEVICE void issue_fast_loads(const resolved_segment* segs, std::uint64_t first, std::uint32_t n, const tile_desc& d,
                                        uint4 (&b)[Iters], uint4 (&t)[Iters]) {
  constexpr int vec = 16 / static_cast<int>(sizeof(W));
  const resolved_segment& sg = segs[d.seg_lo];
  const std::uint64_t rel = first - sg.bucket_first;
  const W* bp = static_cast<const W*>(sg.a) + rel;
  const W* tp = Two ? static_cast<const W*>(sg.b) + rel : nullptr;
#pragma unroll
  for (int it = 0; it < Iters; ++it) {
    const std::uint32_t e0 = static_cast<std::uint32_t>((it * Threads + static_cast<int>(threadIdx.x)) * vec);
    b[it] = make_uint4(0, 0, 0, 0);
    t[it] = make_uint4(0, 0, 0, 0);
    if (e0 < n) {
      b[it] = __ldcs(reinterpret_cast<const uint4*>(bp + e0));
      if constexpr (Two) t[it] = __ldcs(reinterpret_cast<const uint4*>(tp + e0));
    }
  }
}

// The copies of a fast tile (d.fast: whole, in one segment, both copies 16-byte aligned) into a ring stage: thread
// t copies vectors it * Threads + t of both copies, the ones it reads back (detect_kernel's ring).
template <class W, int Threads, int Iters>
SPARSESYNC_DEVICE void issue_ring_loads(const resolved_segment* segs, std::uint64_t first, const tile_desc& d, uint4* ring_b,
                                        uint4* ring_t) {
  const resolved_segment& sg = segs[d.seg_lo];
  const std::uint64_t rel = first - sg.bucket_first;
  const auto* bp = reinterpret_cast<const uint4*>(static_cast<const W*>(sg.a) + rel);
  const auto* tp = reinterpret_cast<const uint4*>(static_cast<const W*>(sg.b) + rel);
#pragma unroll
  for (int it = 0; it < Iters; ++it) {
    const int slot = it * Threads + static_cast<int>(threadIdx.x);
    cp_async16(ring_b + slot, bp + slot);
    cp_async16(ring_t + slot, tp + slot);
  }
}

// Calls visit(it, k, flat_index) for each valid element of a fast tile whose loads were issued.
template <class W, int Threads, int Iters, class Visit>
SPARSESYNC_DEVICE void visit_fast_tile(const resolved_segment* segs, std::uint64_t first, std::uint32_t n, const tile_desc& d, Visit&& visit) {
  constexpr int vec = 16 / static_cast<int>(sizeof(W));
  const resolved_segment& sg = segs[d.seg_lo];
  const std::uint64_t flat0 = sg.flat_first + (first - sg.bucket_first);
#pragma unroll
  for (int it = 0; it < Iters; ++it) {
    const std::uint32_t e0 = static_cast<std::uint32_t>((it * Threads + static_cast<int>(threadIdx.x)) * vec);
#pragma unroll
    for (int k = 0; k < vec; ++k)
      if (e0 + k < n) visit(it, k, flat0 + e0 + k);
  }
}

// Element by element across segments, for a tile that is not fast (hundreds of tiny tensors in one tile).
template <class W, int Threads, int Iters, bool Two, class Visit>
SPARSESYNC_DEVICE void load_slow_tile(const resolved_segment* segs, std::uint64_t first, std::uint32_t n, const tile_desc& d,
                                      uint4 (&b)[Iters], uint4 (&t)[Iters], Visit&& visit) {
  constexpr int vec = 16 / static_cast<int>(sizeof(W));
#pragma unroll
  for (int it = 0; it < Iters; ++it) {
    const std::uint32_t e0 = static_cast<std::uint32_t>((it * Threads + static_cast<int>(threadIdx.x)) * vec);
    std::uint32_t s = e0 < n ? find_segment(segs, d.seg_lo, d.seg_hi + 1, first + e0) : d.seg_lo;
    b[it] = make_uint4(0, 0, 0, 0);
    t[it] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < vec; ++k) {
      if (e0 + k < n) {
        const std::uint64_t ge = first + e0 + k;
        while (ge >= segs[s].bucket_first + segs[s].count) ++s;
        const resolved_segment& sg = segs[s];
        const std::uint64_t rel = ge - sg.bucket_first;
        vec_set<W>(b[it], k, static_cast<const W*>(sg.a)[rel]);
        if constexpr (Two) vec_set<W>(t[it], k, static_cast<const W*>(sg.b)[rel]);
        visit(it, k, sg.flat_first + rel);
      }
    }
  }
}

// Loads a tile (as above), then calls visit(it, k, flat_index) for each valid element.
template <class W, int Threads, int Iters, bool Two, class Visit>
SPARSESYNC_DEVICE void load_tile(const resolved_segment* segs, std::uint64_t first, std::uint32_t n, const tile_desc& d,
                                 uint4 (&b)[Iters], uint4 (&t)[Iters], Visit&& visit) {
  if (d.fast) {
    issue_fast_loads<W, Threads, Iters, Two>(segs, first, n, d, b, t);
    visit_fast_tile<W, Threads, Iters>(segs, first, n, d, visit);
    return;
  }
  load_slow_tile<W, Threads, Iters, Two>(segs, first, n, d, b, t, visit);
}

// Adds v (one per thread) over the block into slots[slot]; every thread must call it.
template <int Threads>
SPARSESYNC_DEVICE void block_add_to_slot(std::uint64_t v, std::uint64_t* s_warp, std::uint64_t* slot) {
  v = warp_sum(v);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if ((threadIdx.x & 31u) == 0) s_warp[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint64_t s = 0;
#pragma unroll
    for (int w = 0; w < Threads / 32; ++w) s += s_warp[w];
    if (s) atomicAdd(reinterpret_cast<unsigned long long*>(slot), static_cast<unsigned long long>(s));
  }
}

// Resolves a bucket's segments against this call's tensor pointer arrays (one thread per segment).
template <class P>
SPARSESYNC_KERNEL void resolve_segments_kernel(const device_segment* segs, std::uint32_t count, const void* const* base,
                                               const void* const* target, unsigned width, resolved_segment* out) {
  const std::uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= count) return;
  const device_segment sg = segs[s];
  const std::uint64_t off = sg.tensor_offset * width;
  out[s] = {sg.bucket_first, sg.count, sg.flat_first, static_cast<const unsigned char*>(base[sg.tensor]) + off,
            target ? static_cast<const unsigned char*>(target[sg.tensor]) + off : nullptr};
}

struct detect_params {
  const resolved_segment* segments;
  std::uint32_t segment_count;
  std::uint64_t numel;
  unsigned tile_log2;
  value_mode mode;
  std::uint16_t* out_pos;  // scratch: tile-relative positions
  void* out_val;           // scratch: coded values (W each)
  std::uint64_t capacity;  // entries in out_pos / out_val
  std::uint64_t* tile_off;
  std::uint32_t* tile_cnt;
  std::uint64_t* allocated;  // entries reserved so far (may exceed capacity: then nothing past it is written)
  std::uint64_t* base_slots;
  std::uint64_t* delta_slots;
  void* out_old;  // non-null: fused snapshot advance (encode_config::advance_base); the old bits of each change go here
};

// Tiles per detect block (grid-stride): a block's start is paid once per several tiles. On an H200, 7e9 elements at
// 1%: 8.06 ms with one tile per block, 7.60 with 8, read floor 6.22 (session 12, call C; 2 to 16 within 0.1 ms;
// loading the next tile before processing this one doubled the registers and lost: 8.2-10 ms). Not persistent:
// blocks still retire every few tiles, so kernels of higher priority (the device links' sends) and of other lanes
// get onto the SMs within microseconds.
inline constexpr unsigned detect_tiles_per_block = 8;

inline unsigned detect_grid(std::uint64_t num_tiles) {
  return static_cast<unsigned>((num_tiles + detect_tiles_per_block - 1) / detect_tiles_per_block);
}

// Tiles blockIdx.x, + gridDim.x, ... Phase 1 (per thread, uniform work): 16-byte loads, base hashes (or, with a known
// base, SIMD word compares only), change mask. A block scan ranks the changes; thread 0 reserves scratch (its
// atomic overlaps the staging). Phase 2: each change's position, old and new bits are staged in shared memory at
// its rank, then the changes are processed compacted, thread i taking change i: checksum deltas (no divergence: a
// warp never hashes for one changed lane while 31 wait) and coalesced scratch writes. The checksum partial sums
// are reduced once per block. Shared memory per block: room for every element of a tile changing.
//
// With a ring (detect_stages_v<P> = S >= 2) the block's next S - 1 fast tiles are in flight into shared memory
// while it works on this one: without it each tile's loads were waited for before its work, and a block kept
// bytes in flight only part of the time (7.26 ms for 7e9 BF16 on an H200 against a 6.2 ms read, session 20).
// The ring then also holds the old and new bits that the compacted pass reads back at each change's position.
template <class W, class P, bool HashBase>
SPARSESYNC_KERNEL void __launch_bounds__(P::detect_threads, P::detect_min_blocks) detect_kernel(detect_params p) {
  constexpr int threads = P::detect_threads;
  constexpr int iters = P::detect_iters;
  constexpr int vec = 16 / static_cast<int>(sizeof(W));
  constexpr int tile_max = threads * iters * vec;
  using scan_t = cub::BlockScan<std::uint64_t, threads>;
  // The ring where it fits in static shared memory beside the positions (not for 1-byte words: 2^13-element tiles).
  constexpr bool ring_fits = sizeof(typename scan_t::TempStorage) + tile_max * 2 + detect_stages_v<P> * 2 * 16 * threads * iters +
                                 16 * threads / 32 + 8 <= 48 * 1024;
  constexpr int stages = ring_fits ? detect_stages_v<P> : 0;
  constexpr bool ringed = stages > 0;
  constexpr int staged = ringed ? 1 : tile_max;               // old and new bits staged per change (else read from the ring)
  constexpr int ring_vectors = ringed ? threads * iters : 1;  // 16-byte vectors of one copy of a tile
  static_assert(sizeof(typename scan_t::TempStorage) + tile_max * 2 + staged * 2 * sizeof(W) + (ringed ? stages * 2 * 16 * ring_vectors : 0) +
                        16 * threads / 32 + 8 <= 48 * 1024,
                "sparsesync: detect tile too large for static shared memory; lower detect_iters, detect_threads or detect_stages");
  __shared__ typename scan_t::TempStorage scan_tmp;
  // The tile's changes in order: tile-relative position, old and new bits (room for every element).
  __shared__ std::uint16_t s_pos[tile_max];
  __shared__ W s_old[staged];
  __shared__ W s_new[staged];
  __shared__ uint4 s_ring[ringed ? stages : 1][2][ring_vectors];  // per stage: the base's vectors, then the target's
  __shared__ std::uint64_t s_warp[2][threads / 32];
  __shared__ std::uint64_t s_off;

  const std::uint32_t tile_elems = 1u << p.tile_log2;
  const std::uint64_t num_tiles = (p.numel + tile_elems - 1) >> p.tile_log2;
  constexpr std::uint64_t vec_mask = (std::uint64_t{1} << vec) - 1;
  W* vals = static_cast<W*>(p.out_val);
  W* olds = static_cast<W*>(p.out_old);
  std::uint64_t base_sum = 0, delta_sum = 0;

  uint4 b[iters], t[iters];
  // The ring: tiles blockIdx.x + j * gridDim.x (j < stages - 1) described and, when fast, in flight; one commit
  // group per tile, empty for a slow one, so that a wait counts tiles.
  tile_desc ahead[ringed ? stages - 1 : 1];
  const auto describe_at = [&](auto tl) {
    const std::uint64_t f = tl << p.tile_log2;
    return describe_tile<W>(p.segments, p.segment_count, true, f, static_cast<std::uint32_t>(p.numel - f < tile_elems ? p.numel - f : tile_elems),
                            tile_elems);
  };
  const auto prefetch = [&](auto tl, unsigned stage) -> tile_desc {  // (generic: instantiated only with the ring)
    tile_desc dn{0, 0, false};
    if (tl < num_tiles) {
      dn = describe_at(tl);
      if (dn.fast) issue_ring_loads<W, threads, iters>(p.segments, tl << p.tile_log2, dn, s_ring[stage][0], s_ring[stage][1]);
    }
    cp_async_commit();
    return dn;
  };
  if constexpr (ringed) {
#pragma unroll
    for (int j = 0; j < stages - 1; ++j) ahead[j] = prefetch(blockIdx.x + static_cast<std::uint64_t>(j) * gridDim.x, static_cast<unsigned>(j));
  }
  unsigned stage = 0;  // the ring's stage of this tile
  for (std::uint64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const std::uint64_t first = tile << p.tile_log2;
    const std::uint32_t n = static_cast<std::uint32_t>(p.numel - first < tile_elems ? p.numel - first : tile_elems);
    tile_desc d;
    if constexpr (ringed) {
      d = ahead[0];
#pragma unroll
      for (int j = 0; j + 1 < stages - 1; ++j) ahead[j] = ahead[j + 1];
      const unsigned last = stage + stages - 1 < stages ? stage + stages - 1 : stage - 1;  // (stage + stages - 1) % stages
      ahead[stages - 2] = prefetch(tile + static_cast<std::uint64_t>(stages - 1) * gridDim.x, last);
      cp_async_wait<stages - 1>();  // this tile's copies (the thread's own) have landed
      if (d.fast) {
#pragma unroll
        for (int it = 0; it < iters; ++it) {
          const int slot = it * threads + static_cast<int>(threadIdx.x);
          b[it] = s_ring[stage][0][slot];
          t[it] = s_ring[stage][1][slot];
        }
      }
    } else {
      d = describe_tile<W>(p.segments, p.segment_count, true, first, n, tile_elems);
      if (d.fast) issue_fast_loads<W, threads, iters, true>(p.segments, first, n, d, b, t);
    }
    std::uint64_t mask = 0;
    const auto visit = [&](int it, int k, std::uint64_t flat) {
      const W bw = vec_get<W>(b[it], k), tw = vec_get<W>(t[it], k);
      if constexpr (HashBase) base_sum += element_hash(flat, bw);
      if (bw != tw) mask |= std::uint64_t{1} << (it * vec + k);
    };
    if (d.fast && !HashBase) {
      // Only the change mask is needed: SIMD compares of whole words (words past n were loaded as zeros on both
      // sides, so they never count as changed).
#pragma unroll
      for (int it = 0; it < iters; ++it) mask |= static_cast<std::uint64_t>(change_bits<W>(b[it], t[it])) << (it * vec);
    } else if (d.fast) {
      visit_fast_tile<W, threads, iters>(p.segments, first, n, d, visit);
    } else {
      load_slow_tile<W, threads, iters, true>(p.segments, first, n, d, b, t, visit);
      if constexpr (ringed) {  // where the compacted pass reads the bits back
#pragma unroll
        for (int it = 0; it < iters; ++it) {
          const int slot = it * threads + static_cast<int>(threadIdx.x);
          s_ring[stage][0][slot] = b[it];
          s_ring[stage][1][slot] = t[it];
        }
      }
    }
    // Rank the changes: counts per iteration packed in 16-bit fields, one block scan.
    std::uint64_t packed = 0;
#pragma unroll
    for (int it = 0; it < iters; ++it) packed |= static_cast<std::uint64_t>(__popcll((mask >> (it * vec)) & vec_mask)) << (16 * it);
    std::uint64_t prefix = 0, agg = 0;
    scan_t(scan_tmp).ExclusiveSum(packed, prefix, agg);
    std::uint32_t total = 0;
#pragma unroll
    for (int it = 0; it < iters; ++it) total += static_cast<std::uint32_t>((agg >> (16 * it)) & 0xFFFF);
    const std::uint32_t padded = (total + 7) & ~7u;
    if (threadIdx.x == 0) {
      std::uint64_t off = 0;
      if (total) off = atomicAdd(reinterpret_cast<unsigned long long*>(p.allocated), static_cast<unsigned long long>(padded));
      p.tile_off[tile] = off;
      p.tile_cnt[tile] = total;
      s_off = off;
    }
    std::uint32_t base_rank = 0;
#pragma unroll
    for (int it = 0; it < iters; ++it) {
      std::uint32_t rank = base_rank + static_cast<std::uint32_t>((prefix >> (16 * it)) & 0xFFFF);
      const std::uint32_t e0 = static_cast<std::uint32_t>((it * threads + static_cast<int>(threadIdx.x)) * vec);
      // Only the set bits: at RL densities a thread has none or one per iteration. Only changes go to shared
      // memory, not the whole tile: the compacted pass then reads them in order, conflict-free.
      for (std::uint64_t m = (mask >> (it * vec)) & vec_mask; m != 0; m &= m - 1) {
        const int k = __ffsll(static_cast<long long>(m)) - 1;
        s_pos[rank] = static_cast<std::uint16_t>(e0 + static_cast<std::uint32_t>(k));
        if constexpr (!ringed) {
          s_old[rank] = vec_get<W>(b[it], k);
          s_new[rank] = vec_get<W>(t[it], k);
        }
        ++rank;
      }
      base_rank += static_cast<std::uint32_t>((agg >> (16 * it)) & 0xFFFF);
    }
    __syncthreads();  // staging, s_off and the ring's stage (each thread waited for its own copies) are visible

    const std::uint64_t off = s_off;
    const bool store = total != 0 && off + padded <= p.capacity;
    const bool advance = store && p.out_old != nullptr;  // block-uniform
    if (advance && d.fast) {
      // The target over the base, a 16-byte vector where it changed and its neighbour (the other half of the 32-byte
      // sector, when the tile is so aligned) with it: whole sectors are written, none is read back. Unchanged
      // elements get their own bits.
      const resolved_segment& sg = p.segments[d.seg_lo];
      W* bp = const_cast<W*>(static_cast<const W*>(sg.a)) + (first - sg.bucket_first);  // the caller's snapshot: advancing it is the point
#pragma unroll
      for (int it = 0; it < iters; ++it) {
        const int slot = it * threads + static_cast<int>(threadIdx.x);
        const bool here = ((mask >> (it * vec)) & vec_mask) != 0;
        const bool pair = __shfl_xor_sync(0xFFFFFFFFu, here, 1) || here;
        if (pair) reinterpret_cast<uint4*>(bp)[slot] = t[it];
      }
    }
    const std::uint64_t flat0 = d.fast ? p.segments[d.seg_lo].flat_first + (first - p.segments[d.seg_lo].bucket_first) : 0;
    for (std::uint32_t i = threadIdx.x; i < total; i += threads) {
      const std::uint32_t pos = s_pos[i];
      W ow, nw;
      if constexpr (ringed) {
        ow = reinterpret_cast<const W*>(s_ring[stage][0])[pos];
        nw = reinterpret_cast<const W*>(s_ring[stage][1])[pos];
      } else {
        ow = s_old[i];
        nw = s_new[i];
      }
      std::uint64_t flat = flat0 + pos;
      if (!d.fast) {
        const resolved_segment& sg = p.segments[find_segment(p.segments, d.seg_lo, d.seg_hi + 1, first + pos)];
        flat = sg.flat_first + (first + pos - sg.bucket_first);
        if (advance) const_cast<W*>(static_cast<const W*>(sg.a))[first + pos - sg.bucket_first] = nw;
      }
      delta_sum += element_hash(flat, nw) - element_hash(flat, ow);
      if (store) {
        p.out_pos[off + i] = static_cast<std::uint16_t>(pos);
        vals[off + i] = code_value<W>(p.mode, ow, nw);
        if (advance) olds[off + i] = ow;
      }
    }
    if (store && threadIdx.x < padded - total) {  // zero the padding so that readers of whole groups of 8 see defined bytes
      p.out_pos[off + total + threadIdx.x] = 0;
      vals[off + total + threadIdx.x] = 0;
    }
    __syncthreads();  // the next tile reuses the shared staging; the next prefetch refills this tile's stage
    if constexpr (ringed) stage = stage + 1 < stages ? stage + 1 : 0;
  }
  if constexpr (ringed) cp_async_wait<0>();  // (the prefetches past the last tile are empty groups)

  // Both checksum partial sums in one reduction.
  const std::uint64_t bs = warp_sum(base_sum), ds = warp_sum(delta_sum);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if ((threadIdx.x & 31u) == 0) {
    s_warp[0][warp] = bs;
    s_warp[1][warp] = ds;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint64_t sb = 0, sd = 0;
#pragma unroll
    for (int w = 0; w < threads / 32; ++w) {
      sb += s_warp[0][w];
      sd += s_warp[1][w];
    }
    const unsigned slot = blockIdx.x % hash_slots;
    if (HashBase && sb) atomicAdd(reinterpret_cast<unsigned long long*>(p.base_slots + slot), static_cast<unsigned long long>(sb));
    if (sd) atomicAdd(reinterpret_cast<unsigned long long*>(p.delta_slots + slot), static_cast<unsigned long long>(sd));
  }
}

// Content checksum of a bucket's elements (one copy), for apply's base check. Persistent blocks loop over
// the tiles; the element count comes from device memory (a received bucket header).
struct hash_params {
  const resolved_segment* segments;
  const std::uint32_t* segment_count;  // device
  const std::uint64_t* numel;          // device
  unsigned tile_log2;
  std::uint64_t* slots;
  const int* skip;  // device flag: nonzero = do nothing (bucket already rejected)
};

// Every thread of the block must call it (it synchronizes).
template <class W, class P>
SPARSESYNC_DEVICE void hash_elements(const hash_params& p) {
  constexpr int threads = P::detect_threads;
  constexpr int iters = P::detect_iters;
  __shared__ std::uint64_t s_warp[threads / 32];
  if (*p.skip) return;
  const std::uint64_t numel = *p.numel;
  const std::uint32_t segment_count = *p.segment_count;
  const std::uint32_t tile_elems = 1u << p.tile_log2;
  const std::uint64_t tiles = (numel + tile_elems - 1) >> p.tile_log2;
  std::uint64_t sum = 0;
  for (std::uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::uint64_t first = tile << p.tile_log2;
    const std::uint32_t n = static_cast<std::uint32_t>(numel - first < tile_elems ? numel - first : tile_elems);
    const tile_desc d = describe_tile<W>(p.segments, segment_count, false, first, n, tile_elems);
    uint4 b[iters], t[iters];
    load_tile<W, threads, iters, false>(p.segments, first, n, d, b, t,
                                        [&](int it, int k, std::uint64_t flat) { sum += element_hash(flat, vec_get<W>(b[it], k)); });
  }
  block_add_to_slot<threads>(sum, s_warp, p.slots + blockIdx.x % hash_slots);
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
