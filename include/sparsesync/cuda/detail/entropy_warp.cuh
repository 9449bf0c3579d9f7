// Warp-per-chunk building blocks shared by the entropy encoder's size pass (entropy_plan.cuh) and its class-body
// decoder (entropy_decode.cuh): both walk a chunk's base as 32 contiguous lane ranges, each lane with its own
// counters, and fit Rice parameters with costs reduced over the warp.
#pragma once

#include <sparsesync/codec/rice_params.hpp>
#include <sparsesync/cuda/detail/cp_async.cuh>
#include <sparsesync/cuda/detail/detect.cuh>
#include <sparsesync/cuda/detail/entropy_codec.cuh>
#include <sparsesync/cuda/detail/warp_decode.cuh>
#include <sparsesync/cuda/types.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

// A lane's next staged change, fetched ahead into its shared-memory slot by cp.async: no register waits for it,
// so nothing but the step that meets a change can stall on it. (Loaded ahead into a register, the walk's unrolled
// steps copied that register at every element, before the branch, and each copy waited for the load: the line
// had 23% of the size pass's stall samples, ncu, session 19 call A.) Each lane reads only the slot it filled itself.
SPARSESYNC_DEVICE void entropy_fetch_ahead(std::uint64_t* slot, const std::uint64_t* src) {
  cp_async8_ca(slot, src);
  cp_async_commit();
}
// Waits for the lane's fetches (a lane reads its slot only after this).
SPARSESYNC_DEVICE void entropy_fetches_done() { cp_async_wait_all(); }
SPARSESYNC_DEVICE std::uint64_t entropy_fetched(const std::uint64_t* slot) {
  entropy_fetches_done();
  return *slot;
}

// Lane `lane`'s range [lo, hi) of a chunk of numel elements: whole 16-byte vectors, so that a 16-byte aligned
// chunk stays aligned in every lane. Returns the range length R (lane l starts at min(l * R, numel)).
template <class W>
SPARSESYNC_DEVICE std::uint32_t entropy_lane_range(std::uint32_t numel, unsigned lane, std::uint32_t& lo, std::uint32_t& hi) {
  constexpr unsigned V = 16 / sizeof(W);
  const std::uint32_t R = (numel + 32 * V - 1) / (32 * V) * V;
  lo = lane * R < numel ? lane * R : numel;
  hi = numel - lo < R ? numel : lo + R;
  return R;
}

// The chunk's base as one 16-byte aligned array when it lies inside one segment, else null (walked through
// base_walker instead).
template <class W>
SPARSESYNC_DEVICE const W* entropy_fast_base(const resolved_segment* segs, std::uint32_t segment_count, std::uint64_t first,
                                             std::uint32_t numel) {
  const resolved_segment& sg = segs[find_segment(segs, 0, segment_count, first)];
  const W* bp = static_cast<const W*>(sg.a) + (first - sg.bucket_first);
  if (first >= sg.bucket_first && first + numel <= sg.bucket_first + sg.count && (reinterpret_cast<std::uintptr_t>(bp) & 15u) == 0) return bp;
  return nullptr;
}

// Walks the chunk's base elements i in [lo, hi) in order (one lane's range): fv(i, e) for each whole 16-byte vector
// (e: its V = 16 / sizeof(W) elements, i the first one's index), f1(i, bits) for single elements (the range's tail,
// or a base that spans segments). D vectors a step, the next step's loaded before this one's are handed on. A
// callback that gets a whole vector can issue each kind of shared-memory access for all its elements before
// the next kind: element by element, an atomic whose result feeds a load (or a load after an atomic to memory
// the compiler cannot tell apart) orders every element behind the one before (session 14: the walk that ranks
// changes took 2.2-3.5x the walk that only counts).
template <class W, unsigned D, class FV, class F1>
SPARSESYNC_DEVICE void entropy_lane_walk_vectors(const W* fast, const resolved_segment* segs, std::uint32_t segment_count, std::uint64_t first,
                                                 std::uint32_t lo, std::uint32_t hi, FV&& fv, F1&& f1) {
  constexpr unsigned V = 16 / sizeof(W);
  if (fast != nullptr) {
    std::uint32_t i = lo;
    uint4 v[D], w[D];
    if (i + D * V <= hi) {
#pragma unroll
      for (unsigned u = 0; u < D; ++u) v[u] = *reinterpret_cast<const uint4*>(fast + i + u * V);
    }
    for (; i + D * V <= hi; i += D * V) {
      const bool more = i + 2 * D * V <= hi;
      if (more) {
#pragma unroll
        for (unsigned u = 0; u < D; ++u) w[u] = *reinterpret_cast<const uint4*>(fast + i + (D + u) * V);
      }
#pragma unroll
      for (unsigned u = 0; u < D; ++u) {
        W e[V];
#pragma unroll
        for (unsigned k = 0; k < V; ++k) e[k] = vec_get<W>(v[u], static_cast<int>(k));
        fv(i + u * V, e);
      }
      if (more) {
#pragma unroll
        for (unsigned u = 0; u < D; ++u) v[u] = w[u];
      }
    }
    for (; i < hi; ++i) f1(i, fast[i]);
  } else if (lo < hi) {
    base_walker<W> b(segs, segment_count, first + lo);
    for (std::uint32_t i = lo; i < hi; ++i) f1(i, b.next());
  }
}

// entropy_lane_walk_vectors' order over the chunk's lane ranges (entropy_lane_range), the whole warp calling, with
// the loads staged in a shared-memory ring instead of registers: in rounds of P vectors a lane, P lanes fetch one
// lane's P contiguous vectors by cp.async (a load instruction takes 32 / P lanes' ranges, 16 P contiguous bytes
// each, where the register walk's take 32 ranges 16 bytes each: whole sectors), S - 1 rounds ahead; each lane
// then reads its own vectors back (ring: S * P * 32 vectors, the warp's). Over 14 GB of BF16 with the placing
// kernel's 11 KB of counters a warp, the probe's ranking walk took 6.75 ms at P = 2, S = 2 (16 warps an SM) against
// 7.94 ms for 2 vectors ahead in registers (19 warps an SM) (bench/gpu/entropy_walk_probe.cu layout xpose, session
// 20, call A, H200). A base that spans segments is walked element by element, as there.
template <unsigned P, unsigned S>
struct entropy_walk_ring {
  static_assert(P == 1 || P == 2 || P == 4 || P == 8, "sparsesync: a round's lanes per range divide the warp");
  static_assert(S >= 2, "sparsesync: the ring needs a round in flight beside the one read");
  static constexpr unsigned vectors = S * P * 32;
};

template <class W, unsigned P, unsigned S, class FV, class F1>
SPARSESYNC_DEVICE void entropy_lane_walk_staged(uint4* ring, const W* fast, const resolved_segment* segs, std::uint32_t segment_count,
                                                std::uint64_t first, std::uint32_t numel, FV&& fv, F1&& f1) {
  constexpr unsigned V = 16 / sizeof(W);
  constexpr unsigned per = 32 / P;  // ranges a round's load instruction takes
  static_assert(entropy_walk_ring<P, S>::vectors != 0, "sparsesync: P and S as entropy_walk_ring requires");
  const unsigned lane = lane_id();
  std::uint32_t lo = 0, hi = 0;
  const std::uint32_t R = entropy_lane_range<W>(numel, lane, lo, hi);
  if (fast == nullptr) {
    entropy_lane_walk_vectors<W, 1>(fast, segs, segment_count, first, lo, hi, fv, f1);
    return;
  }
  const std::uint32_t mine = (hi - lo) / V;           // the lane's whole vectors
  const std::uint32_t rounds = (R / V + P - 1) / P;  // (uniform: lane 0's range is the longest)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // Lane q fetches vector q % P of each round for the ranges q / P + per * j.
  const W* from[P];
  std::uint32_t count[P];
#pragma unroll
  for (unsigned j = 0; j < P; ++j) {
    std::uint32_t a = 0, b = 0;
    entropy_lane_range<W>(numel, lane / P + per * j, a, b);
    from[j] = fast + a;
    count[j] = (b - a) / V;
  }
  const unsigned u0 = lane % P;
  auto issue = [&](std::uint32_t r) {
    const std::uint32_t v = r * P + u0;
    const unsigned slot = (r % S) * P + u0;
#pragma unroll
    for (unsigned j = 0; j < P; ++j)
      if (v < count[j]) cp_async16(ring + (slot * 32u + lane / P + per * j), reinterpret_cast<const uint4*>(from[j] + v * V));
    cp_async_commit();  // (empty past the ranges: the count of groups stays uniform)
  };
#pragma unroll
  for (unsigned r = 0; r + 1 < S; ++r) issue(r);
  for (std::uint32_t r = 0; r < rounds; ++r) {
    cp_async_wait<static_cast<int>(S) - 2>();
    __syncwarp();  // the round's vectors came by other lanes' copies; and every lane has read the slot refilled next
    uint4 v[P];
#pragma unroll
    for (unsigned u = 0; u < P; ++u) v[u] = ring[((r % S) * P + u) * 32 + lane];
    issue(r + S - 1);
#pragma unroll
    for (unsigned u = 0; u < P; ++u) {
      if (r * P + u < mine) {
        W e[V];
#pragma unroll
        for (unsigned k = 0; k < V; ++k) e[k] = vec_get<W>(v[u], static_cast<int>(k));
        fv(lo + (r * P + u) * V, e);
      }
    }
  }
  entropy_fetches_done();
  __syncwarp();  // (no copy is left to land in the ring once the walk returns)
  for (std::uint32_t i = lo + mine * V; i < hi; ++i) f1(i, fast[i]);
#else
  (void)ring;
  (void)R;
  (void)mine;
  entropy_lane_walk_vectors<W, 2>(fast, segs, segment_count, first, lo, hi, fv, f1);
#endif
}

// f(i, bits) for every element, in order (entropy_lane_walk_vectors, element by element).
template <class W, unsigned D = 4, class F>
SPARSESYNC_DEVICE void entropy_lane_walk(const W* fast, const resolved_segment* segs, std::uint32_t segment_count, std::uint64_t first,
                                         std::uint32_t lo, std::uint32_t hi, F&& f) {
  constexpr unsigned V = 16 / sizeof(W);
  entropy_lane_walk_vectors<W, D>(
      fast, segs, segment_count, first, lo, hi,
      [&](std::uint32_t i, const W(&e)[V]) {
#pragma unroll
        for (unsigned k = 0; k < V; ++k) f(i + k, e[k]);
      },
      f);
}

// fv(i, e) for every whole 16-byte vector of the chunk (as entropy_lane_walk_vectors) and f1(i, bits) for every
// other element, in no particular order, the whole warp calling: a warp reads 512 contiguous bytes at a time
// (vector s * 32 + lane, D steps ahead), where the lane ranges keep 32 streams 4 KB apart. For passes that need
// only totals (the encoder's class histogram): over 14 GB of BF16 on an H100 a coalesced pass took 5.2 ms 2 ahead
// and 4.5 ms 8 ahead against 8.2 ms for the lane ranges (bench/gpu/entropy_walk_probe.cu, session 14). A base that
// spans segments is walked as the lane ranges.
template <class W, unsigned D, class FV, class F1>
SPARSESYNC_DEVICE void entropy_warp_walk_any_order(const W* fast, const resolved_segment* segs, std::uint32_t segment_count, std::uint64_t first,
                                                   std::uint32_t numel, FV&& fv, F1&& f1) {
  constexpr unsigned V = 16 / sizeof(W);
  const unsigned lane = lane_id();
  if (fast == nullptr) {
    std::uint32_t lo = 0, hi = 0;
    entropy_lane_range<W>(numel, lane, lo, hi);
    entropy_lane_walk_vectors<W, D>(fast, segs, segment_count, first, lo, hi, fv, f1);
    return;
  }
  const std::uint32_t vecs = numel / V;
  const uint4* const p = reinterpret_cast<const uint4*>(fast);
  uint4 v[D];
#pragma unroll
  for (unsigned u = 0; u < D; ++u)
    if (lane + u * 32 < vecs) v[u] = p[lane + u * 32];
  for (std::uint32_t s = lane; s < vecs; s += D * 32) {
    uint4 w[D];
#pragma unroll
    for (unsigned u = 0; u < D; ++u)
      if (s + (D + u) * 32 < vecs) w[u] = p[s + (D + u) * 32];
#pragma unroll
    for (unsigned u = 0; u < D; ++u) {
      if (s + u * 32 < vecs) {
        W e[V];
#pragma unroll
        for (unsigned k = 0; k < V; ++k) e[k] = vec_get<W>(v[u], static_cast<int>(k));
        fv((s + u * 32) * V, e);
      }
    }
#pragma unroll
    for (unsigned u = 0; u < D; ++u) v[u] = w[u];
  }
  for (std::uint32_t i = vecs * V + lane; i < numel; i += 32) f1(i, fast[i]);
}

// Counter x of lane L: the (x & 1) half of word (x / 2) * 32 + L, so that lane L only ever touches bank L. The
// walks advance them with shared-memory atomics whose result they do not wait for (or, for ranks, do not feed
// back): a plain read-modify-write would chain every element of a lane to the previous one through memory.
SPARSESYNC_DEVICE unsigned entropy_ctr(unsigned x, unsigned lane) { return (x >> 1) * 32 + lane; }
SPARSESYNC_DEVICE unsigned entropy_ctr_shift(unsigned x) { return (x & 1u) * 16; }
SPARSESYNC_DEVICE std::uint32_t entropy_ctr_get(const std::uint32_t* ctr, unsigned x, unsigned lane) {
  return (ctr[entropy_ctr(x, lane)] >> entropy_ctr_shift(x)) & 0xffffu;
}
SPARSESYNC_DEVICE void entropy_ctr_set(std::uint32_t* ctr, unsigned x, unsigned lane, std::uint32_t v) {
  std::uint32_t& w = ctr[entropy_ctr(x, lane)];
  const unsigned sh = entropy_ctr_shift(x);
  w = (w & ~(0xffffu << sh)) | ((v & 0xffffu) << sh);
}

// Lane-private counters [class or group][lane] for the encoder's size pass (entropy_plan.cuh), advanced with shared-memory atomics
// whose result a walk only waits for at a change (a plain read-modify-write chains every element of a lane to the
// one before through memory). Narrow: 16 bits, two a word in the decoder's layout (entropy_ctr: lane L's in bank
// L), for chunks of at most 2^16 elements; wide: a word each, for longer chunks.
template <bool Narrow>
struct entropy_lane_counters {
  std::uint32_t* w;
  static SPARSESYNC_DEVICE unsigned at(unsigned x, unsigned lane) { return Narrow ? entropy_ctr(x, lane) : x * 32 + lane; }
  static SPARSESYNC_DEVICE unsigned shift(unsigned x) { return Narrow ? entropy_ctr_shift(x) : 0u; }
  static constexpr std::uint32_t mask = Narrow ? 0xffffu : ~std::uint32_t{0};
  // Words that hold counters 0..n-1 of every lane.
  static SPARSESYNC_HD constexpr unsigned words(unsigned n) { return Narrow ? (n + 1) / 2 * 32 : n * 32; }
  SPARSESYNC_DEVICE std::uint32_t add(unsigned x, unsigned lane) const {
    return (atomicAdd(&w[at(x, lane)], 1u << shift(x)) >> shift(x)) & mask;
  }
  SPARSESYNC_DEVICE std::uint32_t get(unsigned x, unsigned lane) const {
    if constexpr (Narrow) return entropy_ctr_get(w, x, lane);
    else return w[at(x, lane)];
  }
  SPARSESYNC_DEVICE void set(unsigned x, unsigned lane, std::uint32_t v) const {
    if constexpr (Narrow) entropy_ctr_set(w, x, lane, v);
    else w[at(x, lane)] = v;
  }
  SPARSESYNC_DEVICE void zero(unsigned n, unsigned lane) const {
    for (unsigned i = lane; i < words(n); i += 32) w[i] = 0;
  }
};

// A sum over the warp (one instruction from sm_80 on).
SPARSESYNC_DEVICE std::uint32_t entropy_warp_add(std::uint32_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_add_sync(full_warp, v);
#else
  for (unsigned o = 16; o > 0; o /= 2) v += __shfl_xor_sync(full_warp, v, o);
  return v;
#endif
}

// A chunk's class totals in a quarter of the memory of 16-bit lane counters (8 KB for 256 classes, so that twice
// as many warps fit an SM): lane-private 7-bit counts, four classes a word (class x of lane L in byte x & 3 of
// word x / 4 * 32 + L: lane L only touches bank L), advanced with shared-memory atomics. A count that reaches 128
// hands 128 to the warp's total for the class (`over`) and restarts; a vector adds at most 16 to a count before
// its checks, so no byte ever carries into its neighbour. Totals only: a lane's own count is not kept.
struct entropy_byte_histogram {
  std::uint32_t* w;
  std::uint32_t* over;  // [class]
  static SPARSESYNC_HD constexpr unsigned words(unsigned classes) { return (classes + 3) / 4 * 32; }
  static SPARSESYNC_DEVICE unsigned at(unsigned x, unsigned lane) { return (x >> 2) * 32 + lane; }
  static SPARSESYNC_DEVICE unsigned shift(unsigned x) { return (x & 3u) * 8; }
  SPARSESYNC_DEVICE void zero(unsigned classes, unsigned lane) const {
    for (unsigned i = lane; i < words(classes); i += 32) w[i] = 0;
    for (unsigned x = lane; x < classes; x += 32) over[x] = 0;
  }
  // Counts the N classes x[0, N) (N <= 16), all atomics first, then their checks.
  template <unsigned N>
  SPARSESYNC_DEVICE void add(const unsigned (&x)[N], unsigned lane) const {
    static_assert(N <= 16, "sparsesync: a byte counter takes at most 16 increments between its checks");
    std::uint32_t old[N];
#pragma unroll
    for (unsigned k = 0; k < N; ++k) old[k] = atomicAdd(&w[at(x[k], lane)], 1u << shift(x[k]));
#pragma unroll
    for (unsigned k = 0; k < N; ++k) {
      if (((old[k] >> shift(x[k])) & 0xffu) == 127u) [[unlikely]] {
        atomicSub(&w[at(x[k], lane)], 128u << shift(x[k]));
        atomicAdd(&over[x[k]], 128u);
      }
    }
  }
  // Class x's total over the warp (every lane calling; after a __syncwarp behind the last add).
  SPARSESYNC_DEVICE std::uint32_t total(unsigned x, unsigned lane) const {
    return entropy_warp_add((w[at(x, lane)] >> shift(x)) & 0xffu) + over[x];
  }
};

// The k in [0, max_k] with the fewest bits (ties to the smaller), from per-lane cost sums reduced over the warp.
template <unsigned N>
SPARSESYNC_DEVICE unsigned entropy_warp_best(const std::uint32_t (&c)[N], unsigned max_k, std::uint32_t& cost) {
  unsigned best = 0;
  cost = entropy_warp_add(c[0]);
#pragma unroll
  for (unsigned k = 1; k < N; ++k) {
    const std::uint32_t t = entropy_warp_add(c[k]);
    if (k <= max_k && t < cost) {
      cost = t;
      best = k;
    }
  }
  return best;
}

// rice's body for a chunk's changes (entropy's fallback, FORMAT.md 3.4.1 tag 0), priced over the warp: each lane
// adds the changes it holds (gap from the change before, value code in ulp mode); bytes() gives the data length
// with rice's fitted parameters, the tag byte excluded. The encoder's size pass and the decoder's check share it.
template <class W>
struct entropy_warp_rice_cost {
  static constexpr unsigned wbits = 8 * sizeof(W);
  std::uint32_t gap_bits[rice_params::max_gap_k + 1], value_bits[wbits];
  SPARSESYNC_DEVICE entropy_warp_rice_cost() {
#pragma unroll
    for (unsigned k = 0; k <= rice_params::max_gap_k; ++k) gap_bits[k] = 0;
#pragma unroll
    for (unsigned k = 0; k < wbits; ++k) value_bits[k] = 0;
  }
  SPARSESYNC_DEVICE void add(std::uint32_t gap, bool ulp, std::uint32_t code) {
#pragma unroll
    for (unsigned k = 0; k <= rice_params::max_gap_k; ++k) gap_bits[k] += rice_params::code_bits<std::uint32_t>(gap, k, rice_params::gap_raw_bits);
    if (ulp) {
#pragma unroll
      for (unsigned k = 0; k < wbits; ++k) value_bits[k] += rice_params::code_bits<std::uint32_t>(code, k, wbits);
    }
  }
  // The whole warp calls; n changes in all. k_gap and k_val get the fitted parameters (k_val 0 in absolute mode).
  SPARSESYNC_DEVICE std::uint64_t bytes(bool ulp, std::uint32_t n, unsigned& k_gap, unsigned& k_val) const {
    std::uint32_t g = 0, v = 0;
    k_gap = entropy_warp_best(gap_bits, rice_params::max_gap_k, g);
    k_val = ulp ? entropy_warp_best(value_bits, wbits - 1, v) : 0u;
    return rice_params::data_bytes(std::uint64_t{g} + (ulp ? std::uint64_t{v} : std::uint64_t{n} * wbits));
  }
};

// Lane k's cost for parameter k (lanes past max_k ignored): the k with the fewest bits, ties to the smaller.
SPARSESYNC_DEVICE unsigned entropy_warp_argmin(std::uint32_t cost, unsigned max_k) {
  const std::uint32_t mine = lane_id() <= max_k ? cost : ~std::uint32_t{0};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const std::uint32_t m = __reduce_min_sync(full_warp, mine);
#else
  std::uint32_t m = mine;
  for (unsigned o = 16; o > 0; o /= 2) m = min(m, __shfl_xor_sync(full_warp, m, o));
#endif
  return static_cast<unsigned>(__ffs(static_cast<int>(__ballot_sync(full_warp, mine == m)))) - 1u;
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
