// The content checksum of a chunk's base in the passes of the entropy codec that read every base element
// anyway (the decoder's class count, the encoder's scan: codec/entropy.hpp), for 16-bit words with AVX-512:
// the base is read once for both instead of twice, and the checksum's vector work runs beside the passes'
// scalar counting on other units of the core, so the pair costs little more than the checksum alone.
// Checked once at run time (hash_x86.hpp); the same sums as content_checksum (tests/core/entropy_test.cpp).
// Also the decoder's placing walk for 16-bit words with AVX-512 VBMI (entropy_place_avx512, below).
#pragma once

#include <sparsesync/codec/entropy_params.hpp>
#include <sparsesync/core/hash_x86.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace detail {

#if SPARSESYNC_HASH_AVX512
#define SPARSESYNC_ENTROPY_HASH_TARGET __attribute__((target("avx512f,avx512dq,avx512bw")))

// Hashes the four lanes of the decoder's class count (entropy_count_classes_hashed; lane l at offset l * q, flat
// indices from first + l * q), eight contiguous elements of each lane a call, beside the count's rows of four. The
// vectors load the words themselves, and the partial products that depend only on the indices' high 32 bits are
// constants (element_hash8::run); entropy_row_hash's rows gather words from general registers and recompute them.
// The pass is bound by this vector work (its counting runs on the scalar units beside it). Every index of the
// lanes must share its high 32 bits (index_run_length).
struct entropy_lane_hash {
  element_hash8 hash;
  element_hash8::run run;
  __m512i index, lane1, lane2, lane3, sum0, sum1, sum2, sum3;
  const std::uint16_t *b0, *b1, *b2, *b3;

  SPARSESYNC_ENTROPY_HASH_TARGET entropy_lane_hash(const std::uint16_t* b, std::uint64_t first, std::uint64_t q)
      : run(hash.run_of(first)),
        index(element_hash8::first_indices(first)),
        lane1(_mm512_set1_epi64(static_cast<long long>(q))),
        lane2(_mm512_set1_epi64(static_cast<long long>(2 * q))),
        lane3(_mm512_set1_epi64(static_cast<long long>(3 * q))),
        sum0(_mm512_setzero_si512()),
        sum1(sum0),
        sum2(sum0),
        sum3(sum0),
        b0(b),
        b1(b + q),
        b2(b + 2 * q),
        b3(b + 3 * q) {}

  // Lane offsets i .. i + 7 (i = 0, 8, 16, ... in turn).
  SPARSESYNC_ALWAYS_INLINE SPARSESYNC_ENTROPY_HASH_TARGET void add(std::size_t i) {
    sum0 = _mm512_add_epi64(sum0, hash.of(hash.at(index, run), load8_widened(b0 + i)));
    sum1 = _mm512_add_epi64(sum1, hash.of(hash.at(_mm512_add_epi64(index, lane1), run), load8_widened(b1 + i)));
    sum2 = _mm512_add_epi64(sum2, hash.of(hash.at(_mm512_add_epi64(index, lane2), run), load8_widened(b2 + i)));
    sum3 = _mm512_add_epi64(sum3, hash.of(hash.at(_mm512_add_epi64(index, lane3), run), load8_widened(b3 + i)));
    index = _mm512_add_epi64(index, _mm512_set1_epi64(8));
  }

  SPARSESYNC_ENTROPY_HASH_TARGET std::uint64_t sum() const { return lane_sum(sum0) + lane_sum(sum1) + lane_sum(sum2) + lane_sum(sum3); }
};

// Hashes the rows of the encoder's scan (entropy_scan_changes_hashed) over four lanes (lane l at offset l * q):
// row i is four 16-bit elements of each lane, at flat indices first + l * q + i .. + 3, given as each lane's 8
// bytes. (entropy_lane_hash beside the scan's row walk, which tests each row for changes, made the encode slower.)
struct entropy_row_hash {
  element_hash8 hash;
  __m512i index01, index23, sum01, sum23;

  SPARSESYNC_ENTROPY_HASH_TARGET entropy_row_hash(std::uint64_t first, std::uint64_t q)
      : index01(_mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)),
                                 _mm512_setr_epi64(0, 1, 2, 3, static_cast<long long>(q), static_cast<long long>(q + 1),
                                                   static_cast<long long>(q + 2), static_cast<long long>(q + 3)))),
        index23(_mm512_add_epi64(index01, _mm512_set1_epi64(static_cast<long long>(2 * q)))),
        sum01(_mm512_setzero_si512()),
        sum23(_mm512_setzero_si512()) {}

  // Rows in increasing order from row 0 (the indices advance by four per row).
  SPARSESYNC_ALWAYS_INLINE SPARSESYNC_ENTROPY_HASH_TARGET void add(const std::array<std::uint64_t, 4>& v) {
    const __m512i bits01 = _mm512_cvtepu16_epi64(_mm_set_epi64x(static_cast<long long>(v[1]), static_cast<long long>(v[0])));
    const __m512i bits23 = _mm512_cvtepu16_epi64(_mm_set_epi64x(static_cast<long long>(v[3]), static_cast<long long>(v[2])));
    sum01 = _mm512_add_epi64(sum01, hash.of(hash.at(index01), bits01));
    sum23 = _mm512_add_epi64(sum23, hash.of(hash.at(index23), bits23));
    const __m512i four = _mm512_set1_epi64(4);
    index01 = _mm512_add_epi64(index01, four);
    index23 = _mm512_add_epi64(index23, four);
  }

  SPARSESYNC_ENTROPY_HASH_TARGET std::uint64_t sum() const { return lane_sum(sum01) + lane_sum(sum23); }
};

// The decoder's placing walk (entropy::place_changes) over one lane of 16-bit words, 1024 elements a step: the
// step's classes (entropy_params::class_of) become group bytes by a 256-entry table lookup (two two-table byte
// permutes and a blend, 64 at a time), and each group that still has a change to place counts its elements in the
// step by sixteen compare masks: where its countdown runs out inside the step, the change is the countdown-th set
// bit of the masks. The step's changes are marked in a 1024-bit map (their groups beside it) and read out in
// position order. The scalar walk decrements a counter in memory per element, with a branch that mispredicts at
// every change (~34% of an apply on a Zen 4); here a group still placing costs a few instructions and one branch
// per 1024 elements. (64-element steps, sorting each step's changes, were no faster than the scalar walk at 3.6%
// density; of 256 to 4096, 1024 was the fastest there, 2048 and 4096 no faster: bench/results/entropy-cpu.md,
// session 26.) The same positions and groups as the scalar walk over [from, to) (tests/core/entropy_test.cpp compares
// them), and the same counters for every group still placing: `countdown`, `cursor`, `last`, `rank` and `at` as
// there; the caller walks the elements past the last whole step.
#define SPARSESYNC_ENTROPY_WALK_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,bmi,bmi2,popcnt")))

inline bool cpu_has_avx512_walk() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
  }();
  return has;
}

// Returns the index where the scalar walk takes over (from + a multiple of the step).
SPARSESYNC_ENTROPY_WALK_TARGET inline std::size_t entropy_place_avx512(const std::uint16_t* base, std::size_t from, std::size_t to,
                                                                      const std::uint8_t* of_class, unsigned groups, std::uint32_t* countdown,
                                                                      std::uint32_t* cursor, const std::uint32_t* last, const std::uint32_t* rank,
                                                                      std::uint32_t* pos, std::uint8_t* grp, std::uint32_t& at) {
  constexpr unsigned shift = entropy_params::class_shift<std::uint16_t>;
  static_assert(entropy_params::class_count<std::uint16_t> == 256 && shift + 8 <= 16, "a class is the byte at bit `shift`");
  constexpr std::uint32_t none = ~std::uint32_t{0};
  constexpr unsigned step = 1024, words = step / 64;
  std::array<std::uint8_t, 256> active;  // groups with a change left to place in this lane
  unsigned n_active = 0;
  for (unsigned g = 0; g < groups; ++g)
    if (countdown[g] != none) active[n_active++] = static_cast<std::uint8_t>(g);
  const __m512i t0 = _mm512_loadu_si512(of_class), t1 = _mm512_loadu_si512(of_class + 64);
  const __m512i t2 = _mm512_loadu_si512(of_class + 128), t3 = _mm512_loadu_si512(of_class + 192);
  alignas(64) std::array<std::uint8_t, step> hit_group;  // the group of each change marked in `hits`
  std::size_t i = from;
  for (; n_active > 0 && i + step <= to; i += step) {
    __m512i group[words];  // (a plain array: std::array would drop the vector type's attributes)
    // (The word loops unrolled at -O2 too: GCC 12 left them rolled there, and the walk slower.)
    SPARSESYNC_HOST_UNROLL(16)
    for (unsigned q = 0; q < words; ++q) {
      const std::uint16_t* b = base + i + 64 * q;
      const __m512i c0 = _mm512_srli_epi16(_mm512_loadu_si512(b), shift), c1 = _mm512_srli_epi16(_mm512_loadu_si512(b + 32), shift);
      const __m512i cls = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(c0)), _mm512_cvtepi16_epi8(c1), 1);
      const __m512i low = _mm512_permutex2var_epi8(t0, cls, t1), high = _mm512_permutex2var_epi8(t2, cls, t3);
      group[q] = _mm512_mask_blend_epi8(_mm512_movepi8_mask(cls), low, high);
    }
    std::array<std::uint64_t, words> hits{};
    for (unsigned a = 0; a < n_active;) {
      const unsigned g = active[a];
      const __m512i gb = _mm512_set1_epi8(static_cast<char>(g));
      std::array<std::uint64_t, words> m;
      std::array<std::uint32_t, words> below;  // elements of g in the words before each
      std::uint32_t c = 0;
      SPARSESYNC_HOST_UNROLL(16)
      for (unsigned q = 0; q < words; ++q) {
        m[q] = _mm512_cmpeq_epi8_mask(group[q], gb);
        below[q] = c;
        c += static_cast<std::uint32_t>(_mm_popcnt_u64(m[q]));
      }
      std::uint32_t d = countdown[g];
      if (c < d) [[likely]] {
        countdown[g] = d - c;
        ++a;
        continue;
      }
      std::uint32_t taken = 0;  // g's elements in the step up to and including its last change found
      do {                      // the (taken + d)-th element of g in this step is its next change
        const std::uint32_t target = taken + d;
        unsigned q = 0;
        for (unsigned j = 1; j < words; ++j) q += target > below[j];
        const auto bit = static_cast<unsigned>(_tzcnt_u64(_pdep_u64(std::uint64_t{1} << (target - below[q] - 1), m[q])));
        hits[q] |= std::uint64_t{1} << bit;
        hit_group[64 * q + bit] = static_cast<std::uint8_t>(g);
        taken = target;
        const std::uint32_t e = ++cursor[g];
        d = e < last[g] ? rank[e] - rank[e - 1] : none;
      } while (d != none && c - taken >= d);
      if (d == none) {
        countdown[g] = none;
        active[a] = active[--n_active];  // (the order of the active groups does not matter)
      } else {
        countdown[g] = d - (c - taken);
        ++a;
      }
    }
    for (unsigned q = 0; q < words; ++q)
      for (std::uint64_t w = hits[q]; w != 0; w &= w - 1) {
        const auto bit = static_cast<unsigned>(_tzcnt_u64(w));
        pos[at] = static_cast<std::uint32_t>(i + 64 * q + bit);
        grp[at++] = hit_group[64 * q + bit];
      }
  }
  return n_active == 0 ? to : i;
}
#endif

}  // namespace detail
SPARSESYNC_NS_END
