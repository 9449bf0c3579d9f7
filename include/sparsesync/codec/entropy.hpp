// entropy: positions and values coded per class of the receiver's old value. Whether an element changes
// depends strongly on its magnitude (small weights have small ULPs, so the same optimizer step crosses more
// of them), and the receiver holds every old value: grouping a chunk's elements by the exponent field of the
// old value and Rice-coding each group's changes as gaps within that group's own elements, with a parameter
// per group, spends close to the class-conditioned information floor. Values in `ulp` mode get a Rice
// parameter per group too (small weights also move by more ULPs). Where classes do not help, a chunk carries
// rice's own data behind a tag byte, so entropy never costs more than rice plus one byte per chunk.
// Layout, fitting rules and canonicality: docs/FORMAT.md, "entropy".
#pragma once

#include <sparsesync/codec/bit_stream.hpp>
#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/entropy_params.hpp>
#include <sparsesync/codec/entropy_x86.hpp>
#include <sparsesync/codec/rice.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>

SPARSESYNC_NS_BEGIN

namespace detail {

// The host's index of an element's class: its bits above the class field's low end, sign included (at most
// 512 values), so that a table lookup replaces the mask; key & (class_count - 1) is the raw class.
template <element_word W>
inline constexpr unsigned entropy_key_count = 1u << (8 * sizeof(W) - entropy_params::class_shift<W>);
inline constexpr unsigned entropy_max_keys = 512;

template <element_word W>
unsigned entropy_key_of(W bits) {
  return static_cast<unsigned>(bits) >> entropy_params::class_shift<W>;  // (a 32-bit shift: no 16-bit partial register)
}

// A chunk's groups of raw classes, formed from its base alone, so encoder and decoder agree on them.
struct entropy_groups {
  std::array<std::uint8_t, 256> of_class{};  // raw class -> group (classes absent from the base: unused)
  std::array<std::uint8_t, entropy_max_keys> of_key{};  // the same by entropy_key_of
  std::array<std::uint32_t, 256> size{};     // elements of each group
  unsigned count = 0;
};

// A chunk's base is counted and walked as `entropy_lanes` parts (entropy_lane_length): independent counter
// sets keep runs of one class from waiting on one counter (an increment in memory waits for the one before
// it), and the decoder's walk reuses each lane's counts to place the lane's changes on its own.
inline constexpr unsigned entropy_lanes = 4;
using entropy_lane_counts = std::array<std::array<std::uint32_t, entropy_max_keys>, entropy_lanes>;

// Lane l is [l * q, (l + 1) * q), the last one [(L - 1) * q, n), with q a multiple of the elements in 8 bytes.
template <element_word W>
std::size_t entropy_lane_length(std::size_t n) {
  constexpr std::size_t per_word = 8 / sizeof(W);
  return n / (entropy_lanes * per_word) * per_word;
}

// Calls f(lane, index, key) for every element of base, each lane in increasing order, the lanes interleaved.
// Each lane reads 8 bytes at a time (fewer loads: the walks are bound by them) on little-endian hosts.
template <element_word W, class F>
void entropy_for_each_key(std::span<const W> base, F&& f) {
  constexpr unsigned L = entropy_lanes;
  const std::size_t n = base.size(), q = entropy_lane_length<W>(n);
  const W* const b = base.data();
  if constexpr (std::endian::native == std::endian::little) {
    constexpr unsigned per_word = 8 / sizeof(W), bits = 8 * sizeof(W);
    for (std::size_t i = 0; i < q; i += per_word) {
      std::array<std::uint64_t, L> v;
      SPARSESYNC_HOST_UNROLL(4)
      for (unsigned l = 0; l < L; ++l) std::memcpy(&v[l], b + l * q + i, 8);
      SPARSESYNC_HOST_UNROLL(8)
      for (unsigned t = 0; t < per_word; ++t)
        SPARSESYNC_HOST_UNROLL(4)
        for (unsigned l = 0; l < L; ++l)
          f(l, l * q + i + t, static_cast<unsigned>(v[l] >> (bits * t + entropy_params::class_shift<W>)) & (entropy_key_count<W> - 1));
    }
  } else {
    for (std::size_t i = 0; i < q; ++i)
      for (unsigned l = 0; l < L; ++l) f(l, l * q + i, entropy_key_of(b[l * q + i]));
  }
  for (std::size_t i = L * q; i < n; ++i) f(L - 1, i, entropy_key_of(b[i]));
}

template <element_word W>
void entropy_count_classes(std::span<const W> base, entropy_lane_counts& h) {
  for (auto& c : h) std::fill_n(c.begin(), entropy_key_count<W>, 0u);
  entropy_for_each_key<W>(base, [&](unsigned l, std::size_t, unsigned k) { ++h[l][k]; });
}

// Elements of raw class c in lane l.
template <element_word W>
std::uint32_t entropy_class_count(const entropy_lane_counts& h, unsigned l, unsigned c) {
  std::uint32_t s = 0;
  for (unsigned k = c; k < entropy_key_count<W>; k += entropy_params::class_count<W>) s += h[l][k];
  return s;
}

// Classes in increasing order (empty ones skipped) join the open group, which closes once it holds at least
// max(1, numel >> group_shift) elements; a last group that stays smaller joins the one before it.
template <element_word W>
entropy_groups entropy_groups_of(const entropy_lane_counts& h, std::size_t n) {
  constexpr unsigned classes = entropy_params::class_count<W>;
  const std::uint32_t min_size = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(n >> entropy_params::group_shift));
  entropy_groups g;
  std::uint32_t open = 0;
  unsigned open_from = 0;
  for (unsigned c = 0; c < classes; ++c) {
    std::uint32_t s = 0;
    for (unsigned l = 0; l < entropy_lanes; ++l) s += entropy_class_count<W>(h, l, c);
    if (s == 0) continue;
    if (open == 0) open_from = c;
    g.of_class[c] = static_cast<std::uint8_t>(g.count);
    open += s;
    if (open >= min_size) {
      g.size[g.count++] = open;
      open = 0;
    }
  }
  if (open > 0) {
    if (g.count == 0) {
      g.size[g.count++] = open;
    } else {
      for (unsigned c = open_from; c < classes; ++c) g.of_class[c] = static_cast<std::uint8_t>(g.count - 1);
      g.size[g.count - 1] += open;
    }
  }
  for (unsigned k = 0; k < entropy_key_count<W>; ++k) g.of_key[k] = g.of_class[k & (classes - 1)];
  return g;
}

template <element_word W>
entropy_groups make_entropy_groups(std::span<const W> base) {
  entropy_lane_counts h;
  entropy_count_classes<W>(base, h);
  return entropy_groups_of<W>(h, base.size());
}

template <element_word W>
unsigned entropy_group_of(const entropy_groups& g, W bits) {
  return g.of_key[entropy_key_of(bits)];
}

// The scan that also hashes the base (entropy_scan_changes_hashed), as state and steps: rows of 8 bytes of each
// lane, read once for the counts, the ranks and the hash (entropy_x86.hpp).
template <element_word W>
struct entropy_scan {
  static constexpr unsigned L = entropy_lanes;
  static constexpr unsigned sign = entropy_params::class_count<W>;  // the sign's bit in a key
  static constexpr unsigned per_word = 8 / sizeof(W), bits = 8 * sizeof(W), mask = entropy_key_count<W> - 1;
  entropy_lane_counts& h;
  std::span<const std::uint32_t> positions;
  std::uint32_t* class_rank;
  std::uint16_t* key_of_change;
  std::size_t n, q;
  std::array<std::size_t, L + 1> first;  // lane l's changes are positions [first[l], first[l + 1])
  std::array<std::size_t, L> j;
  std::array<std::size_t, L> next;  // position of each lane's next change (n: none)

  entropy_scan(std::size_t numel, std::span<const std::uint32_t> pos, entropy_lane_counts& counts, std::uint32_t* rank, std::uint16_t* keys)
      : h(counts), positions(pos), class_rank(rank), key_of_change(keys), n(numel), q(entropy_lane_length<W>(numel)) {
    for (auto& c : h) std::fill_n(c.begin(), entropy_key_count<W>, 0u);
    for (unsigned l = 0; l < L; ++l)
      first[l] = static_cast<std::size_t>(std::lower_bound(positions.begin(), positions.end(), l * q) - positions.begin());
    first[L] = positions.size();
    for (unsigned l = 0; l < L; ++l) {
      j[l] = first[l];
      next[l] = j[l] < first[l + 1] ? positions[j[l]] : n;
    }
  }
  void step(unsigned l, std::size_t i, unsigned k) {
    if (i == next[l]) [[unlikely]] {
      class_rank[j[l]] = h[l][k] + h[l][k ^ sign];
      key_of_change[j[l]] = static_cast<std::uint16_t>(k);
      ++j[l];
      next[l] = j[l] < first[l + 1] ? positions[j[l]] : n;
    }
    ++h[l][k];
  }
  // The row at lane offset i (8 bytes of each lane, little-endian words v): the lanes' next changes are
  // compared once per row; most rows hold none, and their elements are only counted.
  void row(std::size_t i, const std::array<std::uint64_t, L>& v) {
    // (The loops unrolled at -O2 too, as in entropy_for_each_key.)
    bool quiet = true;
    SPARSESYNC_HOST_UNROLL(4)
    for (unsigned l = 0; l < L; ++l) quiet &= next[l] >= l * q + i + per_word;
    if (quiet) [[likely]] {
      SPARSESYNC_HOST_UNROLL(8)
      for (unsigned t = 0; t < per_word; ++t)
        SPARSESYNC_HOST_UNROLL(4)
        for (unsigned l = 0; l < L; ++l) ++h[l][static_cast<unsigned>(v[l] >> (bits * t + entropy_params::class_shift<W>)) & mask];
    } else {
      for (unsigned t = 0; t < per_word; ++t)
        for (unsigned l = 0; l < L; ++l) step(l, l * q + i + t, static_cast<unsigned>(v[l] >> (bits * t + entropy_params::class_shift<W>)) & mask);
    }
  }
};

// The encoder's one pass over a chunk's base: the class counts of entropy_count_classes and, for each change,
// its key and how many elements of its own class (either sign) precede it in its lane. Groups are not known
// yet (they follow from the counts), so ranks within groups come after (entropy_rank_changes).
// Lane by lane, the run before each change counted in a tight loop into two counter sets (alternate elements,
// so that a run of one class waits on two counters in turn rather than on one): a change costs the run's one
// exit instead of a compare on every element (the row walk of entropy_scan, which the hashing scan keeps, spent
// ~16 ns a change at 3.6% density on Zen 4: ~0.89 ns an element against 0.70 here).
template <element_word W>
void entropy_scan_changes(std::span<const W> base, std::span<const std::uint32_t> positions, entropy_lane_counts& h,
                          std::uint32_t* class_rank, std::uint16_t* key_of_change) {
  constexpr unsigned L = entropy_lanes, K = entropy_key_count<W>, sign = entropy_params::class_count<W>;
  const std::size_t n = base.size(), q = entropy_lane_length<W>(n);
  const W* const b = base.data();
  std::array<std::uint32_t, entropy_max_keys> odd;  // the second counter set; h[l] is the first
  std::size_t j = 0;
  for (unsigned l = 0; l < L; ++l) {
    std::uint32_t* const even = h[l].data();
    std::fill_n(even, K, 0u);
    std::fill_n(odd.data(), K, 0u);
    const std::size_t to = l + 1 == L ? n : (l + 1) * q;
    std::size_t e = l * q;
    const auto count_to = [&](std::size_t end) {
      for (; e + 2 <= end; e += 2) {
        ++even[entropy_key_of(b[e])];
        ++odd[entropy_key_of(b[e + 1])];
      }
      if (e < end) ++even[entropy_key_of(b[e++])];
    };
    for (; j < positions.size() && positions[j] < to; ++j) {
      const std::size_t p = positions[j];
      count_to(p);
      const unsigned k = entropy_key_of(b[p]);
      class_rank[j] = even[k] + even[k ^ sign] + odd[k] + odd[k ^ sign];
      key_of_change[j] = static_cast<std::uint16_t>(k);
    }
    count_to(to);
    for (unsigned k = 0; k < K; ++k) even[k] += odd[k];
  }
}

#if SPARSESYNC_HASH_AVX512
// entropy_count_classes and entropy_scan_changes for 16-bit words, each with the content checksum of the base
// (entropy_x86.hpp); they return it.
SPARSESYNC_ENTROPY_HASH_TARGET inline std::uint64_t entropy_count_classes_hashed(std::span<const std::uint16_t> base, entropy_lane_counts& h,
                                                                                 std::uint64_t first) {
  constexpr unsigned L = entropy_lanes;
  static_assert(L == 4, "entropy_lane_hash hashes four lanes");
  const std::uint16_t* const b = base.data();
  const std::size_t n = base.size(), q = entropy_lane_length<std::uint16_t>(n);
  if (index_run_length(first, n) < n) {  // (indices crossing a multiple of 2^32: entropy_lane_hash cannot take them)
    entropy_count_classes<std::uint16_t>(base, h);
    return checksums_avx512<false>(b, n, first).target;
  }
  for (auto& c : h) c.fill(0);
  entropy_lane_hash hash(b, first, q);
  const auto count_row = [&h, b, q](std::size_t i) {
    std::array<std::uint64_t, L> v;
    SPARSESYNC_HOST_UNROLL(4)
    for (unsigned l = 0; l < L; ++l) std::memcpy(&v[l], b + l * q + i, 8);
    // (Unrolled at -O2 too, where GCC 12 left these loops rolled: a stack round trip for each lane's word, variable
    // shifts and a branch an element made the pass about 2.5x slower, bench/results/cpu-s31.)
    SPARSESYNC_HOST_UNROLL(4)
    for (unsigned t = 0; t < 4; ++t)
      SPARSESYNC_HOST_UNROLL(4)
      for (unsigned l = 0; l < L; ++l) ++h[l][static_cast<unsigned>(v[l] >> (16 * t + 7)) & 511u];
  };
  std::size_t i = 0;
  for (; i + 8 <= q; i += 8) {
    hash.add(i);
    count_row(i);
    count_row(i + 4);
  }
  std::uint64_t sum = hash.sum();
  for (; i < q; i += 4) {  // a last row of four (q is a multiple of 4)
    count_row(i);
    for (unsigned l = 0; l < L; ++l) sum += checksums_avx512<false>(b + l * q + i, 4, first + l * q + i).target;
  }
  for (i = L * q; i < n; ++i) {
    ++h[L - 1][entropy_key_of(b[i])];
    sum += element_hash(first + i, b[i]);
  }
  return sum;
}

SPARSESYNC_ENTROPY_HASH_TARGET inline std::uint64_t entropy_scan_changes_hashed(std::span<const std::uint16_t> base, std::span<const std::uint32_t> positions,
                                                                                entropy_lane_counts& h, std::uint32_t* class_rank,
                                                                                std::uint16_t* key_of_change, std::uint64_t first) {
  entropy_scan<std::uint16_t> s(base.size(), positions, h, class_rank, key_of_change);
  const std::uint16_t* const b = base.data();
  entropy_row_hash hash(first, s.q);
  for (std::size_t i = 0; i < s.q; i += 4) {
    std::array<std::uint64_t, entropy_lanes> v;
    SPARSESYNC_HOST_UNROLL(4)
    for (unsigned l = 0; l < entropy_lanes; ++l) std::memcpy(&v[l], b + l * s.q + i, 8);
    hash.add(v);
    s.row(i, v);
  }
  std::uint64_t sum = hash.sum();
  for (std::size_t i = entropy_lanes * s.q; i < s.n; ++i) {
    s.step(entropy_lanes - 1, i, entropy_key_of(b[i]));
    sum += element_hash(first + i, b[i]);
  }
  return sum;
}
#endif

// The class count, and the base's content checksum in the same pass where the CPU can (16-bit words on
// little-endian x86 with AVX-512): then hash.sum gets it and hash.done is set.
template <element_word W>
void entropy_count_classes(std::span<const W> base, entropy_lane_counts& h, chunk_base_hash& hash) {
#if SPARSESYNC_HASH_AVX512
  if constexpr (sizeof(W) == 2) {
    if (cpu_has_avx512_hash()) {
      hash.sum += entropy_count_classes_hashed(base, h, hash.first);
      hash.done = true;
      return;
    }
  }
#endif
  entropy_count_classes<W>(base, h);
}

// The encoder's scan, likewise.
template <element_word W>
void entropy_scan_changes(std::span<const W> base, std::span<const std::uint32_t> positions, entropy_lane_counts& h,
                          std::uint32_t* class_rank, std::uint16_t* key_of_change, chunk_base_hash& hash) {
#if SPARSESYNC_HASH_AVX512
  if constexpr (sizeof(W) == 2) {
    if (cpu_has_avx512_hash()) {
      hash.sum += entropy_scan_changes_hashed(base, positions, h, class_rank, key_of_change, hash.first);
      hash.done = true;
      return;
    }
  }
#endif
  entropy_scan_changes<W>(base, positions, h, class_rank, key_of_change);
}

// Elements among b[0, n) whose class lies in [lo, hi] (a range of magnitudes; the loops vectorize).
template <element_word W>
std::uint32_t entropy_count_in_classes(const W* b, std::size_t n, unsigned lo, unsigned hi) {
  constexpr unsigned shift = entropy_params::class_shift<W>;
  constexpr W magnitude = static_cast<W>(static_cast<W>(~W{0}) >> 1);  // every bit below the sign
  const auto from = static_cast<W>(W(lo) << shift);
  const auto span = static_cast<W>((W(hi + 1) << shift) - 1 - from);
  const auto in = [&](W x) { return static_cast<W>((x & magnitude) - from) <= span ? 1u : 0u; };
  // Blocks of a fixed length, so that GCC vectorizes them at -O2 as well (its cheap cost model there takes only
  // loops that need no scalar epilogue); the rest element by element.
  std::uint32_t c = 0;
  std::size_t i = 0;
  const auto blocks = [&]<std::size_t block>() {
    for (; i + block <= n; i += block) {
      std::uint32_t in_block = 0;
      for (std::size_t k = 0; k < block; ++k) in_block += in(b[i + k]);
      c += in_block;
    }
  };
  blocks.template operator()<64>();
  blocks.template operator()<16>();
  for (; i < n; ++i) c += in(b[i]);
  return c;
}

// For each change: its group, and its rank among the group's elements (how many of them precede it), from
// entropy_scan_changes. In a group of one class the rank is the class rank plus the group's elements in the
// lanes before; a group of several classes (consecutive ones: rare classes that share a header) counts its
// elements in the lane up to each of its changes, as a range of magnitudes.
template <element_word W>
void entropy_rank_changes(const entropy_groups& g, const entropy_lane_counts& h, std::span<const W> base,
                          std::span<const std::uint32_t> positions, const std::uint32_t* class_rank, const std::uint16_t* key_of_change,
                          std::uint8_t* group_of_change, std::uint32_t* rank) {
  constexpr unsigned L = entropy_lanes;
  constexpr unsigned classes = entropy_params::class_count<W>;
  const unsigned groups = g.count;
  std::array<std::uint16_t, 256> lo, hi;  // each group's lowest and highest class present
  std::array<std::array<std::uint32_t, 256>, L> before{};  // elements of each group in the lanes before lane l
  std::array<bool, 256> any{};
  for (unsigned c = 0; c < classes; ++c) {
    std::uint32_t in_lane[L];
    std::uint32_t total = 0;
    for (unsigned l = 0; l < L; ++l) total += in_lane[l] = entropy_class_count<W>(h, l, c);
    if (total == 0) continue;
    const unsigned grp = g.of_class[c];
    if (!any[grp]) lo[grp] = static_cast<std::uint16_t>(c);
    any[grp] = true;
    hi[grp] = static_cast<std::uint16_t>(c);
    for (unsigned l = 1; l < L; ++l)
      for (unsigned m = 0; m < l; ++m) before[l][grp] += in_lane[m];
  }
  const std::size_t n = base.size(), q = entropy_lane_length<W>(n);
  std::array<std::size_t, 256> at;     // multi-class groups: counted up to here in the current lane
  std::array<std::uint32_t, 256> seen;  // and this many of their elements
  std::size_t j = 0;
  for (unsigned l = 0; l < L; ++l) {
    const std::size_t lane_end = l + 1 < L ? (l + 1) * q : n;
    std::fill_n(at.begin(), groups, l * q);
    std::fill_n(seen.begin(), groups, 0u);
    for (; j < positions.size() && positions[j] < lane_end; ++j) {
      const unsigned grp = g.of_key[key_of_change[j]];
      group_of_change[j] = static_cast<std::uint8_t>(grp);
      if (lo[grp] == hi[grp]) {
        rank[j] = before[l][grp] + class_rank[j];
        continue;
      }
      const std::uint32_t p = positions[j];
      seen[grp] += entropy_count_in_classes<W>(base.data() + at[grp], p - at[grp], lo[grp], hi[grp]);
      at[grp] = p;
      rank[j] = before[l][grp] + seen[grp];
    }
  }
}

// The Rice parameter in [0, max_k] with the fewest bits for v (ties to the smaller k); `cost` gets them.
inline unsigned entropy_best_k(const std::uint32_t* v, std::size_t n, unsigned max_k, unsigned raw_bits, std::uint64_t& cost) {
  if (n >= 64) {
    // Many values: one counting pass prices every k (the same choice as the loop below, which rice's tests check).
    rice_cost_histogram h;
    for (std::size_t i = 0; i < n; ++i) h.add(v[i]);
    return h.best(max_k, raw_bits, cost);
  }
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < n; ++i) any |= v[i];
  // From k = bit_width(largest) on every value has quotient 0, so a larger k only adds bits.
  const unsigned last = std::min<unsigned>(max_k, static_cast<unsigned>(std::bit_width(any)));
  unsigned best = 0;
  cost = ~std::uint64_t{0};
  for (unsigned k = 0; k <= last; ++k) {
    std::uint64_t c = 0;
    for (std::size_t i = 0; i < n; ++i) c += rice_cost(v[i], k, raw_bits);
    if (c < cost) {
      cost = c;
      best = k;
    }
  }
  return best;
}

// The field widths (shared with the device twin: entropy_params.hpp).
constexpr unsigned entropy_gap_raw_bits(std::uint32_t n) { return entropy_params::gap_raw_bits(n); }
constexpr unsigned entropy_max_gap_k(std::uint32_t n) { return entropy_params::max_gap_k_of(n); }
constexpr unsigned entropy_gap_k_bits(std::uint32_t n) { return entropy_params::gap_k_bits(n); }
template <element_word W>
constexpr unsigned entropy_value_k_bits(unsigned k) {
  return entropy_params::value_k_bits<W>(k);
}

// Everything the class body of a chunk says, from its changes (the fitting rules of FORMAT.md).
struct entropy_class_plan {
  entropy_groups groups;
  std::array<std::uint32_t, 256> changes{};  // per group
  std::array<std::uint32_t, 257> first{};    // group g's gaps and value codes at [first[g], first[g + 1])
  std::array<std::uint8_t, 256> k_gap{}, k_val{};
  std::vector<std::uint8_t> group_of_change;  // per change, in position order
  std::vector<std::uint32_t> gaps;            // by group
  std::vector<std::uint32_t> codes;           // ulp mode: value codes by group
  std::uint64_t bits = 0;                     // the class body's bits, tag byte excluded
  [[nodiscard]] std::size_t bytes() const { return 1 + static_cast<std::size_t>((bits + 7) / 8); }
};

constexpr unsigned entropy_count_bits(std::uint32_t size, std::uint32_t remaining) { return entropy_params::count_bits(size, remaining); }

// The fitted parameters (FORMAT.md's fitting rule) and the class body's bits, from a plan's groups, change
// counts, and gaps and value codes by group. The decoder prices what it read the same way.
template <element_word W>
void entropy_price(entropy_class_plan& p, value_mode mode) {
  constexpr unsigned value_bits = 8 * sizeof(W);
  const unsigned groups = p.groups.count;
  const std::uint32_t m = p.first[groups];
  std::uint64_t bits = 0;
  std::uint32_t remaining = m;
  for (unsigned g = 0; g < groups; ++g) {
    const std::uint32_t n = p.groups.size[g], c = p.changes[g];
    if (g + 1 < groups) bits += entropy_count_bits(n, remaining);
    remaining -= c;
    p.k_gap[g] = p.k_val[g] = 0;
    if (c > 0 && c < n) {
      std::uint64_t cost = 0;
      p.k_gap[g] = static_cast<std::uint8_t>(entropy_best_k(p.gaps.data() + p.first[g], c, entropy_max_gap_k(n), entropy_gap_raw_bits(n), cost));
      bits += entropy_gap_k_bits(n) + cost;
    }
    if (c > 0 && mode == value_mode::ulp) {
      std::uint64_t cost = 0;
      p.k_val[g] = static_cast<std::uint8_t>(entropy_best_k(p.codes.data() + p.first[g], c, value_bits - 1, value_bits, cost));
      bits += entropy_value_k_bits<W>(p.k_val[g]) + cost;
    }
  }
  if (mode == value_mode::absolute) bits += std::uint64_t{value_bits} * m;
  p.bits = bits;
}


// The encoder's plan from its changes in position order (p.group_of_change, ranks and values): gaps and value
// codes by group, then the fitted parameters.
template <element_word W>
void entropy_fit(entropy_class_plan& p, value_mode mode, std::span<const W> values, const std::uint32_t* rank) {
  const std::size_t m = p.group_of_change.size();
  const unsigned groups = p.groups.count;
  p.changes.fill(0);
  for (std::size_t j = 0; j < m; ++j) ++p.changes[p.group_of_change[j]];
  p.first[0] = 0;
  for (unsigned g = 0; g < groups; ++g) p.first[g + 1] = p.first[g] + p.changes[g];
  p.gaps.resize(m);
  if (mode == value_mode::ulp) p.codes.resize(m);
  std::array<std::uint32_t, 256> at{}, next{};  // fill cursor and next free rank per group
  for (unsigned g = 0; g < groups; ++g) at[g] = p.first[g];
  for (std::size_t j = 0; j < m; ++j) {
    const unsigned g = p.group_of_change[j];
    p.gaps[at[g]] = rank[j] - next[g];
    next[g] = rank[j] + 1;
    if (mode == value_mode::ulp) p.codes[at[g]] = static_cast<std::uint32_t>(zigzag(values[j])) - 1;
    ++at[g];
  }
  entropy_price<W>(p, mode);
}

// Buffers that encode and decode reuse from chunk to chunk (one set per thread): a chunk's plan, ranks and
// class counts.
struct entropy_scratch {
  entropy_class_plan plan;
  std::vector<std::uint32_t> rank, class_rank;
  std::vector<std::uint16_t> key_of_change;
  entropy_lane_counts counts;
};

inline entropy_scratch& entropy_thread_scratch() {
  static thread_local entropy_scratch s;
  return s;
}

// The class body's plan for a chunk's changes and base.
template <element_word W>
void entropy_plan_classes(entropy_class_plan& p, value_mode mode, std::span<const W> base, std::span<const std::uint32_t> positions,
                          std::span<const W> values, entropy_scratch& s, chunk_base_hash* hash = nullptr) {
  const std::size_t m = positions.size();
  s.rank.resize(m);
  s.class_rank.resize(m);
  s.key_of_change.resize(m);
  p.group_of_change.resize(m);
  if (hash) entropy_scan_changes<W>(base, positions, s.counts, s.class_rank.data(), s.key_of_change.data(), *hash);
  else entropy_scan_changes<W>(base, positions, s.counts, s.class_rank.data(), s.key_of_change.data());
  p.groups = entropy_groups_of<W>(s.counts, base.size());
  entropy_rank_changes<W>(p.groups, s.counts, base, positions, s.class_rank.data(), s.key_of_change.data(), p.group_of_change.data(),
                          s.rank.data());
  entropy_fit<W>(p, mode, values, s.rank.data());
}

}  // namespace detail

struct entropy {
  using encoder_concept = encoder_tag;
  static constexpr encoder_id id = encoder_id::entropy;
  static constexpr std::string_view name = encoder_table_row(id).name;
  static constexpr bool needs_base = true;

  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
    if (in.positions.empty()) return;
    require_base(in);
    auto& s = detail::entropy_thread_scratch();
    auto& p = s.plan;
    detail::entropy_plan_classes<W>(p, in.mode, in.base.first(in.numel), in.positions, in.values, s, in.hash_base);
    // The class body only where it is strictly smaller (ties keep rice's data, which needs no base); rice is
    // planned only where the floor under its body leaves that open.
    if (p.bytes() < 1 + rice::least_bytes(in)) {
      write_classes(in, p, out);
      return;
    }
    const auto fallback = rice::plan(in);
    if (p.bytes() >= 1 + fallback.bytes) {
      out.push_back(static_cast<unsigned char>(entropy_params::tag_rice));
      rice::encode(in, out, fallback);
      return;
    }
    write_classes(in, p, out);
  }

  // Bytes encode() appends (it reads in.base, as encode does).
  template <element_word W>
  static std::size_t encoded_size(const chunk_changes<W>& in) {
    if (in.positions.empty()) return 0;
    require_base(in);
    auto& s = detail::entropy_thread_scratch();
    auto& p = s.plan;
    detail::entropy_plan_classes<W>(p, in.mode, in.base.first(in.numel), in.positions, in.values, s);
    if (p.bytes() < 1 + rice::least_bytes(in)) return p.bytes();
    return std::min(p.bytes(), 1 + rice::plan(in).bytes);
  }

  // The classes come from the base: a caller that filled no base (needs_base) gets an error, not a read past it.
  template <element_word W>
  static void require_base(const chunk_changes<W>& in) {
    if (in.base.size() < in.numel) throw error(errc::invalid_argument, "entropy needs the chunk's base elements (needs_base)");
  }

  template <element_word W>
  static status decode(std::span<const unsigned char> data, const chunk_context<W>& ctx, std::vector<std::uint32_t>& positions,
                       std::vector<W>& values) {
    positions.clear();
    values.clear();
    if (ctx.changes == 0) return data.empty() ? status{} : status{errc::malformed, "data present for a chunk without changes"};
    if (data.empty()) return {errc::truncated, "entropy chunk"};
    if (ctx.base.size() < ctx.numel) return {errc::invalid_argument, "entropy needs the chunk's base elements"};
    const auto base = ctx.base.first(ctx.numel);
    if (data[0] == entropy_params::tag_rice) return decode_fallback(data, ctx, base, positions, values);
    if (data[0] != entropy_params::tag_classes) return {errc::malformed, "entropy chunk tag " + std::to_string(data[0])};
    return decode_classes(data, ctx, base, positions, values);
  }

 private:
  // Positions from each change's group and rank (`rank`, by group as p.first says): walks the chunk counting
  // down each group's elements to its next change. Each lane of the chunk (entropy_count_classes' lanes, whose
  // counts tell each group's first rank in it) is walked on its own, all in one loop: a group's countdown then
  // waits only on its own lane's last step, not on the element before. Fills p.group_of_change; the ranks of
  // each group must lie below its size.
  template <element_word W>
  static void place_changes(detail::entropy_class_plan& p, const detail::entropy_lane_counts& counts, std::span<const W> base,
                            const std::vector<std::uint32_t>& rank, std::uint32_t changes, std::vector<std::uint32_t>& positions) {
    constexpr unsigned L = detail::entropy_lanes;
    const unsigned groups = p.groups.count;
    constexpr unsigned classes = entropy_params::class_count<W>;
    positions.resize(changes);
    p.group_of_change.resize(changes);
    // Per lane: each group's next change (index into rank), where its changes in the lane end, and a countdown
    // of its elements up to and including the next change (when none is left it starts at 2^32 - 1, more
    // than a chunk holds, so it never reaches 0).
    constexpr std::uint32_t none = ~std::uint32_t{0};
    std::array<std::array<std::uint32_t, 256>, L> cursor, last, countdown;
    std::array<std::uint32_t, 256> in_group{}, start{};  // elements of a group in one lane; its first rank there
    std::array<std::uint32_t, L> at{};                   // where each lane's next change goes in positions
    std::uint32_t placed = 0;
    for (unsigned g = 0; g < groups; ++g) cursor[0][g] = p.first[g];
    for (unsigned l = 0; l < L; ++l) {
      at[l] = placed;
      in_group.fill(0);
      for (unsigned c = 0; c < classes; ++c) in_group[p.groups.of_class[c]] += detail::entropy_class_count<W>(counts, l, c);
      for (unsigned g = 0; g < groups; ++g) {
        const std::uint32_t end_rank = start[g] + in_group[g];
        std::uint32_t e = cursor[l][g];
        while (e < p.first[g + 1] && rank[e] < end_rank) ++e;
        last[l][g] = e;
        countdown[l][g] = cursor[l][g] < e ? rank[cursor[l][g]] - start[g] + 1 : none;
        if (l + 1 < L) cursor[l + 1][g] = e;
        placed += e - cursor[l][g];
        start[g] = end_rank;
      }
    }
    std::uint32_t* const pos = positions.data();
    std::uint8_t* const grp = p.group_of_change.data();
    const std::uint32_t* const rk = rank.data();
    const std::uint8_t* const of_key = p.groups.of_key.data();  // (a copy: grp's byte stores may alias the plan)
    // One decrement in memory whose zero flag says "here"; the common case falls through.
    const auto step = [&](unsigned l, std::size_t i, unsigned k) {
      const unsigned g = of_key[k];
      if (--countdown[l][g] != 0) [[likely]]
        return;
      pos[at[l]] = static_cast<std::uint32_t>(i);
      grp[at[l]++] = static_cast<std::uint8_t>(g);
      const std::uint32_t e = ++cursor[l][g];
      countdown[l][g] = e < last[l][g] ? rk[e] - rk[e - 1] : none;
    };
#if SPARSESYNC_HASH_AVX512
    if constexpr (sizeof(W) == 2) {
      // At every density where the CPU has it (faster than the scalar walk on the real stream at 0.9-3.6% on a
      // Zen 4; bench/results/entropy-cpu.md, session 26).
      if (detail::cpu_has_avx512_walk() && placing_walk() != walk_mode::scalar) {
        // Lane by lane (each has its own counters and output range), 1024 elements a step, the rest one by one.
        const std::size_t n = base.size(), q = detail::entropy_lane_length<W>(n);
        const auto* b = reinterpret_cast<const std::uint16_t*>(base.data());
        for (unsigned l = 0; l < L; ++l) {
          const std::size_t from = l * q, to = l + 1 < L ? from + q : n;
          std::size_t i = detail::entropy_place_avx512(b, from, to, p.groups.of_class.data(), groups, countdown[l].data(), cursor[l].data(),
                                                       last[l].data(), rk, pos, grp, at[l]);
          for (; i < to; ++i) step(l, i, detail::entropy_key_of(base[i]));
        }
        return;
      }
    }
#endif
    detail::entropy_for_each_key<W>(base, step);
  }

 public:
  // Tests: the decoder's placing walk with or without its vector path (entropy_x86.hpp, where the CPU has it) at
  // every density, to compare the two. Per thread.
  enum class walk_mode { automatic, scalar, vector };
  static walk_mode& placing_walk() {
    thread_local walk_mode mode = walk_mode::automatic;
    return mode;
  }

 private:

  template <element_word W>
  static void write_classes(const chunk_changes<W>& in, const detail::entropy_class_plan& p, std::vector<unsigned char>& out) {
    constexpr unsigned value_bits = 8 * sizeof(W);
    const std::size_t at = out.size();
    // bit_sink stores 4 bytes at a time: room for its last store, trimmed after.
    out.resize(at + p.bytes() + 4, 0);
    out[at] = static_cast<unsigned char>(entropy_params::tag_classes);
    detail::bit_sink w(out.data() + at + 1);
    const unsigned groups = p.groups.count;
    auto remaining = static_cast<std::uint32_t>(in.positions.size());
    for (unsigned g = 0; g < groups; ++g) {
      const std::uint32_t n = p.groups.size[g], c = p.changes[g];
      if (g + 1 < groups) w.put(c, detail::entropy_count_bits(n, remaining));
      remaining -= c;
      if (c > 0 && c < n) w.put(p.k_gap[g], detail::entropy_gap_k_bits(n));
      if (c > 0 && in.mode == value_mode::ulp) {
        w.put((std::uint64_t{1} << p.k_val[g]) - 1, p.k_val[g]);
        if (p.k_val[g] < value_bits - 1) w.put(0, 1);
      }
    }
    for (unsigned g = 0; g < groups; ++g) {
      const std::uint32_t n = p.groups.size[g], c = p.changes[g];
      if (c == 0 || c == n) continue;
      const unsigned raw = detail::entropy_gap_raw_bits(n);
      for (std::uint32_t i = p.first[g]; i < p.first[g + 1]; ++i) w.rice(p.gaps[i], p.k_gap[g], raw);
    }
    if (in.mode == value_mode::ulp) {
      for (std::size_t j = 0; j < in.values.size(); ++j)
        w.rice(std::uint64_t{zigzag(in.values[j])} - 1, p.k_val[p.group_of_change[j]], value_bits);
    } else {
      for (W v : in.values) w.put(v, value_bits);
    }
    w.finish();
    out.resize(at + p.bytes());
  }

  template <element_word W>
  static status decode_fallback(std::span<const unsigned char> data, const chunk_context<W>& ctx, std::span<const W> base,
                                std::vector<std::uint32_t>& positions, std::vector<W>& values) {
    // rice::decode also refuses parameters other than rice's fitted ones (FORMAT.md §3.4.1, tag 0).
    if (auto s = rice::decode<W>(data.subspan(1), ctx, positions, values); !s) return s.prefix("entropy (rice body)");
    auto& s = detail::entropy_thread_scratch();
    auto& p = s.plan;
    detail::entropy_plan_classes<W>(p, ctx.mode, base, positions, values, s, ctx.hash_base);
    if (p.bytes() < data.size()) return {errc::non_canonical, "entropy: the class body is smaller than the rice body sent"};
    return {};
  }

  template <element_word W>
  static status decode_classes(std::span<const unsigned char> data, const chunk_context<W>& ctx, std::span<const W> base,
                               std::vector<std::uint32_t>& positions, std::vector<W>& values) {
    constexpr unsigned value_bits = 8 * sizeof(W);
    auto& s = detail::entropy_thread_scratch();
    auto& p = s.plan;
    if (ctx.hash_base) detail::entropy_count_classes<W>(base, s.counts, *ctx.hash_base);
    else detail::entropy_count_classes<W>(base, s.counts);
    p.groups = detail::entropy_groups_of<W>(s.counts, base.size());
    const unsigned groups = p.groups.count;
    detail::bit_reader r(data.data() + 1, data.data() + data.size());
    // Header: per group its change count, gap and value parameters.
    std::uint32_t remaining = ctx.changes;
    for (unsigned g = 0; g < groups; ++g) {
      const std::uint32_t n = p.groups.size[g];
      std::uint32_t c = remaining;
      if (g + 1 < groups) {
        c = static_cast<std::uint32_t>(r.get(detail::entropy_count_bits(n, remaining)));
        if (c > std::min(n, remaining)) return {errc::malformed, "entropy: group " + std::to_string(g) + " change count out of range"};
      } else if (c > n) {
        return {errc::malformed, "entropy: more changes than the last group's elements"};
      }
      p.changes[g] = c;
      remaining -= c;
      p.k_gap[g] = p.k_val[g] = 0;  // (the scratch plan holds the last chunk's)
      if (c > 0 && c < n) {
        p.k_gap[g] = static_cast<std::uint8_t>(r.get(detail::entropy_gap_k_bits(n)));
        if (p.k_gap[g] > detail::entropy_max_gap_k(n)) return {errc::malformed, "entropy: gap parameter out of range"};
      }
      if (c > 0 && ctx.mode == value_mode::ulp) p.k_val[g] = static_cast<std::uint8_t>(r.get_unary(value_bits - 1));
    }
    if (r.failed()) return {errc::truncated, "entropy: group header"};
    // Each change of a group that is not wholly changed takes at least one bit: a lying count fails here.
    p.first[0] = 0;
    for (unsigned g = 0; g < groups; ++g) p.first[g + 1] = p.first[g] + p.changes[g];
    {
      std::uint64_t least = 0;
      for (unsigned g = 0; g < groups; ++g)
        if (p.changes[g] < p.groups.size[g]) least += p.changes[g];
      if (least > 8 * static_cast<std::uint64_t>(data.size())) return {errc::truncated, "entropy: gaps"};
    }
    // Ranks within each group, group by group (a wholly changed group has no gaps: ranks 0, 1, ...); the gaps
    // are kept for the canonical check.
    auto& rank = s.rank;
    rank.resize(ctx.changes);
    p.gaps.resize(ctx.changes);
    for (unsigned g = 0; g < groups; ++g) {
      const std::uint32_t n = p.groups.size[g], c = p.changes[g];
      if (c == n) {
        for (std::uint32_t i = 0; i < c; ++i) rank[p.first[g] + i] = i, p.gaps[p.first[g] + i] = 0;
        continue;
      }
      const unsigned raw = detail::entropy_gap_raw_bits(n);
      std::uint64_t next = 0;
      for (std::uint32_t i = p.first[g]; i < p.first[g + 1]; ++i) {
        std::uint64_t gap = 0;
        if (!detail::rice_get(r, p.k_gap[g], raw, gap))
          return {r.failed() ? errc::truncated : errc::non_canonical, "entropy: gap in group " + std::to_string(g)};
        next += gap;
        if (next >= n) return {errc::index_out_of_range, "entropy: change past the end of group " + std::to_string(g)};
        rank[i] = static_cast<std::uint32_t>(next);
        p.gaps[i] = static_cast<std::uint32_t>(gap);
        ++next;
      }
    }
    place_changes<W>(p, s.counts, base, rank, ctx.changes, positions);
    // Values, in position order (their codes kept by group for the canonical check), and a floor under the
    // bits of rice's body for the same changes (rice::bytes_at_least).
    values.resize(ctx.changes);
    std::uint64_t rice_floor_bits = 0;
    std::uint32_t next_position = 0;
    if (ctx.mode == value_mode::ulp) {
      p.codes.resize(ctx.changes);
      std::array<std::uint32_t, 256> at;
      std::copy_n(p.first.begin(), groups, at.begin());
      for (std::uint32_t j = 0; j < ctx.changes; ++j) {
        const unsigned g = p.group_of_change[j];
        std::uint64_t code = 0;
        if (!detail::rice_get(r, p.k_val[g], value_bits, code))
          return {r.failed() ? errc::truncated : errc::non_canonical, "entropy: value at change " + std::to_string(j)};
        if (code >= (std::uint64_t{1} << value_bits) - 1) return {errc::malformed, "entropy: value out of range at change " + std::to_string(j)};
        values[j] = unzigzag(static_cast<W>(code + 1));
        p.codes[at[g]++] = static_cast<std::uint32_t>(code);
        rice_floor_bits += rice::gap_floor(positions[j] - next_position) + rice::value_floor<W>(code);
        next_position = positions[j] + 1;
      }
    } else {
      for (std::uint32_t j = 0; j < ctx.changes; ++j) {
        values[j] = static_cast<W>(r.get(value_bits));
        rice_floor_bits += rice::gap_floor(positions[j] - next_position) + value_bits;
        next_position = positions[j] + 1;
      }
      if (r.failed()) return {errc::truncated, "entropy: values"};
    }
    if (!r.at_padded_end()) return {errc::malformed, "entropy: trailing bits after the last value"};
    // Canonical: the parameters must be the fitted ones for the gaps and value codes read (priced as the
    // encoder prices its own), and the class body the smaller choice.
    const auto k_gap = p.k_gap, k_val = p.k_val;
    detail::entropy_price<W>(p, ctx.mode);
    for (unsigned g = 0; g < groups; ++g)
      if (p.k_gap[g] != k_gap[g] || p.k_val[g] != k_val[g])
        return {errc::non_canonical, "entropy: group " + std::to_string(g) + " parameters are not the fitted ones"};
    chunk_changes<W> in;
    in.numel = ctx.numel;
    in.mode = ctx.mode;
    in.positions = positions;
    in.values = values;
    // (rice is planned only where its floor leaves the comparison open: on real streams the class body is far
    // smaller, and the plan took ~7% of an apply at 3.6% density.)
    if (p.bytes() >= 1 + rice::bytes_at_least(rice_floor_bits) && p.bytes() >= 1 + rice::plan(in).bytes)
      return {errc::non_canonical, "entropy: a class body where the rice body is no larger"};
    return {};
  }
};

SPARSESYNC_NS_END
