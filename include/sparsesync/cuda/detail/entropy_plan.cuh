// The GPU entropy encoder's size pass, a warp per chunk (the bytes are FORMAT.md 3.4.1's, as the host codec
// writes them). The warp reads the chunk's base twice, counting into lane-private counters in shared memory
// (no bank conflicts: lane L owns bank L; advanced with atomics, as the decoder's): first coalesced, for the class
// histogram (which gives the groups; only its totals count), then each lane its own contiguous 1/32 of the chunk,
// to give each change its rank among its group's elements on the lane's range.
// A warp scan of the counters turns those into ranks in the chunk. The changes are then counting-sorted by
// group (stable: position order inside a group) into a per-chunk region of (gap, value code) words, each
// group's parameters fitted by the warp over its region (costs reduced across lanes), and rice's size for
// the same changes found in the same way. The write pass (a thread per chunk) only streams the region, the
// fitted parameters and the values: no base read, no search.
#pragma once

#include <sparsesync/codec/entropy_params.hpp>
#include <sparsesync/codec/rice_params.hpp>
#include <sparsesync/cuda/detail/detect.cuh>
#include <sparsesync/cuda/detail/encode_kernels.cuh>
#include <sparsesync/cuda/detail/entropy_codec.cuh>
#include <sparsesync/cuda/detail/entropy_warp.cuh>
#include <sparsesync/cuda/detail/warp_decode.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

// A group's fitted header in one word: size (25 bits: up to 2^24), changes (25), k_gap (5), k_val (5).
SPARSESYNC_HD std::uint64_t entropy_pack_group(std::uint32_t size, std::uint32_t changes, unsigned k_gap, unsigned k_val) {
  return std::uint64_t{size} | (std::uint64_t{changes} << 25) | (std::uint64_t{k_gap} << 50) | (std::uint64_t{k_val} << 55);
}
SPARSESYNC_HD std::uint32_t entropy_group_size(std::uint64_t e) { return static_cast<std::uint32_t>(e & 0x1FFFFFFu); }
SPARSESYNC_HD std::uint32_t entropy_group_changes(std::uint64_t e) { return static_cast<std::uint32_t>((e >> 25) & 0x1FFFFFFu); }
SPARSESYNC_HD unsigned entropy_group_k_gap(std::uint64_t e) { return static_cast<unsigned>((e >> 50) & 31u); }
SPARSESYNC_HD unsigned entropy_group_k_val(std::uint64_t e) { return static_cast<unsigned>((e >> 55) & 31u); }

// What the size pass leaves for the write pass, per chunk.
struct entropy_plan_scratch {
  std::uint64_t* groups = nullptr;     // chunk c's group headers at [c * class_count, + G)
  std::uint64_t* region = nullptr;     // per change: gap | value code << 32, chunk by chunk in group order
  std::uint64_t* region_at = nullptr;  // per chunk: its first region word
  std::uint32_t* group_count = nullptr;  // per chunk: G
  unsigned long long* region_next = nullptr;  // allocation cursor (zeroed before the size pass)
};

// How the size pass counts a chunk's classes and ranks (entropy_plan_kernel's Mode):
//  - bytes: chunks of at most 2^16 elements, the class histogram in bytes (entropy_byte_histogram) and the ranks
//    in 32-bit lane counters for at most entropy_plan_byte_groups groups, all in 8 KB: 10.5 KB a warp for BF16
//    and at most 96 registers, so 20 chunks are in flight per SM instead of 12 (session 16, call A, H100, 7e9 BF16
//    at 0.72%: encode 38.5 -> 36.2 ms). A chunk with more groups (random bit patterns: the real RL stream's chunks
//    have 14-16) is marked and left to the next pass. Whole-word counters: a rank is the atomic's old value as it
//    is, where 16-bit halves took five instructions an element for the word, the half and the extraction, and the
//    extraction, hoisted above the walk's test for a change, made each vector wait for its eight atomics (the
//    SASS, session 20);
//  - deferred: the chunks the bytes pass left, with 16-bit lane counters for every class (18 KB a warp);
//  - wide: chunks longer than 2^16, 32-bit lane counters.
enum class entropy_plan_mode { bytes, deferred, wide };
// A chunk the bytes pass left for the deferred pass (in entropy_plan_scratch::group_count).
inline constexpr std::uint32_t entropy_plan_left = ~std::uint32_t{0};

template <class W>
inline constexpr unsigned entropy_plan_byte_groups = entropy_params::class_count<W> < 64 ? entropy_params::class_count<W> : 64u;
// The ranks' lane counters: whole words in the bytes pass (see above), 16-bit halves in the others.
template <entropy_plan_mode Mode>
inline constexpr bool entropy_plan_narrow_ranks = Mode == entropy_plan_mode::deferred;

// The size pass's shared memory. The per-group slot tables of step 5 (cursor, next_rank) reuse the counters'
// words once the ranks are final.
template <class W, entropy_plan_mode Mode>
struct entropy_warp_smem {
  static constexpr unsigned K = entropy_params::class_count<W>;
  static constexpr bool narrow = entropy_plan_narrow_ranks<Mode>;
  static constexpr unsigned max3(unsigned a, unsigned b, unsigned c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }
  static constexpr unsigned words = Mode == entropy_plan_mode::bytes
                                        ? max3(entropy_byte_histogram::words(K), entropy_lane_counters<narrow>::words(entropy_plan_byte_groups<W>), 2 * K)
                                        : max3(entropy_lane_counters<narrow>::words(K), 2 * K, 0);
  std::uint32_t cnt[words];
  std::uint32_t size[K];      // class histogram, then group sizes
  union {
    std::uint32_t changes[K];  // per group (and, while the bytes pass counts classes, the histogram's overflow)
    // During the ranking walk, each lane's next staged change (entropy_fetch_ahead); a slot of its own would cost
    // the bytes pass its 20th warp an SM.
    std::uint64_t next_change[32];
  };
  std::uint8_t of_class[K];
  SPARSESYNC_DEVICE std::uint32_t* cursor() { return cnt; }         // per group: next region slot (chunk-relative); then its end
  SPARSESYNC_DEVICE std::uint32_t* next_rank() { return cnt + K; }  // per group: rank after its last placed change
};

// f(act, pos, slot) on all lanes for each group of 32 consecutive changes of the chunk.
template <class F>
SPARSESYNC_DEVICE void entropy_warp_changes(const chunk_pass_params& p, std::uint64_t t0, std::uint64_t t1, F&& f) {
  const unsigned lane = lane_id();
  for (std::uint64_t t = t0; t < t1; ++t) {
    const std::uint32_t cnt = p.tile_cnt[t];
    if (cnt == 0) continue;
    const std::uint64_t off = p.tile_off[t];
    const std::uint32_t base = static_cast<std::uint32_t>(t - t0) << p.tile_log2;
    for (std::uint32_t i0 = 0; i0 < cnt; i0 += 32) {
      const std::uint32_t i = i0 + lane;
      const bool act = i < cnt;
      f(act, act ? base + p.pos[off + i] : 0u, off + i);
    }
  }
}

// entropy_warp_changes with each change's gap in rice's sense (from the position after the change before it).
template <class F>
SPARSESYNC_DEVICE void entropy_warp_rice_gaps(const chunk_pass_params& p, std::uint64_t t0, std::uint64_t t1, F&& f) {
  const unsigned lane = lane_id();
  std::uint32_t carry = 0;  // position after the previous group of 32's last change
  entropy_warp_changes(p, t0, t1, [&](bool act, std::uint32_t pos, std::uint64_t slot) {
    const std::uint32_t up = __shfl_up_sync(full_warp, pos + 1, 1);
    const std::uint32_t next = lane == 0 ? carry : up;
    f(act, pos, slot, pos - next);
    const unsigned last = 31u - static_cast<unsigned>(__clz(static_cast<int>(__ballot_sync(full_warp, act))));
    carry = __shfl_sync(full_warp, pos + 1, last);
  });
}

// A change's ulp value code (zigzag(delta) - 1), as rice and the class body code it.
template <class W>
SPARSESYNC_DEVICE std::uint32_t entropy_value_code(const chunk_pass_params& p, std::uint64_t slot) {
  return static_cast<std::uint32_t>(zigzag<W>(static_cast<const W*>(p.val)[slot])) - 1u;
}

// The fewest bits any rice parameter codes v in, for a gap below 2^24 or a value code of a word (v's width b is at
// most the largest parameter + 1 there): b + 1 at parameter b - 1, 1 for v = 0. The host's rice::gap_floor and
// value_floor give the same.
SPARSESYNC_DEVICE std::uint32_t entropy_rice_floor(std::uint32_t v) {
  return 64u - static_cast<std::uint32_t>(__clzll(static_cast<long long>(2 * std::uint64_t{v} + 1)));
}

// The ranking walk reads the base this many 16-byte vectors ahead per lane (no chain from element to element).
// Each step unrolls the per-element code for all of them, and less of it runs faster (session 13, H100, encode at
// 7e9: 8 ahead 59.4 ms, 4 ahead 52.1 (call I), 2 ahead 43.6 (call K); session 14, with the ranking walk batched per
// vector: 4 ahead 44.6, 2 ahead 40.3 (call C), 1 ahead 42.5 (call G); session 15, call G: 3 ahead 41.5 against 38.5),
// and compiles faster (nvcc -O3 of the encoder's dispatch: 30 s with 8, 22 s with 4). A walk alone
// (bench/gpu/entropy_walk_probe.cu) is faster 8 ahead: it is the per-element code, with 11-12 warps an SM, that
// does not hide its latency. With 20 warps an SM (byte histogram, session 16) 2 ahead is still the best: 3 ahead
// 38.9, 4 ahead 41.2 against 36.2 (call B); 1 ahead 34.1 against 34.0 with the histogram 2 ahead (call D).
inline constexpr unsigned entropy_plan_depth = 2;
// The class histogram's coalesced walk (entropy_warp_walk_any_order), vectors ahead per lane. Session 15, call D
// (11-12 warps an SM), encode at 7e9 on an H100: 4 ahead 38.66 / 38.67 ms, 8 ahead 38.51-38.56. Session 16, 20
// warps an SM: 8 ahead 36.18 / 36.24, 4 ahead 34.85-34.91 (call B), 3 ahead 34.57 / 34.60, 2 ahead 34.40-34.51
// (calls C, D), 1 ahead 33.96 / 33.98 (call D). (Our reading: the byte histogram's atomics return counts that it
// checks, and fewer vectors in flight leave more of the warp's registers and issue slots to that.)
inline constexpr unsigned entropy_histogram_depth = 1;

template <class W, class P, entropy_plan_mode Mode>
SPARSESYNC_KERNEL void __launch_bounds__(32, Mode == entropy_plan_mode::bytes ? 20 : 1) entropy_plan_kernel(chunk_pass_params p, entropy_plan_scratch e) {
  constexpr unsigned K = entropy_params::class_count<W>;
  constexpr unsigned wbits = 8 * sizeof(W);
  __shared__ entropy_warp_smem<W, Mode> s;
  const entropy_lane_counters<entropy_warp_smem<W, Mode>::narrow> ctr{s.cnt};
  const std::uint32_t c = blockIdx.x;
  const unsigned lane = lane_id();
  if (c >= p.chunk_count || p.ctr->allocated > p.capacity) return;
  if (Mode == entropy_plan_mode::deferred && e.group_count[c] != entropy_plan_left) return;  // (the bytes pass planned it)
  const std::uint64_t per = std::uint64_t{1} << (p.log2_chunk - p.tile_log2);
  const std::uint64_t t0 = c * per;
  const std::uint64_t t1 = t0 + per < p.num_tiles ? t0 + per : p.num_tiles;
  std::uint32_t n = 0;
  for (std::uint64_t t = t0 + lane; t < t1; t += 32) n += p.tile_cnt[t];
  n = entropy_warp_add(n);
  const bool ulp = p.mode == value_mode::ulp;
  if (n == 0) {
    if (lane == 0) {
      p.plans[c] = chunk_plan{0, 0, 0, entropy_params::tag_rice};
      p.chunk_bytes[c] = 0;
      e.group_count[c] = 0;
    }
    return;
  }
  const std::uint32_t numel_c = chunk_numel(p.numel, p.log2_chunk, c);
  const std::uint64_t first = std::uint64_t{c} << p.log2_chunk;
  std::uint32_t lo = 0, hi = 0;
  const std::uint32_t R = entropy_lane_range<W>(numel_c, lane, lo, hi);
  const W* fast = entropy_fast_base<W>(p.segs, p.segment_count, first, numel_c);

  // 1. Class histogram (totals only: the lanes read the chunk coalesced, each counting what it read).
  constexpr unsigned V = 16 / sizeof(W);
  if constexpr (Mode == entropy_plan_mode::bytes) {
    const entropy_byte_histogram h{s.cnt, s.changes};
    h.zero(K, lane);
    __syncwarp();
    entropy_warp_walk_any_order<W, entropy_histogram_depth>(
        fast, p.segs, p.segment_count, first, numel_c,
        [&](std::uint32_t, const W(&v)[V]) {
          unsigned x[V];
#pragma unroll
          for (unsigned k = 0; k < V; ++k) x[k] = entropy_params::class_of<W>(v[k]);
          h.add(x, lane);
        },
        [&](std::uint32_t, W b) {
          const unsigned x[1] = {entropy_params::class_of<W>(b)};
          h.add(x, lane);
        });
    __syncwarp();
    for (unsigned x = 0; x < K; ++x) {
      const std::uint32_t tot = h.total(x, lane);
      if (lane == 0) s.size[x] = tot;
    }
  } else {
    ctr.zero(K, lane);
    __syncwarp();
    entropy_warp_walk_any_order<W, entropy_histogram_depth>(
        fast, p.segs, p.segment_count, first, numel_c,
        [&](std::uint32_t, const W(&v)[V]) {
#pragma unroll
          for (unsigned k = 0; k < V; ++k) ctr.add(entropy_params::class_of<W>(v[k]), lane);
        },
        [&](std::uint32_t, W b) { ctr.add(entropy_params::class_of<W>(b), lane); });
    __syncwarp();
    for (unsigned x = 0; x < K; ++x) {
      const std::uint32_t tot = entropy_warp_add(ctr.get(x, lane));
      if (lane == 0) s.size[x] = tot;
    }
  }
  __syncwarp();
  // 2. Groups (codec/entropy.hpp make_entropy_groups), by lane 0.
  if (lane == 0) {
    const unsigned count = entropy_groups_from_counts<W>(s.size, s.of_class, nullptr, numel_c);
    s.changes[0] = count;  // (broadcast through shared memory)
  }
  __syncwarp();
  const unsigned G = s.changes[0];
  __syncwarp();
  if (Mode == entropy_plan_mode::bytes && G > entropy_plan_byte_groups<W>) {  // (uniform) more groups than its counters hold
    if (lane == 0) e.group_count[c] = entropy_plan_left;
    return;
  }
  // The chunk's region (step 5's output) first holds its changes in position order, slot << entropy_rank_bits |
  // position, so that each lane's walk finds its next change in a word it loaded long before (the tile lists
  // behind the slots would be dependent loads at every change the warp meets).
  std::uint64_t region = 0;
  if (lane == 0) region = atomicAdd(e.region_next, static_cast<unsigned long long>(n));
  region = __shfl_sync(full_warp, region, 0);
  if (region + n > p.capacity) {  // (never: the changes fit the scratch)
    if (lane == 0) atomicExch(&p.ctr->error, 1);
    return;
  }
  std::uint64_t* reg = e.region + region;
  {
    std::uint32_t j0 = 0;
    entropy_warp_changes(p, t0, t1, [&](bool act, std::uint32_t pos, std::uint64_t slot) {
      if (act) reg[j0 + lane] = (slot << entropy_rank_bits) | pos;
      j0 += static_cast<std::uint32_t>(__popc(__ballot_sync(full_warp, act)));
    });
  }
  __syncwarp();
  // 3. Ranks on each lane's range: aux[slot] = group << 24 | rank among the lane's elements of the group.
  ctr.zero(G, lane);
  __syncwarp();
  {
    constexpr std::uint64_t pos_mask = (std::uint64_t{1} << entropy_rank_bits) - 1;
    auto lower = [&](std::uint32_t x) {  // first staged change at or after position x
      std::uint32_t l = 0, h = n;
      while (l < h) {
        const std::uint32_t m = (l + h) / 2;
        if ((reg[m] & pos_mask) < x)
          l = m + 1;
        else
          h = m;
      }
      return l;
    };
    std::uint32_t j = lower(lo);
    const std::uint32_t je = lower(hi);
    std::uint64_t cur = j < je ? reg[j] : 0;
    if (j + 1 < je) entropy_fetch_ahead(&s.next_change[lane], reg + j + 1);
    std::uint32_t at = j < je ? static_cast<std::uint32_t>(cur & pos_mask) : hi;  // (hi: no change is left)
    auto visit = [&](std::uint32_t i, unsigned g, std::uint32_t r) {
      if (i != at) return;
      p.aux[cur >> entropy_rank_bits] = (static_cast<std::uint32_t>(g) << entropy_rank_bits) | r;
      if (++j < je) {
        cur = entropy_fetched(&s.next_change[lane]);
        at = static_cast<std::uint32_t>(cur & pos_mask);
        if (j + 1 < je) entropy_fetch_ahead(&s.next_change[lane], reg + j + 1);
      } else {
        at = hi;
      }
    };
    entropy_lane_walk_vectors<W, entropy_plan_depth>(
        fast, p.segs, p.segment_count, first, lo, hi,
        [&](std::uint32_t i, const W(&v)[V]) {
          unsigned g[V];
          std::uint32_t r[V];
#pragma unroll
          for (unsigned k = 0; k < V; ++k) g[k] = s.of_class[entropy_params::class_of<W>(v[k])];
#pragma unroll
          for (unsigned k = 0; k < V; ++k) r[k] = ctr.add(g[k], lane);
          if (at < i + V) [[unlikely]] {  // (one test a vector: a lane meets a change every ~17 vectors at 1%)
#pragma unroll
            for (unsigned k = 0; k < V; ++k) visit(i + k, g[k], r[k]);
          }
        },
        [&](std::uint32_t i, W b) {
          const unsigned g = s.of_class[entropy_params::class_of<W>(b)];
          visit(i, g, ctr.add(g, lane));
        });
    entropy_fetches_done();  // (none is left in flight, the walk met every change it fetched; the words are reused)
  }
  __syncwarp();
  // Exclusive prefix over lanes, per group: the rank of a lane's first element of the group (below 2^16 in a
  // narrow counter wherever the lane has an element of the group, the only place it is read).
  for (unsigned g = 0; g < G; ++g) {
    const std::uint32_t v = ctr.get(g, lane);
    std::uint32_t incl = v;
#pragma unroll
    for (unsigned o = 1; o < 32; o *= 2) {
      const std::uint32_t u = __shfl_up_sync(full_warp, incl, o);
      if (lane >= o) incl += u;
    }
    ctr.set(g, lane, incl - v);
  }
  for (unsigned g = lane; g < G; g += 32) s.changes[g] = 0;
  __syncwarp();
  // 4. Chunk ranks, changes per group, and a floor under rice's bits for the same changes (its fallback body):
  // each gap and value code at its own best parameter (rice::gap_floor / value_floor). Rice's exact costs, 41
  // sums a lane, are taken after step 6 only where the class body is not already below that floor.
  std::uint32_t rice_floor = 0;  // (at most 2^24 changes, at most 25 + 33 bits each: the warp's sum is below 2^32)
  entropy_warp_rice_gaps(p, t0, t1, [&](bool act, std::uint32_t pos, std::uint64_t slot, std::uint32_t gap) {
    if (!act) return;
    const std::uint32_t a = p.aux[slot];
    const unsigned g = a >> entropy_rank_bits;
    p.aux[slot] = (a & ~entropy_rank_mask) | (ctr.get(g, pos / R) + (a & entropy_rank_mask));  // (R > 0: n > 0)
    atomicAdd(&s.changes[g], 1u);
    rice_floor += entropy_rice_floor(gap) + (ulp ? entropy_rice_floor(entropy_value_code<W>(p, slot)) : 0u);
  });
  const std::uint64_t rice_floor_bits = entropy_warp_add(rice_floor) + (ulp ? 0u : std::uint64_t{n} * wbits);
  __syncwarp();
  // 5. The region, the changes sorted by group (stable), as (gap in the group's sequence, value code). The
  // counters were last read above: their words hold the slot tables from here on.
  std::uint32_t* const cursor = s.cursor();
  std::uint32_t* const next_rank = s.next_rank();
  if (lane == 0) {
    std::uint32_t at = 0;
    for (unsigned g = 0; g < G; ++g) {
      cursor[g] = at;
      next_rank[g] = 0;
      at += s.changes[g];
    }
  }
  __syncwarp();
  entropy_warp_changes(p, t0, t1, [&](bool act, std::uint32_t, std::uint64_t slot) {
    const std::uint32_t a = act ? p.aux[slot] : 0u;
    const unsigned g = a >> entropy_rank_bits;
    const std::uint32_t rank = a & entropy_rank_mask;
    const unsigned m = __match_any_sync(full_warp, act ? g : 0xFFFFu);
    const unsigned below = m & ((1u << lane) - 1u);
    const unsigned prev_lane = below ? 31u - static_cast<unsigned>(__clz(static_cast<int>(below))) : lane;
    const std::uint32_t prev_rank = __shfl_sync(full_warp, rank, prev_lane);
    std::uint32_t cur = 0, nr = 0;
    if (act) {
      cur = cursor[g];
      nr = next_rank[g];
      const std::uint32_t gap = below ? rank - prev_rank - 1 : rank - nr;
      const std::uint32_t code = ulp ? static_cast<std::uint32_t>(zigzag<W>(static_cast<const W*>(p.val)[slot])) - 1u : 0u;
      reg[cur + static_cast<unsigned>(__popc(below))] = std::uint64_t{gap} | (std::uint64_t{code} << 32);
    }
    __syncwarp();
    if (act && (m >> lane) == 1u) {  // the group's last lane here
      cursor[g] = cur + static_cast<unsigned>(__popc(m));
      next_rank[g] = rank + 1;
    }
    __syncwarp();
  });
  // 6. Each group's parameters (codec/entropy.hpp entropy_fit), the warp over the group's region.
  std::uint64_t bits = 0;
  std::uint32_t remaining = n;
  std::uint64_t* hdr = e.groups + std::uint64_t{c} * K;
  for (unsigned g = 0; g < G; ++g) {
    const std::uint32_t size = s.size[g], cg = s.changes[g];
    if (g + 1 < G) bits += entropy_params::count_bits(size, remaining);
    remaining -= cg;
    unsigned kg = 0, kv = 0;
    if (cg > 0) {
      const std::uint32_t from = cursor[g] - cg;
      const bool gaps = cg < size;
      const unsigned raw = gaps ? entropy_params::gap_raw_bits(size) : 0;
      std::uint32_t gc[entropy_params::max_gap_k + 1], vc[wbits];
#pragma unroll
      for (unsigned k = 0; k <= entropy_params::max_gap_k; ++k) gc[k] = 0;
#pragma unroll
      for (unsigned k = 0; k < wbits; ++k) vc[k] = 0;
      for (std::uint32_t j = from + lane; j < from + cg; j += 32) {
        const std::uint64_t e = reg[j];
        if (gaps) {
          const auto gap = static_cast<std::uint32_t>(e);
#pragma unroll
          for (unsigned k = 0; k <= entropy_params::max_gap_k; ++k) gc[k] += rice_params::code_bits<std::uint32_t>(gap, k, raw);
        }
        if (ulp) {
          const auto code = static_cast<std::uint32_t>(e >> 32);
#pragma unroll
          for (unsigned k = 0; k < wbits; ++k) vc[k] += rice_params::code_bits<std::uint32_t>(code, k, wbits);
        }
      }
      std::uint32_t cost = 0;
      if (gaps) {
        kg = entropy_warp_best(gc, entropy_params::max_gap_k_of(size), cost);
        bits += entropy_params::gap_k_bits(size) + cost;
      }
      if (ulp) {
        kv = entropy_warp_best(vc, wbits - 1, cost);
        bits += entropy_params::value_k_bits<W>(kv) + cost;
      }
    }
    if (lane == 0) hdr[g] = entropy_pack_group(size, cg, kg, kv);
  }
  if (!ulp) bits += std::uint64_t{wbits} * n;
  const std::uint64_t class_bytes = entropy_class_bytes(bits);  // (bits: the same in every lane)
  unsigned rice_kg = 0, rice_kv = 0;
  std::uint64_t rice_bytes = 0;
  const bool settled = class_bytes < 1 + rice_params::data_bytes(rice_floor_bits);  // (uniform) below any rice body
  if (!settled) {
    entropy_warp_rice_cost<W> rice;
    entropy_warp_rice_gaps(p, t0, t1, [&](bool act, std::uint32_t, std::uint64_t slot, std::uint32_t gap) {
      if (act) rice.add(gap, ulp, ulp ? entropy_value_code<W>(p, slot) : 0u);
    });
    rice_bytes = rice.bytes(ulp, n, rice_kg, rice_kv);
  }
  if (lane == 0) {
    const bool classes = settled || class_bytes < 1 + rice_bytes;  // ties keep rice's data
    p.plans[c] = chunk_plan{n, rice_kg, rice_kv, classes ? entropy_params::tag_classes : entropy_params::tag_rice};
    p.chunk_bytes[c] = classes ? class_bytes : 1 + rice_bytes;
    e.region_at[c] = region;
    e.group_count[c] = G;
    atomicAdd(reinterpret_cast<unsigned long long*>(p.ctr->changed + c % hash_slots), static_cast<unsigned long long>(n));
  }
}

// Writes a chunk's entropy data (n > 0) from the size pass's plan: tag, then rice's data or the class body.
template <class W, class Writer, class Src>
SPARSESYNC_DEVICE void entropy_chunk_write(value_mode mode, std::uint32_t numel, const chunk_plan& plan, const Src& src,
                                           const std::uint32_t* aux, const std::uint64_t* hdr, const std::uint64_t* region, unsigned G,
                                           Writer& w) {
  constexpr unsigned wbits = 8 * sizeof(W);
  if (plan.values_at == entropy_params::tag_rice) {
    w.put(entropy_params::tag_rice, 8);
    Src rice_src = src;
    encode_chunk<W>(encoder_id::rice, mode, numel, plan, rice_src, w);
    return;
  }
  w.put(entropy_params::tag_classes, 8);
  const bool ulp = mode == value_mode::ulp;
  std::uint32_t remaining = plan.changes;
  for (unsigned g = 0; g < G; ++g) {
    const std::uint64_t e = hdr[g];
    const std::uint32_t n = entropy_group_size(e), cg = entropy_group_changes(e);
    if (g + 1 < G) w.put(cg, entropy_params::count_bits(n, remaining));
    remaining -= cg;
    if (cg > 0 && cg < n) w.put(entropy_group_k_gap(e), entropy_params::gap_k_bits(n));
    if (cg > 0 && ulp) {
      const unsigned kv = entropy_group_k_val(e);
      w.put((std::uint64_t{1} << kv) - 1, kv);
      if (kv < wbits - 1) w.put(0, 1);
    }
  }
  std::uint32_t j = 0;
  for (unsigned g = 0; g < G; ++g) {
    const std::uint64_t e = hdr[g];
    const std::uint32_t n = entropy_group_size(e), cg = entropy_group_changes(e);
    if (cg > 0 && cg < n) {
      const unsigned raw = entropy_params::gap_raw_bits(n), k = entropy_group_k_gap(e);
      for (std::uint32_t i = 0; i < cg; ++i) rice_put(w, static_cast<std::uint32_t>(region[j + i]), k, raw);
    }
    j += cg;
  }
  src.for_each_slot([&](std::uint32_t, W v, std::uint64_t slot) {
    if (ulp)
      rice_put(w, static_cast<std::uint32_t>(zigzag<W>(v)) - 1u, entropy_group_k_val(hdr[aux[slot] >> entropy_rank_bits]), wbits);
    else
      w.put(v, wbits);
  });
}

// chunk_write_kernel's twin for entropy (a thread per chunk).
template <class W, class P>
SPARSESYNC_KERNEL void __launch_bounds__(P::chunk_threads) entropy_write_kernel(chunk_pass_params p, entropy_plan_scratch e) {
  constexpr unsigned K = entropy_params::class_count<W>;
  const std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.chunk_count || p.ctr->allocated > p.capacity) return;
  if (frame_bytes_of(p.segment_count, p.chunk_count, p.ctr->data_total) > p.out_capacity) return;
  unsigned char* table = p.out + bucket_header_bytes + segment_entry_bytes * std::uint64_t{p.segment_count};
  unsigned char* data = table + chunk_entry_bytes * std::uint64_t{p.chunk_count};
  const chunk_plan plan = p.plans[c];
  const std::uint64_t bytes = p.chunk_bytes[c];
  const std::uint64_t entry = std::uint64_t{plan.changes} | (bytes << 32);
  store_le64(table + chunk_entry_bytes * std::uint64_t{c}, entry);
  std::uint64_t digest;
  if (plan.changes) {
    chunk_writer<true, true> w(data + p.chunk_off[c], bytes, c, entry);
    entropy_chunk_write<W>(p.mode, chunk_numel(p.numel, p.log2_chunk, c), plan, chunk_source<W>(p, c), p.aux,
                           e.groups + std::uint64_t{c} * K, e.region + e.region_at[c], e.group_count[c], w);
    if (!w.finish()) atomicExch(&p.ctr->error, 1);
    digest = w.digest();
  } else {
    xxh64_state h(c);
    h.update_word(entry);
    digest = h.digest();
  }
  atomicAdd(reinterpret_cast<unsigned long long*>(p.ctr->payload + c % hash_slots), static_cast<unsigned long long>(digest));
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
